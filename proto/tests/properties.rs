//! Property tests: no parser panics on arbitrary bytes, and every codec round-trips.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use proptest::prelude::*;
use voxgate_proto::hint::{
    self, FleetKey, Keyring, MintTime, RoutingHint, MAX_UFRAG_LEN, NONCE_LEN,
};
use voxgate_proto::relay_header::{
    is_relay_framed, Direction, RelayHeader, Transport, MAX_HEADER_LEN,
};
use voxgate_proto::stun_username::{
    binding_request_username, looks_like_stun, server_ufrag, split_username,
};

fn keyring() -> Keyring {
    Keyring::new(FleetKey::new(3, [0x42; 32])).with_previous(FleetKey::new(2, [0x24; 32]))
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(ip),
            port,
            0,
            0
        ))),
    ]
}

fn routing_hint() -> impl Strategy<Value = RoutingHint> {
    (any::<u32>(), socket_addr()).prop_map(|(cluster_id, loop_addr)| RoutingHint {
        cluster_id,
        loop_addr,
    })
}

fn transport() -> impl Strategy<Value = Transport> {
    prop_oneof![
        Just(Transport::Udp),
        any::<u32>().prop_map(|conn| Transport::Tcp { conn }),
    ]
}

fn relay_header() -> impl Strategy<Value = RelayHeader> {
    (any::<bool>(), socket_addr(), transport()).prop_map(|(to_client, client, transport)| {
        RelayHeader {
            direction: if to_client {
                Direction::ToClient
            } else {
                Direction::ToTransceiver
            },
            client,
            transport,
        }
    })
}

/// Bytes that are mostly ICE characters, so the decoder gets past base64 often.
fn ice_ish_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            9 => prop::sample::select(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".to_vec()
            ),
            1 => any::<u8>(),
        ],
        0..300,
    )
}

/// A STUN-looking prefix followed by random bytes, so the attribute walker is exercised.
fn stun_ish_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 0..600),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut v, fix_len, fix_type)| {
            if v.len() >= 20 {
                if fix_type {
                    v[0] = 0;
                    v[1] = 1;
                }
                v[4..8].copy_from_slice(&0x2112_A442u32.to_be_bytes());
                if fix_len {
                    let len = ((v.len() - 20) / 4 * 4) as u16;
                    v.truncate(20 + len as usize);
                    v[2..4].copy_from_slice(&len.to_be_bytes());
                }
            }
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn parsers_never_panic_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let keys = keyring();
        let _ = hint::decode_timed(&keys, &bytes);
        let _ = RelayHeader::decode(&bytes);
        let _ = binding_request_username(&bytes);
        let _ = split_username(&bytes);
        let _ = server_ufrag(&bytes);
        let _ = looks_like_stun(&bytes);
        let _ = is_relay_framed(&bytes);
    }

    #[test]
    fn hint_decode_never_panics_on_ice_like_text(bytes in ice_ish_bytes()) {
        let _ = hint::decode(&keyring(), &bytes);
    }

    #[test]
    fn stun_reader_never_panics_and_returns_bytes_inside_the_datagram(bytes in stun_ish_bytes()) {
        if let Ok(username) = binding_request_username(&bytes) {
            prop_assert!(looks_like_stun(&bytes));
            prop_assert!(!username.is_empty() && username.len() <= 513);
            let range = bytes.as_ptr_range();
            prop_assert!(range.contains(&username.as_ptr()));
        }
        if let Ok(ufrag) = server_ufrag(&bytes) {
            prop_assert!(!ufrag.is_empty() && !ufrag.contains(&b':'));
        }
    }

    #[test]
    fn relay_header_decode_never_panics_on_framed_looking_bytes(
        v2 in any::<bool>(),
        flags in any::<u8>(),
        tail in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let magic = if v2 { voxgate_proto::MAGIC_V2 } else { voxgate_proto::MAGIC_V1 };
        let mut bytes = vec![magic, flags];
        bytes.extend_from_slice(&tail);
        if let Ok((h, payload)) = RelayHeader::decode(&bytes) {
            prop_assert_eq!(h.encoded_len() + payload.len(), bytes.len());
            // What decodes re-encodes to the same bytes (a v2 UDP header re-encodes as v1,
            // so compare only the canonical forms).
            if !v2 || matches!(h.transport, Transport::Tcp { .. }) {
                let mut again = vec![0u8; h.encoded_len()];
                h.encode(&mut again).unwrap();
                prop_assert_eq!(&again[..], &bytes[..h.encoded_len()]);
            }
        }
    }

    #[test]
    fn any_routing_hint_round_trips(
        hint in routing_hint(),
        minutes in any::<u32>(),
        nonce in any::<[u8; NONCE_LEN]>(),
        use_previous in any::<bool>(),
    ) {
        let keys = keyring();
        let key = if use_previous { FleetKey::new(2, [0x24; 32]) } else { keys.current().clone() };
        let minted = MintTime::from_unix_minutes(minutes);
        let ufrag = hint::mint(&key, &hint, minted, nonce);
        prop_assert!((4..=256).contains(&ufrag.len()));
        prop_assert!(ufrag.len() <= MAX_UFRAG_LEN);
        prop_assert!(ufrag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/'));
        prop_assert_eq!(hint::decode(&keys, ufrag.as_bytes()), Ok(hint));
        let timed = hint::decode_timed(&keys, ufrag.as_bytes()).unwrap();
        prop_assert_eq!(timed.minted, Some(minted));
        // The legacy layout decodes too, with no mint time.
        let untimed = hint::mint_untimed(&key, &hint, nonce);
        prop_assert_eq!(
            hint::decode_timed(&keys, untimed.as_bytes()),
            Ok(hint::DecodedHint { route: hint, minted: None })
        );
    }

    #[test]
    fn mutated_ufrag_is_rejected_or_identical(
        hint in routing_hint(),
        minutes in any::<u32>(),
        nonce in any::<[u8; NONCE_LEN]>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let keys = keyring();
        let minted = MintTime::from_unix_minutes(minutes);
        let original = hint::mint(keys.current(), &hint, minted, nonce).into_bytes();
        let mut mutated = original.clone();
        for (at, byte, kind) in edits {
            match kind {
                0 if !mutated.is_empty() => { let i = at.index(mutated.len()); mutated[i] = byte; }
                1 if !mutated.is_empty() => { mutated.remove(at.index(mutated.len())); }
                _ => { let i = at.index(mutated.len() + 1); mutated.insert(i, byte); }
            }
        }
        match hint::decode_timed(&keys, &mutated) {
            // Only an edit that restored the original text can still decode.
            Ok(decoded) => {
                prop_assert_eq!(decoded.route, hint);
                prop_assert_eq!(decoded.minted, Some(minted));
                prop_assert_eq!(mutated, original);
            }
            Err(_) => prop_assert_ne!(mutated, original),
        }
    }

    #[test]
    fn any_relay_header_round_trips(h in relay_header(), payload in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = vec![0u8; MAX_HEADER_LEN + payload.len()];
        let n = h.encode(&mut buf).unwrap();
        prop_assert_eq!(n, h.encoded_len());
        buf.truncate(n);
        buf.extend_from_slice(&payload);
        prop_assert!(is_relay_framed(&buf));
        prop_assert!(!looks_like_stun(&buf));
        let (got, rest) = RelayHeader::decode(&buf).unwrap();
        prop_assert_eq!(got, h);
        prop_assert_eq!(rest, &payload[..]);
    }

    #[test]
    fn split_username_parts_rejoin_to_the_input(username in prop::collection::vec(any::<u8>(), 0..80)) {
        if let Ok((recipient, sender)) = split_username(&username) {
            prop_assert!(!recipient.is_empty() && !sender.is_empty());
            prop_assert!(!recipient.contains(&b':'));
            let mut joined = recipient.to_vec();
            joined.push(b':');
            joined.extend_from_slice(sender);
            prop_assert_eq!(joined, username);
        }
    }
}
