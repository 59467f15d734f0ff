//! Authentication of the HTTP signaling edge and the gRPC bridge. Sans-IO: the edges pass the
//! `Authorization` header value and the current Unix time; nothing here reads a clock or a file.
//!
//! Signaling accepts either the static `--token` or a short-lived per-call token minted by
//! the application ([`call_token`], checked with `--token-key-file`), both as
//! `Authorization: Bearer <token>`. A per-call token may carry metadata for the backend. The
//! gRPC bridge takes the static `--grpc-token`. Static tokens are compared in time that does
//! not depend on where the first difference is, so response timing does not reveal a prefix.
//! Which binds need a token at all is decided in [`crate::control::config`] (fail closed on a
//! public bind).
//!
//! What a request presented is a [`Credential`]; a session remembers the [`Creator`] that
//! made it, and only that creator's credential, or the operator's static token, controls it
//! afterwards ([`Credential::controls`]). How many sessions each per-call token has created
//! is kept by [`token_uses`]; what a metadata entry may hold, by [`metadata_entry`].
//!
//! A third kind of bearer is minted by the transceivers themselves: a resume credential
//! ([`resume_credential`], `vr1.`), which controls every session of one call (and may carry the
//! call onto a new session); it is checked even on an open server, since a resume must name
//! a real call. Which (call, generation) already resumed here is kept by [`resume_uses`].

pub mod call_token;
pub mod creator;
pub mod metadata_entry;
pub mod resume_credential;
pub mod resume_uses;
pub mod signed_envelope;
pub mod token_uses;

use std::collections::HashMap;

pub use call_token::{CallClaims, CallTokenError, CallTokenId, CallTokenKey};
pub use creator::Creator;
pub use resume_credential::{ResumeClaims, ResumeError, ResumeKey};

/// Why a request was refused; the `reason` label of `voxgate_signaling_rejected_total`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid bearer token")]
    Invalid,
    #[error("{0}")]
    CallToken(#[from] CallTokenError),
    #[error("{0}")]
    Resume(#[from] ResumeError),
}

impl AuthError {
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Missing => "auth_missing",
            AuthError::Invalid => "auth_invalid",
            AuthError::CallToken(CallTokenError::Expired) => "token_expired",
            AuthError::CallToken(CallTokenError::Lifetime) => "token_lifetime",
            AuthError::CallToken(_) => "token_invalid",
            AuthError::Resume(ResumeError::Expired) => "resume_expired",
            AuthError::Resume(_) => "resume_invalid",
        }
    }
}

/// What a request that passed [`Authenticator::check`] presented.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Credential {
    /// Nothing, on a server configured with no token and no key: everyone may do everything.
    #[default]
    Open,
    /// The static `--token`: the operator's, which controls every session.
    Operator,
    /// A verified per-call token.
    Call(CallClaims),
    /// A verified resume credential: it controls the sessions of its call, and a POST with it
    /// resumes that call.
    Resume(ResumeClaims),
}

impl Credential {
    /// What a session created with this credential records as its creator.
    pub fn creator(&self) -> Creator {
        match self {
            Credential::Open => Creator::Anyone,
            Credential::Operator => Creator::Operator,
            Credential::Call(c) => Creator::Call(c.id),
            Credential::Resume(r) => r.creator,
        }
    }

    /// Whether this credential may read, restart or end a session of call `call_id` that
    /// `creator` made: the operator's any, a per-call token only its own, a resume credential
    /// only its call's (on an open server, anyone any).
    pub fn controls(&self, creator: &Creator, call_id: u128) -> bool {
        match self {
            Credential::Open | Credential::Operator => true,
            Credential::Call(c) => *creator == Creator::Call(c.id),
            Credential::Resume(r) => r.call_id == call_id,
        }
    }

    /// The metadata the application signed into a per-call token (none otherwise).
    pub fn signed_metadata(&self) -> &HashMap<String, String> {
        static NONE: std::sync::OnceLock<HashMap<String, String>> = std::sync::OnceLock::new();
        match self {
            Credential::Call(c) => &c.metadata,
            _ => NONE.get_or_init(HashMap::new),
        }
    }
}

/// What the signaling edge accepts: a static token, a per-call token key, both, or (only
/// where configuration allowed it) neither.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    pub static_token: Option<String>,
    pub call_key: Option<CallTokenKey>,
    /// Signs and checks resume credentials (always there: a random one by default).
    pub resume_key: ResumeKey,
}

impl Authenticator {
    /// No token and no key: every request passes.
    pub fn is_open(&self) -> bool {
        self.static_token.is_none() && self.call_key.is_none()
    }

    /// Checks an `Authorization` header value at Unix time `now`, and says what it presented.
    pub fn check(&self, authorization: Option<&str>, now: u64) -> Result<Credential, AuthError> {
        let bearer = authorization.and_then(|v| v.strip_prefix("Bearer "));
        if let Some(c) = bearer.filter(|b| b.starts_with(resume_credential::PREFIX)) {
            return Ok(Credential::Resume(self.resume_key.verify(c, now)?));
        }
        if self.is_open() {
            return Ok(Credential::Open);
        }
        let presented = authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(AuthError::Missing)?;
        if let Some(token) = &self.static_token {
            if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
                return Ok(Credential::Operator);
            }
        }
        match &self.call_key {
            Some(key) if presented.starts_with(call_token::PREFIX) => {
                Ok(Credential::Call(key.verify(presented, now)?))
            }
            _ => Err(AuthError::Invalid),
        }
    }
}

/// Whether a request with this `Authorization` header value may pass the static `expected`
/// token. With no configured token every request passes.
pub fn bearer_allowed(expected: Option<&str>, authorization: Option<&str>) -> bool {
    let Some(token) = expected else {
        return true;
    };
    authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|p| constant_time_eq(p.as_bytes(), token.as_bytes()))
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison_needs_exact_match() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }

    #[test]
    fn bearer_header_must_carry_the_configured_token() {
        assert!(bearer_allowed(None, None), "no token configured: open");
        assert!(bearer_allowed(Some("t0k"), Some("Bearer t0k")));
        assert!(!bearer_allowed(Some("t0k"), None));
        assert!(!bearer_allowed(Some("t0k"), Some("t0k")), "scheme required");
        assert!(!bearer_allowed(Some("t0k"), Some("Bearer t0K")));
    }

    #[test]
    fn static_token_and_call_tokens_work_side_by_side() {
        let key = CallTokenKey::from_file_contents(&[b'k'; 32]).unwrap();
        let auth = Authenticator {
            static_token: Some("static".into()),
            call_key: Some(key.clone()),
            resume_key: ResumeKey::random(),
        };
        let signed = |c: Credential| c.signed_metadata().clone();
        assert_eq!(
            auth.check(Some("Bearer static"), 0).map(signed),
            Ok(HashMap::new())
        );
        let meta: HashMap<String, String> = [("user".to_string(), "7".to_string())].into();
        let call = key.mint(100, &meta);
        assert_eq!(
            auth.check(Some(&format!("Bearer {call}")), 50).map(signed),
            Ok(meta)
        );
        let expired = auth
            .check(Some(&format!("Bearer {call}")), 100)
            .unwrap_err();
        assert_eq!(expired.reason(), "token_expired");
        assert_eq!(auth.check(None, 0), Err(AuthError::Missing));
        assert_eq!(auth.check(Some("Bearer nope"), 0), Err(AuthError::Invalid));
    }

    #[test]
    fn call_tokens_alone_do_not_open_the_door_to_anything_else() {
        let auth = Authenticator {
            static_token: None,
            call_key: Some(CallTokenKey::from_file_contents(&[b'k'; 32]).unwrap()),
            resume_key: ResumeKey::random(),
        };
        assert!(!auth.is_open());
        assert_eq!(auth.check(Some("Bearer "), 0), Err(AuthError::Invalid));
        assert!(auth.check(Some("Bearer v1.x.y"), 0).is_err());
    }

    #[test]
    fn a_per_call_token_controls_only_the_sessions_it_created() {
        let key = CallTokenKey::from_file_contents(&[b'k'; 32]).unwrap();
        let auth = Authenticator {
            static_token: Some("static".into()),
            call_key: Some(key.clone()),
            resume_key: ResumeKey::random(),
        };
        let bearer = |json: &[u8]| format!("Bearer {}", key.mint_payload(json));
        let alice = auth
            .check(Some(&bearer(br#"{"exp":9,"jti":"a"}"#)), 0)
            .unwrap();
        let mallory = auth
            .check(Some(&bearer(br#"{"exp":9,"jti":"m"}"#)), 0)
            .unwrap();
        let operator = auth.check(Some("Bearer static"), 0).unwrap();
        let alices = alice.creator();
        assert!(alice.controls(&alices, 1));
        assert!(!mallory.controls(&alices, 1));
        assert!(operator.controls(&alices, 1));
        assert!(!alice.controls(&operator.creator(), 1));
        assert!(Credential::Open.controls(&alices, 1));
        assert_eq!(Credential::Open.creator(), Creator::Anyone);
    }

    #[test]
    fn a_resume_credential_controls_its_call_alone_even_on_an_open_server() {
        let auth = Authenticator::default();
        assert!(auth.is_open());
        let claims = ResumeClaims {
            call_id: 42,
            generation: 1,
            session_id: 42,
            worker: String::new(),
            creator: Creator::Anyone,
            expires_at: 100,
        };
        let bearer = format!("Bearer {}", auth.resume_key.mint(&claims));
        let c = auth.check(Some(&bearer), 50).unwrap();
        assert_eq!(c, Credential::Resume(claims.clone()));
        assert!(c.controls(&Creator::Anyone, 42));
        assert!(!c.controls(&Creator::Anyone, 43));
        // Forged or expired: refused even though the server is open.
        let other = Authenticator::default().resume_key.mint(&claims);
        let forged = auth.check(Some(&format!("Bearer {other}")), 50);
        assert_eq!(forged.unwrap_err().reason(), "resume_invalid");
        assert_eq!(
            auth.check(Some(&bearer), 100).unwrap_err().reason(),
            "resume_expired"
        );
    }
}
