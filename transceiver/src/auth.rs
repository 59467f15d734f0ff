//! Bearer-token checks, shared by the HTTP signaling edge and the gRPC bridge.
//!
//! Both edges take an optional configured token; when one is set, a request must carry
//! `Authorization: Bearer <token>` with exactly that token. The comparison takes the same time
//! wherever the first difference is, so response timing does not reveal a token's prefix.

/// Whether a request with this `Authorization` header value may pass. With no configured
/// token every request passes.
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
}
