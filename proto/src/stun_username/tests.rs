use super::*;

/// Builds a STUN message by hand: header, then each `(type, value)` attribute with zero
/// padding, and the length field filled in.
fn message(msg_type: u16, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&msg_type.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&MAGIC_COOKIE.to_be_bytes());
    m.extend_from_slice(&[0xA5; 12]);
    for (t, v) in attrs {
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&(v.len() as u16).to_be_bytes());
        m.extend_from_slice(v);
        m.resize(m.len().next_multiple_of(4), 0);
    }
    let len = (m.len() - HEADER_LEN) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// A binding request shaped like a browser's ICE check.
fn ice_check(username: &[u8]) -> Vec<u8> {
    message(
        BINDING_REQUEST,
        &[
            (ATTR_USERNAME, username),
            (0x8029, &[1, 2, 3, 4, 5, 6, 7, 8]), // ICE-CONTROLLING
            (0x0024, &[0x6e, 0, 0x1e, 0xff]),    // PRIORITY
            (ATTR_MESSAGE_INTEGRITY, &[0x77; 20]),
            (0x8028, &[0xde, 0xad, 0xbe, 0xef]), // FINGERPRINT
        ],
    )
}

#[test]
fn reads_username_of_a_real_shaped_binding_request() {
    // 7 bytes: exercises padding of the USERNAME attribute.
    let dg = ice_check(b"srv1:cli");
    assert!(looks_like_stun(&dg));
    assert_eq!(binding_request_username(&dg), Ok(&b"srv1:cli"[..]));
    assert_eq!(server_ufrag(&dg), Ok(&b"srv1"[..]));
    let dg = ice_check(b"abcdefghij:xyz");
    assert_eq!(server_ufrag(&dg), Ok(&b"abcdefghij"[..]));
}

#[test]
fn header_is_byte_exact_for_a_known_message() {
    let dg = ice_check(b"ab:c");
    assert_eq!(&dg[..2], &[0x00, 0x01]);
    assert_eq!(&dg[4..8], &[0x21, 0x12, 0xA4, 0x42]);
    assert_eq!(
        usize::from(u16::from_be_bytes([dg[2], dg[3]])),
        dg.len() - 20
    );
    // USERNAME attr header right after the STUN header.
    assert_eq!(&dg[20..24], &[0x00, 0x06, 0x00, 0x04]);
}

#[test]
fn binding_response_is_not_a_request() {
    for t in [0x0101u16, 0x0111, 0x0011, 0x0003] {
        let dg = message(t, &[(ATTR_USERNAME, b"a:b")]);
        assert!(looks_like_stun(&dg));
        assert_eq!(
            binding_request_username(&dg),
            Err(StunError::NotBindingRequest),
            "{t:#06x}"
        );
    }
}

#[test]
fn bad_magic_cookie_is_not_stun() {
    let mut dg = ice_check(b"a:b");
    dg[7] ^= 1;
    assert!(!looks_like_stun(&dg));
    assert_eq!(binding_request_username(&dg), Err(StunError::NotStun));
}

#[test]
fn top_bits_set_is_not_stun() {
    for top in [0x40u8, 0x80, 0xC0] {
        let mut dg = ice_check(b"a:b");
        dg[0] |= top;
        assert!(!looks_like_stun(&dg));
        assert_eq!(binding_request_username(&dg), Err(StunError::NotStun));
    }
}

#[test]
fn length_field_mismatch_is_rejected() {
    let dg = ice_check(b"a:b");
    let real = u16::from_be_bytes([dg[2], dg[3]]);
    for wrong in [0, real - 4, real + 4, real - 1, real + 1, u16::MAX] {
        let mut bad = dg.clone();
        bad[2..4].copy_from_slice(&wrong.to_be_bytes());
        assert_eq!(
            binding_request_username(&bad),
            Err(StunError::BadLength),
            "{wrong}"
        );
    }
    // Trailing bytes beyond the declared length.
    let mut long = dg.clone();
    long.extend_from_slice(&[0; 4]);
    assert_eq!(binding_request_username(&long), Err(StunError::BadLength));
}

#[test]
fn length_not_multiple_of_four_is_rejected() {
    let mut dg = message(BINDING_REQUEST, &[(ATTR_USERNAME, b"a:b")]);
    dg.push(0);
    let len = (dg.len() - HEADER_LEN) as u16;
    dg[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(binding_request_username(&dg), Err(StunError::BadLength));
}

#[test]
fn attribute_overrunning_the_end_is_rejected() {
    let mut dg = ice_check(b"a:b");
    // FINGERPRINT is last: claim 8 bytes of value where 4 exist.
    let fp = dg.len() - 8;
    dg[fp + 2..fp + 4].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(binding_request_username(&dg), Err(StunError::Truncated));
    // USERNAME is first: claim more than the whole message.
    let mut dg = ice_check(b"a:b");
    dg[22..24].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert_eq!(binding_request_username(&dg), Err(StunError::Truncated));
}

#[test]
fn attribute_header_without_its_value_is_rejected() {
    // The last attribute header claims 1 byte of value (4 with padding); none follows.
    let mut dg = message(BINDING_REQUEST, &[(ATTR_USERNAME, b"a:b")]);
    dg.extend_from_slice(&[0x80, 0x22, 0x00, 0x01]);
    let len = (dg.len() - HEADER_LEN) as u16;
    dg[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(binding_request_username(&dg), Err(StunError::Truncated));
}

#[test]
fn missing_username_is_rejected() {
    let dg = message(
        BINDING_REQUEST,
        &[(0x0024, &[0, 0, 0, 1]), (ATTR_MESSAGE_INTEGRITY, &[0; 20])],
    );
    assert_eq!(binding_request_username(&dg), Err(StunError::NoUsername));
    let bare = message(BINDING_REQUEST, &[]);
    assert_eq!(binding_request_username(&bare), Err(StunError::NoUsername));
}

#[test]
fn username_after_message_integrity_is_ignored() {
    let dg = message(
        BINDING_REQUEST,
        &[(ATTR_MESSAGE_INTEGRITY, &[0; 20]), (ATTR_USERNAME, b"a:b")],
    );
    assert_eq!(binding_request_username(&dg), Err(StunError::NoUsername));
    let dg = message(
        BINDING_REQUEST,
        &[
            (ATTR_USERNAME, b"a:b"),
            (ATTR_MESSAGE_INTEGRITY_SHA256, &[0; 32]),
            (ATTR_USERNAME, b"evil:x"),
        ],
    );
    assert_eq!(server_ufrag(&dg), Ok(&b"a"[..]));
}

#[test]
fn duplicate_username_is_rejected() {
    let dg = message(
        BINDING_REQUEST,
        &[(ATTR_USERNAME, b"a:b"), (ATTR_USERNAME, b"c:d")],
    );
    assert_eq!(
        binding_request_username(&dg),
        Err(StunError::DuplicateUsername)
    );
}

#[test]
fn username_longer_than_513_bytes_is_rejected() {
    let ok = vec![b'a'; 513];
    assert_eq!(binding_request_username(&ice_check(&ok)), Ok(&ok[..]));
    let long = vec![b'a'; 514];
    assert_eq!(
        binding_request_username(&ice_check(&long)),
        Err(StunError::UsernameTooLong)
    );
}

#[test]
fn empty_username_is_rejected() {
    assert_eq!(
        binding_request_username(&ice_check(b"")),
        Err(StunError::BadUsername)
    );
}

#[test]
fn truncated_datagram_is_rejected_at_every_length() {
    let dg = ice_check(b"srv1:cli");
    for len in 0..dg.len() {
        assert!(binding_request_username(&dg[..len]).is_err(), "{len}");
        assert_eq!(looks_like_stun(&dg[..len]), len >= HEADER_LEN);
    }
}

#[test]
fn split_username_needs_colon_and_two_nonempty_parts() {
    assert_eq!(split_username(b"srv:cli"), Ok((&b"srv"[..], &b"cli"[..])));
    assert_eq!(split_username(b"a:b:c"), Ok((&b"a"[..], &b"b:c"[..])));
    for bad in [&b""[..], b"nocolon", b":cli", b"srv:", b":"] {
        assert_eq!(split_username(bad), Err(StunError::BadUsername), "{bad:?}");
    }
    assert_eq!(
        server_ufrag(&ice_check(b"nocolon")),
        Err(StunError::BadUsername)
    );
}

#[test]
fn rfc7983_demux_classifies_first_bytes() {
    let dg = ice_check(b"a:b");
    for b0 in 0..=255u8 {
        let mut d = dg.clone();
        d[0] = b0;
        assert_eq!(looks_like_stun(&d), b0 <= 3, "{b0}");
    }
}

#[test]
fn error_labels_are_distinct() {
    let all = [
        StunError::NotStun,
        StunError::NotBindingRequest,
        StunError::Truncated,
        StunError::BadLength,
        StunError::NoUsername,
        StunError::DuplicateUsername,
        StunError::UsernameTooLong,
        StunError::BadUsername,
    ];
    let labels: std::collections::HashSet<_> = all.iter().map(StunError::as_str).collect();
    assert_eq!(labels.len(), all.len());
}
