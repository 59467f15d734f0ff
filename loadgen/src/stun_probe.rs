//! STUN Binding requests shaped like a browser's ICE connectivity checks, for driving the
//! relay's first-packet path and for the parser micro-benchmarks.
//!
//! The layout is RFC 8489/8445's: header, USERNAME (`<server ufrag>:<client ufrag>`),
//! PRIORITY, ICE-CONTROLLING, MESSAGE-INTEGRITY, FINGERPRINT. Integrity and fingerprint bytes
//! are placeholders: the relay routes on USERNAME alone and never verifies them (only the
//! transceiver, which knows the password, does).

use voxgate_proto::MAGIC_COOKIE;

const BINDING_REQUEST: u16 = 0x0001;
const USERNAME: u16 = 0x0006;
const PRIORITY: u16 = 0x0024;
const ICE_CONTROLLING: u16 = 0x802A;
const MESSAGE_INTEGRITY: u16 = 0x0008;
const FINGERPRINT: u16 = 0x8028;

/// A Binding request with `username` and the usual ICE attributes.
pub fn binding_request(username: &[u8], transaction_id: [u8; 12]) -> Vec<u8> {
    let mut m = Vec::with_capacity(20 + 4 + username.len() + 3 + 8 + 12 + 24 + 8);
    m.extend_from_slice(&BINDING_REQUEST.to_be_bytes());
    m.extend_from_slice(&[0, 0]); // length, patched below
    m.extend_from_slice(&MAGIC_COOKIE.to_be_bytes());
    m.extend_from_slice(&transaction_id);
    attribute(&mut m, USERNAME, username);
    attribute(&mut m, PRIORITY, &0x6e7f_1eff_u32.to_be_bytes());
    attribute(
        &mut m,
        ICE_CONTROLLING,
        &0x1122_3344_5566_7788_u64.to_be_bytes(),
    );
    attribute(&mut m, MESSAGE_INTEGRITY, &[0xAB; 20]);
    attribute(&mut m, FINGERPRINT, &[0xCD; 4]);
    let len = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

fn attribute(m: &mut Vec<u8>, kind: u16, value: &[u8]) {
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&(value.len() as u16).to_be_bytes());
    m.extend_from_slice(value);
    m.resize(m.len().next_multiple_of(4), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_reads_the_server_ufrag_of_a_probe() {
        let m = binding_request(b"SERVERufrag+/1:cli1", [7; 12]);
        assert_eq!(m.len() % 4, 0);
        assert!(voxgate_proto::looks_like_stun(&m));
        assert_eq!(voxgate_proto::server_ufrag(&m).unwrap(), b"SERVERufrag+/1");
    }
}
