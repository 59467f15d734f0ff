//! The header a relay puts in front of a client datagram it forwards to a transceiver, and
//! that a transceiver puts in front of a reply it hands back to the relay for the client.
//!
//! The header carries the client's public address both ways, so the transceiver sees the
//! real client address and the relay needs no reverse lookup to send the reply on.
//!
//! # Wire format
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 1 | magic + version: [`MAGIC_V1`] (`0xD1`) |
//! | 1 | 1 | flags: bit 0 (`0x01`) set = [`Direction::ToClient`]; bit 1 (`0x02`) set = IPv6; bits 2–7 must be 0 |
//! | 2 | 2 | client UDP port, u16 big-endian |
//! | 4 | 4 or 16 | client IP address, network order (16 bytes iff the IPv6 flag is set) |
//! | 8 or 20 | … | the original datagram, untouched |
//!
//! IPv6 flow info and scope id are not carried (they decode as 0).
//!
//! The first byte lies outside every range RFC 7983 assigns (STUN 0–3, ZRTP 16–19, DTLS
//! 20–63, TURN channels 64–79, RTP/RTCP 128–191), so a transceiver socket that receives both
//! relayed and direct traffic can tell them apart from that byte alone.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// First byte of a version-1 relay-framed datagram.
pub const MAGIC_V1: u8 = 0xD1;

/// Longest header (IPv6 client).
pub const MAX_HEADER_LEN: usize = 20;

const FLAG_TO_CLIENT: u8 = 0x01;
const FLAG_IPV6: u8 = 0x02;
const FLAGS_KNOWN: u8 = FLAG_TO_CLIENT | FLAG_IPV6;
const FIXED_LEN: usize = 4;
const V4_LEN: usize = FIXED_LEN + 4;
const V6_LEN: usize = FIXED_LEN + 16;

/// Which way a relay-framed datagram travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Relay → transceiver: a datagram the client sent.
    ToTransceiver,
    /// Transceiver → relay: a datagram for the relay to send to the client.
    ToClient,
}

/// The relay↔transceiver datagram header (see the module docs for the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayHeader {
    /// Which way the datagram travels.
    pub direction: Direction,
    /// The client's public address as the relay sees it.
    pub client: SocketAddr,
}

/// Why a datagram does not start with a valid relay header.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The datagram ends before the header does.
    #[error("relay header truncated")]
    Truncated,
    /// The first byte is not a magic/version this crate knows.
    #[error("unknown relay header version")]
    UnknownVersion,
    /// A reserved flag bit is set.
    #[error("reserved relay header flag set")]
    ReservedFlags,
    /// The output buffer passed to [`RelayHeader::encode`] is too small.
    #[error("output buffer too small for relay header")]
    BufferTooSmall,
}

impl HeaderError {
    /// Short snake_case label, for drop counters.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::UnknownVersion => "unknown_version",
            Self::ReservedFlags => "reserved_flags",
            Self::BufferTooSmall => "buffer_too_small",
        }
    }
}

impl RelayHeader {
    /// Bytes this header occupies on the wire: 8 for an IPv4 client, 20 for IPv6.
    pub fn encoded_len(&self) -> usize {
        match self.client {
            SocketAddr::V4(_) => V4_LEN,
            SocketAddr::V6(_) => V6_LEN,
        }
    }

    /// Writes the header at the start of `out`; returns its length. The payload goes after it.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, HeaderError> {
        let len = self.encoded_len();
        let out = out.get_mut(..len).ok_or(HeaderError::BufferTooSmall)?;
        let mut flags = match self.direction {
            Direction::ToTransceiver => 0,
            Direction::ToClient => FLAG_TO_CLIENT,
        };
        match self.client.ip() {
            IpAddr::V4(ip) => out[FIXED_LEN..].copy_from_slice(&ip.octets()),
            IpAddr::V6(ip) => {
                flags |= FLAG_IPV6;
                out[FIXED_LEN..].copy_from_slice(&ip.octets());
            }
        }
        out[0] = MAGIC_V1;
        out[1] = flags;
        out[2..4].copy_from_slice(&self.client.port().to_be_bytes());
        Ok(len)
    }

    /// Parses the header at the start of `buf`; returns it with the payload that follows.
    /// Never panics, never allocates.
    pub fn decode(buf: &[u8]) -> Result<(RelayHeader, &[u8]), HeaderError> {
        let (&[magic, flags, p0, p1], rest) = buf
            .split_first_chunk::<FIXED_LEN>()
            .ok_or(HeaderError::Truncated)?;
        if magic != MAGIC_V1 {
            return Err(HeaderError::UnknownVersion);
        }
        if flags & !FLAGS_KNOWN != 0 {
            return Err(HeaderError::ReservedFlags);
        }
        let direction = if flags & FLAG_TO_CLIENT != 0 {
            Direction::ToClient
        } else {
            Direction::ToTransceiver
        };
        let port = u16::from_be_bytes([p0, p1]);
        let (client, payload) = if flags & FLAG_IPV6 != 0 {
            let (ip, payload) = rest
                .split_first_chunk::<16>()
                .ok_or(HeaderError::Truncated)?;
            let addr = SocketAddrV6::new(Ipv6Addr::from(*ip), port, 0, 0);
            (SocketAddr::V6(addr), payload)
        } else {
            let (ip, payload) = rest
                .split_first_chunk::<4>()
                .ok_or(HeaderError::Truncated)?;
            let addr = SocketAddrV4::new(Ipv4Addr::from(*ip), port);
            (SocketAddr::V4(addr), payload)
        };
        Ok((RelayHeader { direction, client }, payload))
    }
}

/// Cheap first-byte check: does this datagram start with a relay header of a version we know?
/// A `true` here does not mean [`RelayHeader::decode`] will succeed.
pub fn is_relay_framed(datagram: &[u8]) -> bool {
    datagram.first() == Some(&MAGIC_V1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers() -> [RelayHeader; 4] {
        let v4: SocketAddr = "203.0.113.9:61000".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1:2]:443".parse().unwrap();
        [
            RelayHeader {
                direction: Direction::ToTransceiver,
                client: v4,
            },
            RelayHeader {
                direction: Direction::ToClient,
                client: v4,
            },
            RelayHeader {
                direction: Direction::ToTransceiver,
                client: v6,
            },
            RelayHeader {
                direction: Direction::ToClient,
                client: v6,
            },
        ]
    }

    fn framed(h: &RelayHeader, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; MAX_HEADER_LEN + payload.len()];
        let n = h.encode(&mut buf).unwrap();
        buf.truncate(n);
        buf.extend_from_slice(payload);
        buf
    }

    #[test]
    fn magic_is_outside_every_rfc7983_range() {
        let ranges = [0..=3u8, 16..=19, 20..=63, 64..=79, 128..=191];
        for r in ranges {
            assert!(!r.contains(&MAGIC_V1), "{MAGIC_V1:#x} in {r:?}");
        }
    }

    #[test]
    fn header_round_trips_v4_and_v6_both_directions() {
        let payload = [0x16, 0xfe, 0xfd, 1, 2, 3];
        for h in headers() {
            let buf = framed(&h, &payload);
            assert_eq!(buf.len(), h.encoded_len() + payload.len());
            assert!(is_relay_framed(&buf));
            let (got, rest) = RelayHeader::decode(&buf).unwrap();
            assert_eq!(got, h);
            assert_eq!(rest, payload);
        }
    }

    #[test]
    fn encoded_len_is_8_for_v4_and_20_for_v6() {
        let [a, _, b, _] = headers();
        assert_eq!(a.encoded_len(), 8);
        assert_eq!(b.encoded_len(), 20);
        assert_eq!(b.encoded_len(), MAX_HEADER_LEN);
    }

    #[test]
    fn encoding_is_byte_exact() {
        let h = RelayHeader {
            direction: Direction::ToClient,
            client: "192.0.2.1:258".parse().unwrap(),
        };
        let mut buf = [0u8; 8];
        assert_eq!(h.encode(&mut buf), Ok(8));
        assert_eq!(buf, [0xD1, 0x01, 0x01, 0x02, 192, 0, 2, 1]);
        let h = RelayHeader {
            direction: Direction::ToTransceiver,
            client: "[::1]:1".parse().unwrap(),
        };
        let mut buf = [0u8; 20];
        assert_eq!(h.encode(&mut buf), Ok(20));
        let mut want = [0u8; 20];
        want[..4].copy_from_slice(&[0xD1, 0x02, 0x00, 0x01]);
        want[19] = 1;
        assert_eq!(buf, want);
    }

    #[test]
    fn empty_payload_decodes_to_empty_slice() {
        for h in headers() {
            let buf = framed(&h, &[]);
            assert_eq!(RelayHeader::decode(&buf), Ok((h, &[][..])));
        }
    }

    #[test]
    fn reserved_flag_bits_are_rejected() {
        for h in headers() {
            for bit in 2..8 {
                let mut buf = framed(&h, b"x");
                buf[1] |= 1 << bit;
                assert_eq!(
                    RelayHeader::decode(&buf),
                    Err(HeaderError::ReservedFlags),
                    "bit {bit}"
                );
            }
        }
    }

    #[test]
    fn unknown_first_byte_is_rejected() {
        let mut buf = framed(&headers()[0], b"x");
        for b in (0..=255u8).filter(|&b| b != MAGIC_V1) {
            buf[0] = b;
            assert!(!is_relay_framed(&buf));
            assert_eq!(RelayHeader::decode(&buf), Err(HeaderError::UnknownVersion));
        }
    }

    #[test]
    fn header_truncated_at_every_length_is_rejected() {
        for h in headers() {
            let buf = framed(&h, &[]);
            for len in 0..buf.len() {
                assert_eq!(
                    RelayHeader::decode(&buf[..len]),
                    Err(HeaderError::Truncated),
                    "{h:?} at {len}"
                );
            }
        }
    }

    #[test]
    fn encode_into_too_small_buffer_errors() {
        for h in headers() {
            for len in 0..h.encoded_len() {
                let mut buf = vec![0u8; len];
                assert_eq!(h.encode(&mut buf), Err(HeaderError::BufferTooSmall));
            }
        }
    }

    #[test]
    fn v6_scope_and_flowinfo_are_not_carried() {
        let h = RelayHeader {
            direction: Direction::ToTransceiver,
            client: SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 5, 9, 2)),
        };
        let (got, _) = RelayHeader::decode(&framed(&h, &[])).unwrap();
        assert_eq!(
            got.client,
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 5, 0, 0))
        );
    }

    #[test]
    fn error_labels_are_distinct() {
        let all = [
            HeaderError::Truncated,
            HeaderError::UnknownVersion,
            HeaderError::ReservedFlags,
            HeaderError::BufferTooSmall,
        ];
        let labels: std::collections::HashSet<_> = all.iter().map(HeaderError::as_str).collect();
        assert_eq!(labels.len(), all.len());
    }
}
