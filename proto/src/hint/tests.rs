use super::*;

const KEY_BYTES: [u8; 32] = [
    0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0,
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
];

fn key() -> FleetKey {
    FleetKey::new(7, KEY_BYTES)
}

fn ring() -> Keyring {
    Keyring::new(key())
}

fn v4_hint(cluster_id: u32) -> RoutingHint {
    RoutingHint {
        cluster_id,
        loop_addr: "10.1.2.3:40001".parse().unwrap(),
    }
}

fn v6_hint(cluster_id: u32) -> RoutingHint {
    RoutingHint {
        cluster_id,
        loop_addr: "[fd00:1234::abcd:1]:50007".parse().unwrap(),
    }
}

fn nonce(seed: u8) -> [u8; NONCE_LEN] {
    std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
}

/// A mint time: 2024-01-01T00:00Z.
fn at() -> MintTime {
    MintTime::from_unix_secs(1_704_067_200)
}

fn is_ice_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

#[test]
fn layout_lengths_match_the_documented_format() {
    assert_eq!(RAW_V4_LEN, 45);
    assert_eq!(RAW_V6_LEN, 57);
    assert_eq!(UFRAG_V4_LEN, 60);
    assert_eq!(UFRAG_V6_LEN, 76);
    assert_eq!(MAX_UFRAG_LEN, 76);
    assert_eq!((RAW_UNTIMED_V4_LEN, RAW_UNTIMED_V6_LEN), (41, 53));
}

#[test]
fn v4_hint_round_trips_for_extreme_cluster_ids() {
    for cluster_id in [0, 1, 0x8000_0000, u32::MAX] {
        let hint = v4_hint(cluster_id);
        let ufrag = mint(&key(), &hint, at(), nonce(1));
        assert_eq!(ufrag.len(), UFRAG_V4_LEN);
        assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
    }
}

#[test]
fn v6_hint_round_trips_for_extreme_cluster_ids() {
    for cluster_id in [0, 1, 0x8000_0000, u32::MAX] {
        let hint = v6_hint(cluster_id);
        let ufrag = mint(&key(), &hint, at(), nonce(2));
        assert_eq!(ufrag.len(), UFRAG_V6_LEN);
        assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
    }
}

#[test]
fn v4_mapped_v6_address_stays_v6() {
    let hint = RoutingHint {
        cluster_id: 9,
        loop_addr: "[::ffff:10.0.0.1]:4000".parse().unwrap(),
    };
    let ufrag = mint(&key(), &hint, at(), nonce(3));
    assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
}

#[test]
fn v6_scope_and_flowinfo_are_dropped() {
    let hint = RoutingHint {
        cluster_id: 1,
        loop_addr: SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 77, 3)),
    };
    let ufrag = mint(&key(), &hint, at(), nonce(4));
    let decoded = decode(&ring(), ufrag.as_bytes()).unwrap();
    assert_eq!(
        decoded.loop_addr,
        SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0))
    );
}

#[test]
fn minted_ufrag_uses_only_ice_chars_within_ice_length() {
    for hint in [v4_hint(5), v6_hint(5)] {
        let ufrag = mint(&key(), &hint, at(), nonce(5));
        assert!((4..=256).contains(&ufrag.len()), "{ufrag}");
        assert!(ufrag.bytes().all(is_ice_char), "{ufrag}");
    }
}

#[test]
fn minted_ufrag_does_not_contain_the_address_in_clear() {
    let hint = v4_hint(5);
    let ufrag = mint(&key(), &hint, at(), nonce(6));
    assert!(!ufrag.contains("10.1.2.3"));
    let raw = STANDARD_NO_PAD.decode(&ufrag).unwrap();
    assert!(!raw.windows(4).any(|w| w == [10, 1, 2, 3]));
}

#[test]
fn mint_into_matches_mint() {
    let hint = v6_hint(42);
    let mut buf = [0u8; MAX_UFRAG_LEN];
    let n = mint_into(&key(), &hint, at(), nonce(7), &mut buf);
    assert_eq!(&buf[..n], mint(&key(), &hint, at(), nonce(7)).as_bytes());
}

#[test]
#[should_panic(expected = "output buffer")]
fn mint_into_too_small_buffer_panics_with_message() {
    let mut buf = [0u8; UFRAG_V4_LEN - 1];
    mint_into(&key(), &v4_hint(1), at(), nonce(8), &mut buf);
}

#[test]
fn distinct_nonces_give_distinct_ufrags() {
    let hint = v4_hint(3);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..256 {
        let n: [u8; NONCE_LEN] = rand::random();
        let ufrag = mint(&key(), &hint, at(), n);
        assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
        assert!(seen.insert(ufrag), "duplicate ufrag");
    }
}

#[test]
fn previous_key_in_keyring_still_decodes() {
    let old = FleetKey::new(1, [0x11; 32]);
    let new = FleetKey::new(2, [0x22; 32]);
    let ring = Keyring::new(new.clone()).with_previous(old.clone());
    assert_eq!(ring.current().id(), 2);
    let old_ufrag = mint(&old, &v4_hint(1), at(), nonce(9));
    let new_ufrag = mint(&new, &v6_hint(2), at(), nonce(9));
    assert_eq!(decode(&ring, old_ufrag.as_bytes()), Ok(v4_hint(1)));
    assert_eq!(decode(&ring, new_ufrag.as_bytes()), Ok(v6_hint(2)));
    // Once the previous key is dropped, its hints stop decoding.
    assert_eq!(
        decode(&Keyring::new(new), old_ufrag.as_bytes()),
        Err(HintError::UnknownKeyId)
    );
}

#[test]
fn keys_sharing_an_id_are_both_tried() {
    let a = FleetKey::new(4, [0xaa; 32]);
    let b = FleetKey::new(4, [0xbb; 32]);
    let ring = Keyring::new(a).with_previous(b.clone());
    let ufrag = mint(&b, &v4_hint(6), at(), nonce(10));
    assert_eq!(decode(&ring, ufrag.as_bytes()), Ok(v4_hint(6)));
}

#[test]
fn unknown_key_id_is_rejected() {
    let other = FleetKey::new(8, KEY_BYTES);
    let ufrag = mint(&other, &v4_hint(1), at(), nonce(11));
    assert_eq!(
        decode(&ring(), ufrag.as_bytes()),
        Err(HintError::UnknownKeyId)
    );
}

#[test]
fn hint_minted_with_another_key_of_the_same_id_is_rejected() {
    let forger = FleetKey::new(key().id(), [0x5a; 32]);
    for hint in [v4_hint(1), v6_hint(1)] {
        let ufrag = mint(&forger, &hint, at(), nonce(12));
        assert_eq!(
            decode(&ring(), ufrag.as_bytes()),
            Err(HintError::AuthFailed)
        );
    }
}

#[test]
fn flipping_any_bit_of_the_ufrag_is_rejected() {
    for hint in [v4_hint(77), v6_hint(77)] {
        let ufrag = mint(&key(), &hint, at(), nonce(13)).into_bytes();
        for pos in 0..ufrag.len() {
            for bit in 0..8 {
                let mut bad = ufrag.clone();
                bad[pos] ^= 1 << bit;
                assert!(
                    decode(&ring(), &bad).is_err(),
                    "bit {bit} at {pos} accepted"
                );
            }
        }
    }
}

#[test]
fn replacing_any_char_of_the_ufrag_is_rejected() {
    const ICE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for hint in [v4_hint(77), v6_hint(77)] {
        let ufrag = mint(&key(), &hint, at(), nonce(14)).into_bytes();
        for pos in 0..ufrag.len() {
            for &c in ICE.iter().filter(|&&c| c != ufrag[pos]) {
                let mut bad = ufrag.clone();
                bad[pos] = c;
                assert!(decode(&ring(), &bad).is_err(), "{c} at {pos} accepted");
            }
        }
    }
}

#[test]
fn truncated_ufrag_is_rejected_at_every_length() {
    for hint in [v4_hint(1), v6_hint(1)] {
        let ufrag = mint(&key(), &hint, at(), nonce(15));
        for len in 0..ufrag.len() {
            assert!(decode(&ring(), &ufrag.as_bytes()[..len]).is_err(), "{len}");
        }
    }
}

#[test]
fn extended_ufrag_is_rejected() {
    let ufrag = mint(&key(), &v4_hint(1), at(), nonce(16));
    for suffix in ["A", "AA", "AAA", "AAAA"] {
        let long = format!("{ufrag}{suffix}");
        assert!(decode(&ring(), long.as_bytes()).is_err(), "{suffix}");
    }
    assert_eq!(
        decode(&ring(), &[b'A'; 300]),
        Err(HintError::BadLength),
        "longer than any ICE ufrag"
    );
}

#[test]
fn non_base64_char_is_bad_encoding() {
    let mut ufrag = mint(&key(), &v4_hint(1), at(), nonce(17)).into_bytes();
    ufrag[10] = b'-';
    assert_eq!(decode(&ring(), &ufrag), Err(HintError::BadEncoding));
    ufrag[10] = b'=';
    assert_eq!(decode(&ring(), &ufrag), Err(HintError::BadEncoding));
}

#[test]
fn unknown_version_is_rejected() {
    let mut raw = STANDARD_NO_PAD
        .decode(mint(&key(), &v4_hint(1), at(), nonce(18)))
        .unwrap();
    for version in [0, 3, 0xff] {
        raw[0] = version;
        let ufrag = STANDARD_NO_PAD.encode(&raw);
        assert_eq!(
            decode(&ring(), ufrag.as_bytes()),
            Err(HintError::UnknownVersion)
        );
    }
}

#[test]
fn mint_time_round_trips_to_the_minute() {
    for (secs, minutes) in [(0, 0), (59, 0), (60, 1), (1_704_067_259, 28_401_120)] {
        let minted = MintTime::from_unix_secs(secs);
        assert_eq!(minted.unix_minutes(), minutes);
        assert_eq!(minted.unix_secs(), u64::from(minutes) * 60);
        for hint in [v4_hint(3), v6_hint(3)] {
            let ufrag = mint(&key(), &hint, minted, nonce(21));
            let decoded = decode_timed(&ring(), ufrag.as_bytes()).unwrap();
            assert_eq!(decoded.route, hint);
            assert_eq!(decoded.minted, Some(minted));
        }
    }
    assert_eq!(MintTime::from_unix_secs(u64::MAX).unix_minutes(), u32::MAX);
    assert_eq!(
        MintTime::from_system_time(UNIX_EPOCH - std::time::Duration::from_secs(5)),
        MintTime::from_unix_minutes(0)
    );
}

#[test]
fn version_1_hint_decodes_without_a_mint_time() {
    for hint in [v4_hint(4), v6_hint(4)] {
        let ufrag = mint_untimed(&key(), &hint, nonce(22));
        assert_eq!(ufrag.len(), if hint.loop_addr.is_ipv4() { 55 } else { 71 });
        assert_eq!(
            decode_timed(&ring(), ufrag.as_bytes()),
            Ok(DecodedHint {
                route: hint,
                minted: None
            })
        );
    }
}

#[test]
fn stripping_the_mint_time_and_relabelling_as_version_1_is_rejected() {
    // The version is authenticated: a version 2 hint cut down to the version 1 layout
    // (mint time and tag re-spliced) must not verify.
    let raw = STANDARD_NO_PAD
        .decode(mint(&key(), &v4_hint(1), at(), nonce(23)))
        .unwrap();
    let route_end = PREFIX_LEN + ROUTE_V4_LEN;
    let mut cut = raw[..route_end].to_vec();
    cut.extend_from_slice(&raw[route_end + MINT_TIME_LEN..]);
    cut[0] = VERSION_UNTIMED;
    assert_eq!(cut.len(), RAW_UNTIMED_V4_LEN);
    let ufrag = STANDARD_NO_PAD.encode(&cut);
    assert_eq!(
        decode_timed(&ring(), ufrag.as_bytes()),
        Err(HintError::AuthFailed)
    );
}

#[test]
fn authenticated_family_mismatch_is_bad_address() {
    // Hand-build a v4-length hint whose plaintext claims family 6, under the real key.
    let k = key();
    let n = nonce(19);
    let mut raw = [0u8; RAW_V4_LEN];
    raw[0] = VERSION;
    raw[1] = k.id();
    raw[2..PREFIX_LEN].copy_from_slice(&n);
    let pt_len = ROUTE_V4_LEN + MINT_TIME_LEN;
    let pt = &mut raw[PREFIX_LEN..PREFIX_LEN + pt_len];
    pt[4] = FAMILY_V6;
    let tag = k
        .cipher()
        .encrypt_in_place_detached(Nonce::from_slice(&n), &[VERSION, k.id()], pt)
        .unwrap();
    raw[PREFIX_LEN + pt_len..].copy_from_slice(&tag);
    let ufrag = STANDARD_NO_PAD.encode(raw);
    assert_eq!(
        decode(&ring(), ufrag.as_bytes()),
        Err(HintError::BadAddress)
    );
}

#[test]
fn fleet_key_debug_does_not_reveal_key() {
    let k = key();
    let dbg = format!("{k:?} {:?}", Keyring::new(k.clone()));
    let hex: String = KEY_BYTES.iter().map(|b| format!("{b:02x}")).collect();
    assert!(!dbg.to_lowercase().contains(&hex[..8]), "{dbg}");
    assert!(!dbg.contains(&format!("{:?}", &KEY_BYTES[..4])), "{dbg}");
    assert!(dbg.contains("<redacted>"));
    assert!(dbg.contains('7'));
}

#[test]
fn from_hex_parses_either_case_and_trims_whitespace() {
    let hex: String = KEY_BYTES.iter().map(|b| format!("{b:02x}")).collect();
    let upper = format!("  {}\n", hex.to_uppercase());
    for text in [hex.as_str(), upper.as_str()] {
        let k = FleetKey::from_hex(7, text).unwrap();
        assert_eq!(k.id(), 7);
        // Same key: a hint minted with it decodes under the reference key.
        let ufrag = mint(&k, &v4_hint(2), at(), nonce(20));
        assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(v4_hint(2)));
    }
}

#[test]
fn from_hex_rejects_wrong_length() {
    assert_eq!(
        FleetKey::from_hex(1, "abcd").unwrap_err(),
        KeyError::WrongLength { found: 4 }
    );
    assert_eq!(
        FleetKey::from_hex(1, &"a".repeat(65)).unwrap_err(),
        KeyError::WrongLength { found: 65 }
    );
    assert_eq!(
        FleetKey::from_hex(1, "").unwrap_err(),
        KeyError::WrongLength { found: 0 }
    );
}

#[test]
fn from_hex_rejects_non_hex_without_echoing_it() {
    let mut text = "0123456789abcdef".repeat(4);
    text.replace_range(9..10, "g");
    let err = FleetKey::from_hex(1, &text).unwrap_err();
    assert_eq!(err, KeyError::NotHex { position: 9 });
    assert!(!err.to_string().contains("0123456"));
    // Multi-byte characters count as characters, not bytes.
    let text = format!("é{}", "a".repeat(63));
    assert_eq!(
        FleetKey::from_hex(1, &text).unwrap_err(),
        KeyError::NotHex { position: 0 }
    );
}

#[test]
fn error_labels_are_snake_case_and_distinct() {
    let all = [
        HintError::BadEncoding,
        HintError::BadLength,
        HintError::UnknownVersion,
        HintError::UnknownKeyId,
        HintError::AuthFailed,
        HintError::BadAddress,
    ];
    let labels: std::collections::HashSet<_> = all.iter().map(HintError::as_str).collect();
    assert_eq!(labels.len(), all.len());
    assert!(labels
        .iter()
        .all(|l| l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    assert_eq!(HintError::AuthFailed.as_str(), "auth_failed");
}
