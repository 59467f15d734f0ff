//! The wire shape both bearer kinds share, per-call tokens ([`super::call_token`], `v1.`) and
//! resume credentials ([`super::resume_credential`], `vr1.`):
//! `<prefix><base64url-nopad payload>.<base64url-nopad HMAC-SHA256(key, prefix + payload)>`.
//! The MAC covers the prefix and the payload exactly as sent and is checked (in constant time,
//! by `hmac`) before the payload is decoded, so unauthenticated bytes are never parsed.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why an envelope did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeError {
    /// Not `<prefix><payload>.<mac>` in base64url.
    Format,
    BadSignature,
    /// The MAC verified but the payload is not base64url.
    Payload,
}

fn mac(key: &[u8], prefix: &str, payload: &str) -> HmacSha256 {
    // HMAC takes keys of any length; this cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(prefix.as_bytes());
    mac.update(payload.as_bytes());
    mac
}

/// Signs `json` under `prefix`.
pub fn seal(key: &[u8], prefix: &str, json: &[u8]) -> String {
    let payload = URL_SAFE_NO_PAD.encode(json);
    let sig = URL_SAFE_NO_PAD.encode(mac(key, prefix, &payload).finalize().into_bytes());
    format!("{prefix}{payload}.{sig}")
}

/// Checks `token`'s MAC and returns its decoded payload and its MAC bytes.
pub fn open(key: &[u8], prefix: &str, token: &str) -> Result<(Vec<u8>, Vec<u8>), EnvelopeError> {
    let rest = token.strip_prefix(prefix).ok_or(EnvelopeError::Format)?;
    let (payload, sig) = rest.split_once('.').ok_or(EnvelopeError::Format)?;
    let sig = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| EnvelopeError::Format)?;
    mac(key, prefix, payload)
        .verify_slice(&sig)
        .map_err(|_| EnvelopeError::BadSignature)?;
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| EnvelopeError::Payload)?;
    Ok((json, sig))
}
