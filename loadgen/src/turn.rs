//! The few TURN messages (RFC 8656) a flow needs to be relayed by coturn, Sans-IO:
//! an unauthenticated Allocate (coturn runs with `--no-auth`), a ChannelBind to the sink
//! (which also installs the permission), then ChannelData frames.

use std::net::SocketAddr;

use voxgate_proto::MAGIC_COOKIE;

const ALLOCATE: u16 = 0x0003;
const CHANNEL_BIND: u16 = 0x0009;
const SUCCESS: u16 = 0x0100;
const ERROR: u16 = 0x0110;
const REQUESTED_TRANSPORT: u16 = 0x0019;
const LIFETIME: u16 = 0x000D;
const CHANNEL_NUMBER: u16 = 0x000C;
const XOR_PEER_ADDRESS: u16 = 0x0012;
const ERROR_CODE: u16 = 0x0009;
const UDP: u8 = 17;

/// The first channel number (RFC 8656 §12: 0x4000–0x4FFF).
pub const FIRST_CHANNEL: u16 = 0x4000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TurnError {
    #[error("not a STUN response")]
    NotStun,
    #[error("response to another transaction")]
    WrongTransaction,
    #[error("TURN error {0}")]
    Error(u16),
    #[error("unexpected message type {0:#06x}")]
    Unexpected(u16),
}

fn header(kind: u16, txid: [u8; 12]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&MAGIC_COOKIE.to_be_bytes());
    m.extend_from_slice(&txid);
    m
}

fn attr(m: &mut Vec<u8>, kind: u16, value: &[u8]) {
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&(value.len() as u16).to_be_bytes());
    m.extend_from_slice(value);
    m.resize(m.len().next_multiple_of(4), 0);
}

fn finish(mut m: Vec<u8>) -> Vec<u8> {
    let len = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// XOR-PEER-ADDRESS value of `addr` (IPv4 or IPv6).
pub fn xor_address(addr: SocketAddr, txid: [u8; 12]) -> Vec<u8> {
    let cookie = MAGIC_COOKIE.to_be_bytes();
    let port = addr.port() ^ (MAGIC_COOKIE >> 16) as u16;
    let mut v = vec![0];
    match addr {
        SocketAddr::V4(a) => {
            v.push(0x01);
            v.extend_from_slice(&port.to_be_bytes());
            v.extend(a.ip().octets().iter().zip(cookie).map(|(b, c)| b ^ c));
        }
        SocketAddr::V6(a) => {
            v.push(0x02);
            v.extend_from_slice(&port.to_be_bytes());
            let key: Vec<u8> = cookie.iter().chain(txid.iter()).copied().collect();
            v.extend(a.ip().octets().iter().zip(key).map(|(b, c)| b ^ c));
        }
    }
    v
}

/// An Allocate request for a UDP relay, with a 10-minute lifetime.
pub fn allocate_request(txid: [u8; 12]) -> Vec<u8> {
    let mut m = header(ALLOCATE, txid);
    attr(&mut m, REQUESTED_TRANSPORT, &[UDP, 0, 0, 0]);
    attr(&mut m, LIFETIME, &600u32.to_be_bytes());
    finish(m)
}

/// A ChannelBind of `channel` to `peer`.
pub fn channel_bind_request(txid: [u8; 12], channel: u16, peer: SocketAddr) -> Vec<u8> {
    let mut m = header(CHANNEL_BIND, txid);
    let c = channel.to_be_bytes();
    attr(&mut m, CHANNEL_NUMBER, &[c[0], c[1], 0, 0]);
    attr(&mut m, XOR_PEER_ADDRESS, &xor_address(peer, txid));
    finish(m)
}

/// Checks that `buf` is the success response to the request of `method` with `txid`.
pub fn check_response(buf: &[u8], method: u16, txid: [u8; 12]) -> Result<(), TurnError> {
    if buf.len() < 20 || buf[4..8] != MAGIC_COOKIE.to_be_bytes() {
        return Err(TurnError::NotStun);
    }
    if buf[8..20] != txid {
        return Err(TurnError::WrongTransaction);
    }
    let kind = u16::from_be_bytes([buf[0], buf[1]]);
    if kind == method | SUCCESS {
        return Ok(());
    }
    if kind == method | ERROR {
        return Err(TurnError::Error(error_code(&buf[20..]).unwrap_or(0)));
    }
    Err(TurnError::Unexpected(kind))
}

fn error_code(mut attrs: &[u8]) -> Option<u16> {
    while attrs.len() >= 4 {
        let kind = u16::from_be_bytes([attrs[0], attrs[1]]);
        let len = usize::from(u16::from_be_bytes([attrs[2], attrs[3]]));
        let value = attrs.get(4..4 + len)?;
        if kind == ERROR_CODE && len >= 4 {
            return Some(u16::from(value[2] & 0x07) * 100 + u16::from(value[3]));
        }
        attrs = attrs.get((4 + len).next_multiple_of(4)..)?;
    }
    None
}

/// The method of an Allocate request (for [`check_response`]).
pub const ALLOCATE_METHOD: u16 = ALLOCATE;
/// The method of a ChannelBind request (for [`check_response`]).
pub const CHANNEL_BIND_METHOD: u16 = CHANNEL_BIND;

/// The 4-byte ChannelData header for `len` bytes of application data.
pub fn channel_data_header(channel: u16, len: usize) -> [u8; 4] {
    let c = channel.to_be_bytes();
    let l = (len as u16).to_be_bytes();
    [c[0], c[1], l[0], l[1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_well_formed_stun() {
        let a = allocate_request([1; 12]);
        assert_eq!(a.len() % 4, 0);
        assert_eq!(u16::from_be_bytes([a[2], a[3]]) as usize, a.len() - 20);
        assert!(voxgate_proto::looks_like_stun(&a));
        let b = channel_bind_request([2; 12], FIRST_CHANNEL, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(u16::from_be_bytes([b[2], b[3]]) as usize, b.len() - 20);
    }

    #[test]
    fn xor_peer_address_of_ipv4_follows_rfc8489() {
        // 192.0.2.1:32853 from RFC 5769's test vectors: port 0xA147, address 0xE112A643.
        let v = xor_address("192.0.2.1:32853".parse().unwrap(), [0; 12]);
        assert_eq!(v, vec![0, 1, 0xA1, 0x47, 0xE1, 0x12, 0xA6, 0x43]);
    }

    #[test]
    fn responses_are_checked_by_class_and_transaction() {
        let txid = [3; 12];
        let mut ok = header(ALLOCATE | SUCCESS, txid);
        ok = finish(ok);
        assert_eq!(check_response(&ok, ALLOCATE, txid), Ok(()));
        assert_eq!(
            check_response(&ok, ALLOCATE, [4; 12]),
            Err(TurnError::WrongTransaction)
        );
        let mut err = header(ALLOCATE | ERROR, txid);
        attr(&mut err, ERROR_CODE, &[0, 0, 4, 37]);
        let err = finish(err);
        assert_eq!(
            check_response(&err, ALLOCATE, txid),
            Err(TurnError::Error(437))
        );
        assert_eq!(
            check_response(b"short", ALLOCATE, txid),
            Err(TurnError::NotStun)
        );
    }

    #[test]
    fn channel_data_header_carries_channel_and_length() {
        assert_eq!(channel_data_header(0x4001, 120), [0x40, 0x01, 0, 120]);
    }
}
