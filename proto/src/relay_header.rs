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
mod tests;
