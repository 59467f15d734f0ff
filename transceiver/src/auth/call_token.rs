//! Short-lived per-call tokens, minted by the application server and checked here with a
//! shared key (`--token-key-file`). Sans-IO: the caller passes the current Unix time.
//!
//! Wire format (ASCII, fits an `Authorization: Bearer` header):
//!
//! ```text
//! v1.<payload>.<mac>
//! payload = base64url-nopad( JSON {"exp": <unix seconds>, "jti": "<unique id>", "uses": <n>,
//!                                  "meta": {"<key>": "<value>", ...}} )
//! mac     = base64url-nopad( HMAC-SHA256(key, "v1." + payload) )
//! ```
//!
//! `exp` is required and at most [`MAX_LIFETIME_SECS`] ahead of the check (a token that
//! never expires is refused, not honoured). `meta` is optional and reaches the backend as the
//! session's signed metadata (bounded and character-checked like caller metadata, see
//! [`super::metadata_entry`]). `uses` (optional, 1 to [`MAX_USES`], default 1) is how many
//! sessions the token may create; `jti` (optional, any string) makes two tokens minted in the
//! same second with the same `meta` differ, since a token is known by its MAC
//! ([`CallTokenId`]): the server remembers each one it has seen create a session until it
//! expires. Other fields are ignored. The MAC covers the version prefix and the encoded
//! payload exactly as sent, so any changed byte fails it. It is checked (in constant time, by
//! `hmac`) before the payload is parsed, so unauthenticated JSON is never looked at.

use std::collections::HashMap;

use super::metadata_entry::check_entry;
use super::signed_envelope::{open, seal, EnvelopeError};

/// The prefix that marks a per-call token (a static token never starts with it).
pub const PREFIX: &str = "v1.";
/// Longest token accepted; bounds the work an unauthenticated request can cause.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;
/// Shortest key accepted: HMAC-SHA256 wants at least its output size.
pub const MIN_KEY_LEN: usize = 32;
pub use super::metadata_entry::{MAX_META_ENTRIES, MAX_META_KEY, MAX_META_VALUE};
/// Longest a token may live: its `exp` at most this far ahead of the check.
pub const MAX_LIFETIME_SECS: u64 = 24 * 3600;
/// Most sessions one token may create (`uses`).
pub const MAX_USES: u32 = 1000;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CallTokenError {
    #[error("not a v1 call token")]
    Format,
    #[error("call token is too long")]
    TooLong,
    #[error("call token signature does not verify")]
    BadSignature,
    #[error("call token payload is malformed")]
    Payload,
    #[error("call token has expired")]
    Expired,
    #[error("call token expires more than {MAX_LIFETIME_SECS} s ahead")]
    Lifetime,
    #[error("call token metadata exceeds its bounds")]
    Metadata,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the call-token key must be at least {MIN_KEY_LEN} bytes (got {0})")]
pub struct KeyTooShort(pub usize);

/// What a token is known by: the first half of its MAC, which covers every byte of its
/// payload (so two tokens differ unless minted with the same claims).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CallTokenId(pub [u8; 16]);

/// What a verified token grants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallClaims {
    pub id: CallTokenId,
    pub expires_at: u64,
    /// How many sessions it may create.
    pub uses: u32,
    pub metadata: HashMap<String, String>,
}

#[derive(serde::Deserialize, serde::Serialize)]
struct Payload {
    exp: u64,
    #[serde(default)]
    meta: HashMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uses: Option<u32>,
}

/// The key per-call tokens are signed with. Its bytes never appear in `Debug` output.
#[derive(Clone)]
pub struct CallTokenKey(Vec<u8>);

impl std::fmt::Debug for CallTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallTokenKey(..)")
    }
}

impl CallTokenKey {
    /// A key from a key file's contents: surrounding whitespace (a trailing newline) is not
    /// part of the key.
    pub fn from_file_contents(bytes: &[u8]) -> Result<Self, KeyTooShort> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < MIN_KEY_LEN {
            return Err(KeyTooShort(trimmed.len()));
        }
        Ok(CallTokenKey(trimmed.to_vec()))
    }

    /// Mints a token (the application server's side; used by tests and tools).
    pub fn mint(&self, expires_at: u64, metadata: &HashMap<String, String>) -> String {
        let json = serde_json::to_vec(&Payload {
            exp: expires_at,
            meta: metadata.clone(),
            uses: None,
        })
        .expect("a map of strings serializes");
        self.mint_payload(&json)
    }

    /// Signs `json` as a token's payload, whatever it holds (tests of other claims).
    pub fn mint_payload(&self, json: &[u8]) -> String {
        seal(&self.0, PREFIX, json)
    }

    /// Verifies `token` at Unix time `now`.
    pub fn verify(&self, token: &str, now: u64) -> Result<CallClaims, CallTokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(CallTokenError::TooLong);
        }
        let (json, sig) = open(&self.0, PREFIX, token).map_err(|e| match e {
            EnvelopeError::Format => CallTokenError::Format,
            EnvelopeError::BadSignature => CallTokenError::BadSignature,
            EnvelopeError::Payload => CallTokenError::Payload,
        })?;
        let p: Payload = serde_json::from_slice(&json).map_err(|_| CallTokenError::Payload)?;
        if now >= p.exp {
            return Err(CallTokenError::Expired);
        }
        if p.exp > now.saturating_add(MAX_LIFETIME_SECS) {
            return Err(CallTokenError::Lifetime);
        }
        let uses = p.uses.unwrap_or(1);
        if !(1..=MAX_USES).contains(&uses) {
            return Err(CallTokenError::Payload);
        }
        let bounded = p.meta.len() <= MAX_META_ENTRIES
            && p.meta.iter().all(|(k, v)| check_entry(k, v).is_ok());
        if !bounded {
            return Err(CallTokenError::Metadata);
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&sig[..16]);
        Ok(CallClaims {
            id: CallTokenId(id),
            expires_at: p.exp,
            uses,
            metadata: p.meta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> CallTokenKey {
        CallTokenKey::from_file_contents(&[b'a' + b; 40]).unwrap()
    }

    fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_minted_token_verifies_with_its_metadata_until_it_expires() {
        let k = key(7);
        let t = k.mint(1_000, &meta(&[("user", "42")]));
        let claims = k.verify(&t, 999).unwrap();
        assert_eq!(claims.metadata, meta(&[("user", "42")]));
        assert_eq!(k.verify(&t, 1_000), Err(CallTokenError::Expired));
    }

    #[test]
    fn a_token_of_another_key_fails_the_signature() {
        let t = key(1).mint(1_000, &HashMap::new());
        assert_eq!(key(2).verify(&t, 0), Err(CallTokenError::BadSignature));
    }

    #[test]
    fn a_payload_swapped_from_another_token_fails_the_signature() {
        let k = key(1);
        let a = k.mint(1_000, &meta(&[("user", "a")]));
        let b = k.mint(9_999, &meta(&[("user", "admin")]));
        let (a_payload, _) = a[PREFIX.len()..].split_once('.').unwrap();
        let (_, b_sig) = b[PREFIX.len()..].split_once('.').unwrap();
        let forged = format!("{PREFIX}{a_payload}.{b_sig}");
        assert_eq!(k.verify(&forged, 0), Err(CallTokenError::BadSignature));
    }

    #[test]
    fn short_keys_and_junk_are_refused() {
        assert_eq!(
            CallTokenKey::from_file_contents(b"  short\n").unwrap_err(),
            KeyTooShort(5)
        );
        let k = key(3);
        assert_eq!(k.verify("static-token", 0), Err(CallTokenError::Format));
        assert_eq!(k.verify("v1.nodot", 0), Err(CallTokenError::Format));
        assert_eq!(
            k.verify(&"v1.".repeat(4000), 0),
            Err(CallTokenError::TooLong)
        );
    }

    #[test]
    fn metadata_beyond_the_bounds_is_refused_even_when_signed() {
        let k = key(4);
        let big: HashMap<String, String> = (0..40).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(
            k.verify(&k.mint(10, &big), 0),
            Err(CallTokenError::Metadata)
        );
    }

    #[test]
    fn the_key_does_not_show_in_debug_output() {
        let k = CallTokenKey::from_file_contents(b"super-secret-key-material-0123456789").unwrap();
        assert!(!format!("{k:?}").contains("secret"));
    }

    proptest! {
        /// Flipping any single byte of a valid token makes it fail (never pass, never panic).
        #[test]
        fn any_changed_byte_is_rejected(pos in 0usize..200, bit in 0u8..7) {
            let k = key(9);
            let t = k.mint(1_000, &meta(&[("room", "blue")]));
            let mut bytes = t.into_bytes();
            let pos = pos % bytes.len();
            bytes[pos] ^= 1 << bit;
            if let Ok(s) = String::from_utf8(bytes) {
                prop_assert!(k.verify(&s, 0).is_err());
            }
        }

        /// Arbitrary strings never verify and never panic.
        #[test]
        fn arbitrary_input_never_verifies(s in "\\PC{0,300}") {
            prop_assert!(key(5).verify(&s, 0).is_err());
        }
    }

    #[test]
    fn a_token_lives_at_most_a_day_and_never_forever() {
        let k = key(6);
        let none = HashMap::new();
        assert_eq!(
            k.verify(&k.mint(u64::MAX, &none), 1_000),
            Err(CallTokenError::Lifetime)
        );
        let day = 1_000 + MAX_LIFETIME_SECS;
        assert!(k.verify(&k.mint(day, &none), 1_000).is_ok());
        assert_eq!(
            k.verify(&k.mint(day + 1, &none), 1_000),
            Err(CallTokenError::Lifetime)
        );
    }

    #[test]
    fn uses_default_to_one_and_are_bounded_and_the_id_tells_tokens_apart() {
        let k = key(8);
        let one = k.verify(&k.mint(100, &HashMap::new()), 0).unwrap();
        assert_eq!(one.uses, 1);
        let three = k.mint_payload(br#"{"exp": 100, "uses": 3, "jti": "x"}"#);
        let three = k.verify(&three, 0).unwrap();
        assert_eq!(three.uses, 3);
        assert_ne!(one.id, three.id);
        let again = k.verify(&k.mint(100, &HashMap::new()), 0).unwrap();
        assert_eq!(one.id, again.id, "the same claims are the same token");
        for bad in [
            &br#"{"exp": 100, "uses": 0}"#[..],
            br#"{"exp": 100, "uses": 1001}"#,
        ] {
            assert_eq!(
                k.verify(&k.mint_payload(bad), 0),
                Err(CallTokenError::Payload)
            );
        }
    }

    #[test]
    fn signed_metadata_is_held_to_the_same_characters() {
        let k = key(2);
        let t = k.mint(100, &meta(&[("note", "a\r\nb")]));
        assert_eq!(k.verify(&t, 0), Err(CallTokenError::Metadata));
    }
}
