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
