//! A zero-allocation reader for the USERNAME of a STUN Binding request, which is all a relay
//! needs to route a new flow and all a transceiver needs to find the session of a check.
//!
//! This is not a STUN implementation: it validates framing (RFC 8489 §5, §14) strictly enough
//! that every byte it returns lies inside the message, and leaves MESSAGE-INTEGRITY and
//! FINGERPRINT checks to the ICE agent (str0m). Routing on an unauthenticated USERNAME is safe
//! because the server ufrag is itself an authenticated routing hint.
//!
//! # What is read
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |0 0|  type (0x0001 = Binding req) |  message length (excl. 20)   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   magic cookie 0x2112A442                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 transaction id (96 bits)                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | attributes: type u16 BE, length u16 BE, value, zero padding   |
//! | to a multiple of 4 ... USERNAME is type 0x0006                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Only a USERNAME that precedes MESSAGE-INTEGRITY(-SHA256) counts: attributes after it are
//! not covered by the integrity check and RFC 8489 §14.5 says to ignore them.

/// The fixed STUN magic cookie (RFC 8489 §5).
pub const MAGIC_COOKIE: u32 = 0x2112_A442;

const HEADER_LEN: usize = 20;
const BINDING_REQUEST: u16 = 0x0001;
const ATTR_USERNAME: u16 = 0x0006;
const ATTR_MESSAGE_INTEGRITY: u16 = 0x0008;
const ATTR_MESSAGE_INTEGRITY_SHA256: u16 = 0x001C;
/// RFC 8489 §14.3: USERNAME MUST be fewer than 509 bytes; 513 is the historical RFC 5389 cap,
/// kept for interoperability.
const MAX_USERNAME_LEN: usize = 513;

/// Why a datagram yields no usable server ufrag.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum StunError {
    /// Not a STUN message (top two bits set or wrong magic cookie).
    #[error("not a STUN message")]
    NotStun,
    /// STUN, but not a Binding request.
    #[error("STUN message is not a binding request")]
    NotBindingRequest,
    /// Shorter than the STUN header, or an attribute runs past the end of the message.
    #[error("STUN message truncated")]
    Truncated,
    /// The message length field disagrees with the datagram or is not a multiple of 4.
    #[error("STUN message length field is invalid")]
    BadLength,
    /// No USERNAME attribute before MESSAGE-INTEGRITY.
    #[error("STUN binding request has no USERNAME")]
    NoUsername,
    /// More than one USERNAME attribute before MESSAGE-INTEGRITY.
    #[error("STUN binding request has more than one USERNAME")]
    DuplicateUsername,
    /// The USERNAME is longer than 513 bytes.
    #[error("STUN USERNAME too long")]
    UsernameTooLong,
    /// The USERNAME is empty or not of the ICE form `recipient:sender`.
    #[error("STUN USERNAME is not recipient:sender")]
    BadUsername,
}

impl StunError {
    /// Short snake_case label, for drop counters.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NotStun => "not_stun",
            Self::NotBindingRequest => "not_binding_request",
            Self::Truncated => "truncated",
            Self::BadLength => "bad_length",
            Self::NoUsername => "no_username",
            Self::DuplicateUsername => "duplicate_username",
            Self::UsernameTooLong => "username_too_long",
            Self::BadUsername => "bad_username",
        }
    }
}

/// RFC 7983 demultiplexing test: first byte 0..=3, at least a STUN header long, and the
/// magic cookie in bytes 4..8.
pub fn looks_like_stun(datagram: &[u8]) -> bool {
    match datagram {
        [b0, _, _, _, c0, c1, c2, c3, ..] if datagram.len() >= HEADER_LEN => {
            *b0 <= 3 && u32::from_be_bytes([*c0, *c1, *c2, *c3]) == MAGIC_COOKIE
        }
        _ => false,
    }
}

/// The raw USERNAME value of a STUN Binding request, borrowed from `datagram`.
///
/// Validates the header (20 bytes, top two bits zero, magic cookie, type 0x0001), that the
/// length field equals `datagram.len() - 20` and is a multiple of 4, that every attribute
/// (with its padding) lies within the message, and that there is exactly one USERNAME
/// before any MESSAGE-INTEGRITY, of 1..=513 bytes. Never panics, never allocates.
pub fn binding_request_username(datagram: &[u8]) -> Result<&[u8], StunError> {
    let (header, mut attrs) = datagram
        .split_first_chunk::<HEADER_LEN>()
        .ok_or(StunError::Truncated)?;
    let [t0, t1, l0, l1, c0, c1, c2, c3, ..] = *header;
    if t0 & 0xC0 != 0 || u32::from_be_bytes([c0, c1, c2, c3]) != MAGIC_COOKIE {
        return Err(StunError::NotStun);
    }
    if u16::from_be_bytes([t0, t1]) != BINDING_REQUEST {
        return Err(StunError::NotBindingRequest);
    }
    let msg_len = usize::from(u16::from_be_bytes([l0, l1]));
    if msg_len != attrs.len() || msg_len % 4 != 0 {
        return Err(StunError::BadLength);
    }

    let mut username = None;
    let mut integrity_seen = false;
    while !attrs.is_empty() {
        let (&[a0, a1, v0, v1], rest) =
            attrs.split_first_chunk::<4>().ok_or(StunError::Truncated)?;
        let attr_type = u16::from_be_bytes([a0, a1]);
        let value_len = usize::from(u16::from_be_bytes([v0, v1]));
        let padded_len = value_len.next_multiple_of(4);
        if padded_len > rest.len() {
            return Err(StunError::Truncated);
        }
        let (value, next) = (&rest[..value_len], &rest[padded_len..]);
        if !integrity_seen {
            match attr_type {
                ATTR_USERNAME if username.is_some() => return Err(StunError::DuplicateUsername),
                ATTR_USERNAME => username = Some(value),
                ATTR_MESSAGE_INTEGRITY | ATTR_MESSAGE_INTEGRITY_SHA256 => integrity_seen = true,
                _ => {}
            }
        }
        attrs = next;
    }

    let username = username.ok_or(StunError::NoUsername)?;
    if username.len() > MAX_USERNAME_LEN {
        return Err(StunError::UsernameTooLong);
    }
    if username.is_empty() {
        return Err(StunError::BadUsername);
    }
    Ok(username)
}

/// Splits an ICE USERNAME `recipientUfrag:senderUfrag` at its first `:`; a client's check to
/// the server has the server's ufrag as recipient. Returns `(recipient, sender)`.
pub fn split_username(username: &[u8]) -> Result<(&[u8], &[u8]), StunError> {
    let colon = username
        .iter()
        .position(|&b| b == b':')
        .ok_or(StunError::BadUsername)?;
    let (recipient, sender) = (&username[..colon], &username[colon + 1..]);
    if recipient.is_empty() || sender.is_empty() {
        return Err(StunError::BadUsername);
    }
    Ok((recipient, sender))
}

/// The server (recipient) ufrag of a client's Binding request: the routing hint to decode.
pub fn server_ufrag(datagram: &[u8]) -> Result<&[u8], StunError> {
    let username = binding_request_username(datagram)?;
    split_username(username).map(|(recipient, _)| recipient)
}

#[cfg(test)]
mod tests;
