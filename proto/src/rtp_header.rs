//! The two facts of an RTP header that can be read without decrypting SRTP: whether a datagram
//! is RTP at all (RFC 7983 demultiplexing, RFC 5761 for RTCP on the same port) and its sequence
//! number, which SRTP leaves in the clear.

/// Whether `datagram` is RTP (not RTCP): at least a fixed header's 12 bytes, a first byte in
/// 128..=191 (version 2), and a second byte that is not an RTCP packet type 192..=223 (which, as
/// marker bit plus payload type, is the range RTP avoids).
pub fn is_rtp(datagram: &[u8]) -> bool {
    match datagram {
        [b0, b1, ..] if datagram.len() >= 12 => {
            (128..=191).contains(b0) && !(192..=223).contains(b1)
        }
        _ => false,
    }
}

/// The sequence number of an RTP datagram, `None` for anything else.
pub fn sequence_number(datagram: &[u8]) -> Option<u16> {
    is_rtp(datagram).then(|| u16::from_be_bytes([datagram[2], datagram[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtp_is_told_from_rtcp_stun_dtls_and_runts() {
        let mut rtp = vec![0x80, 111, 0x12, 0x34];
        rtp.extend_from_slice(&[0; 16]);
        assert_eq!(sequence_number(&rtp), Some(0x1234));
        let mut rtcp = rtp.clone();
        rtcp[1] = 201;
        for other in [
            rtcp,
            vec![0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0],
            vec![22; 20],
            rtp[..8].to_vec(),
        ] {
            assert!(!is_rtp(&other), "{other:?}");
            assert_eq!(sequence_number(&other), None);
        }
    }
}
