//! Resume credentials: what lets a caller carry its call onto a new session, on any
//! transceiver of the fleet, after it lost the old one (docs/continuity.md). Sans-IO: the
//! caller passes the Unix time.
//!
//! Wire format (ASCII, fits an `Authorization: Bearer` header):
//!
//! ```text
//! vr1.<payload>.<mac>
//! payload = base64url-nopad( JSON {"c": "<call id, 32 hex>", "g": <generation>,
//!                                  "s": "<session id, 32 hex>", "w": "<worker id>",
//!                                  "o": "<creator>", "exp": <unix seconds>} )
//! mac     = base64url-nopad( HMAC-SHA256(resume key, "vr1." + payload) )
//! ```
//!
//! The transceivers mint these themselves (nobody else holds the resume key), so a credential
//! that verifies says exactly what one of them said about one session: which call it carries
//! (`c`), at which generation (`g`: 1 for a call's first session, +1 per resume), which worker
//! owned the call then (`w`, empty before one attached), and who created the call (`o`:
//! `"a"` anyone, `"o"` the operator, `"t<32 hex>"` a per-call token's id), so that the resumed
//! session is controlled by the same creator. It is signed, not encrypted: the caller may read
//! it. The MAC is checked (in constant time, by `hmac`) before the payload is parsed. Whether
//! a credential was used already is not decided here but by [`super::resume_uses`] (on this
//! transceiver) and by the backend (across transceivers: it accepts a resume only at the
//! generation it serves the call at). The envelope is [`super::signed_envelope`]'s, as a call
//! token's is.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::call_token::CallTokenId;
use super::creator::Creator;
use super::signed_envelope::{open, seal, EnvelopeError};

/// The prefix that marks a resume credential (neither a static token nor a call token starts
/// with it).
pub const PREFIX: &str = "vr1.";
/// Longest credential accepted: bounds the work an unauthenticated request can cause (a real
/// one is under 400 bytes with a 128-byte worker id).
pub const MAX_CREDENTIAL_LEN: usize = 1024;
/// Longest worker id carried; a longer one is left out (the resume then goes to any worker).
pub const MAX_WORKER_LEN: usize = 128;
/// Shortest key accepted, as for call tokens.
pub const MIN_KEY_LEN: usize = 32;
/// Longest lifetime a credential may claim at verification (a minted one lives the TTL).
pub const MAX_LIFETIME_SECS: u64 = 3600;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum ResumeError {
    #[error("not a resume credential")]
    Format,
    #[error("resume credential signature does not verify")]
    BadSignature,
    #[error("resume credential payload is malformed")]
    Payload,
    #[error("resume credential has expired")]
    Expired,
}

impl ResumeError {
    /// The `outcome` label of `voxgate_resume_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            ResumeError::Expired => "expired",
            _ => "invalid",
        }
    }
}

/// What a verified credential says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeClaims {
    pub call_id: u128,
    pub generation: u32,
    pub session_id: u128,
    /// The worker that owned the call when the credential was minted ("" if none).
    pub worker: String,
    pub creator: Creator,
    pub expires_at: u64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Payload {
    c: String,
    g: u32,
    s: String,
    #[serde(default)]
    w: String,
    o: String,
    exp: u64,
}

/// The key every transceiver of a fleet signs and checks resume credentials with.
#[derive(Clone)]
pub struct ResumeKey(Vec<u8>);

impl std::fmt::Debug for ResumeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResumeKey(..)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the resume key must be at least {MIN_KEY_LEN} bytes (got {0})")]
pub struct ResumeKeyTooShort(pub usize);

impl Default for ResumeKey {
    /// A random key (see [`ResumeKey::random`]).
    fn default() -> Self {
        ResumeKey::random()
    }
}

impl ResumeKey {
    /// A key from a key file's contents (surrounding whitespace is not part of it).
    pub fn from_file_contents(bytes: &[u8]) -> Result<Self, ResumeKeyTooShort> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_KEY_LEN {
            return Err(ResumeKeyTooShort(trimmed.len()));
        }
        Ok(ResumeKey(trimmed.to_vec()))
    }

    /// A key derived from the call-token key, so that a fleet that shares one shares the
    /// other without a second secret (HMAC of a fixed label: knowing the resume key tells
    /// nothing of the token key).
    pub fn derived_from(token_key: &[u8]) -> Self {
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(token_key).expect("HMAC accepts any key length");
        mac.update(b"voxgate resume credential key v1");
        ResumeKey(mac.finalize().into_bytes().to_vec())
    }

    /// A random key for a transceiver that shares none: its credentials resume only on it.
    pub fn random() -> Self {
        ResumeKey(rand::random::<[u8; 32]>().to_vec())
    }

    /// Mints a credential for `claims` (their `expires_at` is its `exp`).
    pub fn mint(&self, claims: &ResumeClaims) -> String {
        let mut worker = claims.worker.as_str();
        if worker.len() > MAX_WORKER_LEN {
            worker = "";
        }
        let json = serde_json::to_vec(&Payload {
            c: format!("{:032x}", claims.call_id),
            g: claims.generation,
            s: format!("{:032x}", claims.session_id),
            w: worker.to_string(),
            o: creator_code(&claims.creator),
            exp: claims.expires_at,
        })
        .expect("strings and numbers serialize");
        seal(&self.0, PREFIX, &json)
    }

    /// Verifies `credential` at Unix time `now`.
    pub fn verify(&self, credential: &str, now: u64) -> Result<ResumeClaims, ResumeError> {
        if credential.len() > MAX_CREDENTIAL_LEN {
            return Err(ResumeError::Format);
        }
        let (json, _) = open(&self.0, PREFIX, credential).map_err(|e| match e {
            EnvelopeError::Format => ResumeError::Format,
            EnvelopeError::BadSignature => ResumeError::BadSignature,
            EnvelopeError::Payload => ResumeError::Payload,
        })?;
        let p: Payload = serde_json::from_slice(&json).map_err(|_| ResumeError::Payload)?;
        if now >= p.exp {
            return Err(ResumeError::Expired);
        }
        if p.exp > now.saturating_add(MAX_LIFETIME_SECS) || p.g == 0 {
            return Err(ResumeError::Payload);
        }
        Ok(ResumeClaims {
            call_id: hex_id(&p.c)?,
            generation: p.g,
            session_id: hex_id(&p.s)?,
            worker: p.w,
            creator: parse_creator(&p.o)?,
            expires_at: p.exp,
        })
    }
}

fn hex_id(s: &str) -> Result<u128, ResumeError> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ResumeError::Payload);
    }
    u128::from_str_radix(s, 16).map_err(|_| ResumeError::Payload)
}

fn creator_code(c: &Creator) -> String {
    match c {
        Creator::Anyone => "a".into(),
        Creator::Operator => "o".into(),
        Creator::Call(id) => format!("t{:032x}", u128::from_be_bytes(id.0)),
    }
}

fn parse_creator(s: &str) -> Result<Creator, ResumeError> {
    match s {
        "a" => Ok(Creator::Anyone),
        "o" => Ok(Creator::Operator),
        _ => {
            let hex = s.strip_prefix('t').ok_or(ResumeError::Payload)?;
            Ok(Creator::Call(CallTokenId(hex_id(hex)?.to_be_bytes())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> ResumeKey {
        ResumeKey::from_file_contents(&[b; 32]).unwrap()
    }

    fn claims() -> ResumeClaims {
        ResumeClaims {
            call_id: 0xabc,
            generation: 2,
            session_id: 0xdef,
            worker: "worker-1".into(),
            creator: Creator::Call(CallTokenId([7; 16])),
            expires_at: 1_000,
        }
    }

    #[test]
    fn a_minted_credential_verifies_until_it_expires() {
        let k = key(1);
        let c = k.mint(&claims());
        assert!(c.starts_with(PREFIX));
        assert_eq!(k.verify(&c, 999), Ok(claims()));
        assert_eq!(k.verify(&c, 1_000), Err(ResumeError::Expired));
    }

    #[test]
    fn every_creator_survives_the_round_trip() {
        let k = key(1);
        for creator in [
            Creator::Anyone,
            Creator::Operator,
            Creator::Call(CallTokenId([0xff; 16])),
        ] {
            let c = ResumeClaims {
                creator,
                ..claims()
            };
            assert_eq!(k.verify(&k.mint(&c), 0).unwrap().creator, creator);
        }
    }

    #[test]
    fn another_keys_credential_and_a_swapped_payload_fail() {
        let c = key(1).mint(&claims());
        assert_eq!(key(2).verify(&c, 0), Err(ResumeError::BadSignature));
        let other = key(1).mint(&ResumeClaims {
            call_id: 0x999,
            ..claims()
        });
        let (head, _) = other.rsplit_once('.').unwrap();
        let (_, sig) = c.rsplit_once('.').unwrap();
        assert_eq!(
            key(1).verify(&format!("{head}.{sig}"), 0),
            Err(ResumeError::BadSignature)
        );
    }

    #[test]
    fn a_derived_key_differs_from_its_source_and_is_stable() {
        let a = ResumeKey::derived_from(&[3; 40]);
        let b = ResumeKey::derived_from(&[3; 40]);
        assert_eq!(a.0, b.0);
        assert_ne!(a.0, vec![3; 40]);
        assert_eq!(b.verify(&a.mint(&claims()), 0), Ok(claims()));
    }

    #[test]
    fn an_overlong_worker_id_is_left_out_and_lifetimes_are_capped() {
        let k = key(1);
        let long = ResumeClaims {
            worker: "w".repeat(MAX_WORKER_LEN + 1),
            ..claims()
        };
        assert_eq!(k.verify(&k.mint(&long), 0).unwrap().worker, "");
        let forever = ResumeClaims {
            expires_at: u64::MAX,
            ..claims()
        };
        assert_eq!(k.verify(&k.mint(&forever), 0), Err(ResumeError::Payload));
    }

    #[test]
    fn short_keys_and_junk_are_refused() {
        assert!(ResumeKey::from_file_contents(&[1; 31]).is_err());
        let k = key(1);
        for junk in ["", "vr1.", "vr1.a.b", "v1.abc.def", &"x".repeat(5000)] {
            assert!(k.verify(junk, 0).is_err(), "{junk:?}");
        }
    }

    proptest! {
        #[test]
        fn any_changed_byte_is_rejected(pos in 4usize..200, bit in 0u8..7) {
            let k = key(1);
            let c = k.mint(&claims());
            let mut bytes = c.into_bytes();
            let i = pos % bytes.len();
            bytes[i] ^= 1 << bit;
            if let Ok(s) = String::from_utf8(bytes) {
                prop_assert!(k.verify(&s, 0).is_err());
            }
        }
    }
}
