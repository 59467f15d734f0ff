//! The header a relay puts in front of a client datagram it forwards to a transceiver, and
//! that a transceiver puts in front of a reply it hands back to the relay for the client.
//!
//! The header carries the client's public address both ways, so the transceiver sees the
//! real client address and the relay needs no reverse lookup to send the reply on.
//!
//! # Wire format
//!
//! Version 1 (`0xD1`) frames a client's UDP datagram:
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 1 | magic + version: [`MAGIC_V1`] (`0xD1`) |
//! | 1 | 1 | flags: bit 0 (`0x01`) set = [`Direction::ToClient`]; bit 1 (`0x02`) set = IPv6; bits 2–7 must be 0 |
//! | 2 | 2 | client UDP port, u16 big-endian |
//! | 4 | 4 or 16 | client IP address, network order (16 bytes iff the IPv6 flag is set) |
//! | 8 or 20 | … | the original datagram, untouched |
//!
//! Version 2 (`0xD2`) adds the transport, for ICE over TCP (RFC 6544) through a relay: the relay
//! keeps the client's TCP connection, strips the RFC 4571 length prefix, and forwards each frame
//! as one datagram. The connection id tells two connections from the same client address apart
//! (a client that reconnects from the same port) and lets the relay find the connection for a
//! reply without a lookup by address:
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 1 | magic + version: [`MAGIC_V2`] (`0xD2`) |
//! | 1 | 1 | flags: bit 0 (`0x01`) = [`Direction::ToClient`]; bit 1 (`0x02`) = IPv6; bit 2 (`0x04`) = TCP; bits 3–7 must be 0 |
//! | 2 | 4 | connection id, u32 big-endian (0 when the TCP flag is clear) |
//! | 6 | 2 | client port, u16 big-endian |
//! | 8 | 4 or 16 | client IP address, network order |
//! | 12 or 24 | … | the original datagram or TCP frame payload, untouched |
//!
//! Backwards compatibility: a UDP header is always *encoded* as version 1, so a peer that knows
//! only version 1 keeps working for every UDP flow; version 2 is written only for TCP. Decoding
//! accepts both. A side answers in the version it was sent (the transport is echoed back).
//!
//! IPv6 flow info and scope id are not carried (they decode as 0).
//!
//! The first byte lies outside every range RFC 7983 assigns (STUN 0–3, ZRTP 16–19, DTLS
//! 20–63, TURN channels 64–79, RTP/RTCP 128–191), so a transceiver socket that receives both
//! relayed and direct traffic can tell them apart from that byte alone.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// First byte of a version-1 relay-framed datagram.
pub const MAGIC_V1: u8 = 0xD1;

/// First byte of a version-2 relay-framed datagram (carries the transport).
pub const MAGIC_V2: u8 = 0xD2;

/// Longest header (version 2, IPv6 client).
pub const MAX_HEADER_LEN: usize = 24;

const FLAG_TO_CLIENT: u8 = 0x01;
const FLAG_IPV6: u8 = 0x02;
const FLAG_TCP: u8 = 0x04;
const FLAGS_KNOWN_V1: u8 = FLAG_TO_CLIENT | FLAG_IPV6;
const FLAGS_KNOWN_V2: u8 = FLAG_TO_CLIENT | FLAG_IPV6 | FLAG_TCP;
/// Magic, flags and port (version 1); version 2 adds the 4-byte connection id.
const FIXED_LEN_V1: usize = 4;
const FIXED_LEN_V2: usize = 8;

/// How the client reached the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    /// A UDP datagram from the client's address.
    #[default]
    Udp,
    /// One RFC 4571 frame of the relay's TCP connection `conn` with the client.
    Tcp {
        /// The relay's id for the connection; echoed back on replies.
        conn: u32,
    },
}

impl Transport {
    /// `"udp"` or `"tcp"`, for metric labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp { .. } => "tcp",
        }
    }
}

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
    /// UDP, or which of the relay's TCP connections the datagram belongs to.
    pub transport: Transport,
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
    /// A UDP header (encoded as version 1).
    pub fn udp(direction: Direction, client: SocketAddr) -> Self {
        Self {
            direction,
            client,
            transport: Transport::Udp,
        }
    }

    /// Bytes this header occupies on the wire: 8 or 20 (UDP, IPv4 or IPv6), 12 or 24 (TCP).
    pub fn encoded_len(&self) -> usize {
        let fixed = match self.transport {
            Transport::Udp => FIXED_LEN_V1,
            Transport::Tcp { .. } => FIXED_LEN_V2,
        };
        fixed + ip_len(&self.client)
    }

    /// Writes the header at the start of `out`; returns its length. The payload goes after it.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, HeaderError> {
        let len = self.encoded_len();
        let out = out.get_mut(..len).ok_or(HeaderError::BufferTooSmall)?;
        let mut flags = match self.direction {
            Direction::ToTransceiver => 0,
            Direction::ToClient => FLAG_TO_CLIENT,
        };
        if self.client.is_ipv6() {
            flags |= FLAG_IPV6;
        }
        let fixed = match self.transport {
            Transport::Udp => {
                out[0] = MAGIC_V1;
                FIXED_LEN_V1
            }
            Transport::Tcp { conn } => {
                out[0] = MAGIC_V2;
                flags |= FLAG_TCP;
                out[2..6].copy_from_slice(&conn.to_be_bytes());
                FIXED_LEN_V2
            }
        };
        out[1] = flags;
        out[fixed - 2..fixed].copy_from_slice(&self.client.port().to_be_bytes());
        match self.client.ip() {
            IpAddr::V4(ip) => out[fixed..].copy_from_slice(&ip.octets()),
            IpAddr::V6(ip) => out[fixed..].copy_from_slice(&ip.octets()),
        }
        Ok(len)
    }

    /// Parses the header at the start of `buf`; returns it with the payload that follows.
    /// Never panics, never allocates.
    pub fn decode(buf: &[u8]) -> Result<(RelayHeader, &[u8]), HeaderError> {
        let (&[magic, flags], rest) = buf.split_first_chunk::<2>().ok_or(HeaderError::Truncated)?;
        let (transport, rest) = match magic {
            MAGIC_V1 => {
                if flags & !FLAGS_KNOWN_V1 != 0 {
                    return Err(HeaderError::ReservedFlags);
                }
                (Transport::Udp, rest)
            }
            MAGIC_V2 => {
                if flags & !FLAGS_KNOWN_V2 != 0 {
                    return Err(HeaderError::ReservedFlags);
                }
                let (conn, rest) = rest
                    .split_first_chunk::<4>()
                    .ok_or(HeaderError::Truncated)?;
                let conn = u32::from_be_bytes(*conn);
                let transport = if flags & FLAG_TCP != 0 {
                    Transport::Tcp { conn }
                } else if conn == 0 {
                    Transport::Udp
                } else {
                    // A connection id without the TCP flag is a broken or forged header.
                    return Err(HeaderError::ReservedFlags);
                };
                (transport, rest)
            }
            _ => return Err(HeaderError::UnknownVersion),
        };
        let (port, rest) = rest
            .split_first_chunk::<2>()
            .ok_or(HeaderError::Truncated)?;
        let port = u16::from_be_bytes(*port);
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
        let header = RelayHeader {
            direction: if flags & FLAG_TO_CLIENT != 0 {
                Direction::ToClient
            } else {
                Direction::ToTransceiver
            },
            client,
            transport,
        };
        Ok((header, payload))
    }
}

fn ip_len(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 4,
        SocketAddr::V6(_) => 16,
    }
}

/// Cheap first-byte check: does this datagram start with a relay header of a version we know?
/// A `true` here does not mean [`RelayHeader::decode`] will succeed.
pub fn is_relay_framed(datagram: &[u8]) -> bool {
    matches!(datagram.first(), Some(&MAGIC_V1 | &MAGIC_V2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination: IPv4/IPv6 × both directions × UDP/TCP.
    fn headers() -> Vec<RelayHeader> {
        let v4: SocketAddr = "203.0.113.9:61000".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1:2]:443".parse().unwrap();
        let mut all = Vec::new();
        for transport in [Transport::Udp, Transport::Tcp { conn: 0xA1B2_C3D4 }] {
            for client in [v4, v6] {
                for direction in [Direction::ToTransceiver, Direction::ToClient] {
                    all.push(RelayHeader {
                        direction,
                        client,
                        transport,
                    });
                }
            }
        }
        all
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
            for magic in [MAGIC_V1, MAGIC_V2] {
                assert!(!r.contains(&magic), "{magic:#x} in {r:?}");
            }
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
    fn encoded_len_is_8_or_20_for_udp_and_12_or_24_for_tcp() {
        let lens: Vec<usize> = headers().iter().map(RelayHeader::encoded_len).collect();
        assert_eq!(lens, [8, 8, 20, 20, 12, 12, 24, 24]);
        assert_eq!(lens.iter().max(), Some(&MAX_HEADER_LEN));
    }

    #[test]
    fn udp_is_written_as_version_1_and_tcp_as_version_2() {
        for h in headers() {
            let want = match h.transport {
                Transport::Udp => MAGIC_V1,
                Transport::Tcp { .. } => MAGIC_V2,
            };
            assert_eq!(framed(&h, &[])[0], want, "{h:?}");
        }
    }

    #[test]
    fn version_2_without_the_tcp_flag_is_udp_and_must_carry_no_connection_id() {
        let mut buf = vec![0xD2, 0x00, 0, 0, 0, 0, 0x13, 0x88, 192, 0, 2, 7, 0xAA];
        let (h, rest) = RelayHeader::decode(&buf).unwrap();
        assert_eq!(
            h,
            RelayHeader::udp(Direction::ToTransceiver, "192.0.2.7:5000".parse().unwrap())
        );
        assert_eq!(rest, [0xAA]);
        buf[5] = 1;
        assert_eq!(RelayHeader::decode(&buf), Err(HeaderError::ReservedFlags));
    }

    #[test]
    fn encoding_is_byte_exact() {
        let h = RelayHeader::udp(Direction::ToClient, "192.0.2.1:258".parse().unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(h.encode(&mut buf), Ok(8));
        assert_eq!(buf, [0xD1, 0x01, 0x01, 0x02, 192, 0, 2, 1]);
        let h = RelayHeader::udp(Direction::ToTransceiver, "[::1]:1".parse().unwrap());
        let mut buf = [0u8; 20];
        assert_eq!(h.encode(&mut buf), Ok(20));
        let mut want = [0u8; 20];
        want[..4].copy_from_slice(&[0xD1, 0x02, 0x00, 0x01]);
        want[19] = 1;
        assert_eq!(buf, want);
        let h = RelayHeader {
            direction: Direction::ToClient,
            client: "192.0.2.1:258".parse().unwrap(),
            transport: Transport::Tcp { conn: 0x0102_0304 },
        };
        let mut buf = [0u8; 12];
        assert_eq!(h.encode(&mut buf), Ok(12));
        assert_eq!(buf, [0xD2, 0x05, 1, 2, 3, 4, 0x01, 0x02, 192, 0, 2, 1]);
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
            let first_reserved = match h.transport {
                Transport::Udp => 2,
                Transport::Tcp { .. } => 3,
            };
            for bit in first_reserved..8 {
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
        for b in (0..=255u8).filter(|&b| b != MAGIC_V1 && b != MAGIC_V2) {
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
        let h = RelayHeader::udp(
            Direction::ToTransceiver,
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 5, 9, 2)),
        );
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
