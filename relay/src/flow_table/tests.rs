//! Flow table behaviour with a fake clock: every rule of the module docs, plus properties.

use std::collections::HashSet;

use proptest::prelude::*;
use voxgate_proto::{mint, mint_untimed, FleetKey, Keyring, MintTime, RoutingHint, MAX_HEADER_LEN};

use super::*;

const KEY: [u8; 32] = [0x42; 32];
const OTHER_KEY: [u8; 32] = [0x24; 32];
const OWN_CLUSTER: u32 = 0;
const PEER_CLUSTER: u32 = 7;

fn loop_addr() -> SocketAddr {
    "10.0.0.5:40001".parse().unwrap()
}
fn loop2_addr() -> SocketAddr {
    "10.0.0.6:40002".parse().unwrap()
}
fn peer_addr() -> SocketAddr {
    "192.0.2.77:3478".parse().unwrap()
}
fn client(n: u16) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, 7], 5000 + n))
}

fn cfg() -> RoutingConfig {
    RoutingConfig {
        keyring: Keyring::new(FleetKey::new(1, KEY)),
        cluster_id: OWN_CLUSTER,
        peers: vec![(PEER_CLUSTER, peer_addr())],
        transceivers: vec!["10.0.0.0/8".parse().unwrap()],
        max_tentative_per_ip: 4,
        max_flows: 64,
        max_tentative: 64,
        hint_max_age: Duration::from_secs(86_400),
        accept_untimed_hints: false,
        tentative_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        lookups: false,
        lookup_rate: 10,
        lookup_negative_ttl: Duration::from_secs(5),
        route_refresh: Duration::from_secs(60),
    }
}

fn with_cache() -> RoutingConfig {
    RoutingConfig {
        lookups: true,
        ..cfg()
    }
}

/// The relay's wall clock when a test table is made (2024-01-01T00:00Z), in Unix seconds.
const WALL_T0: u64 = 1_704_067_200;

/// A table whose wall clock reads [`WALL_T0`] now.
fn table(cfg: RoutingConfig) -> FlowTable {
    let mut t = FlowTable::new(cfg);
    t.set_wall_clock(Instant::now(), Duration::from_secs(WALL_T0));
    t
}

/// A hint minted at [`WALL_T0`].
fn hint_for(cluster_id: u32, to: SocketAddr, nonce: u8) -> String {
    hint_minted(cluster_id, to, nonce, WALL_T0)
}

fn hint_minted(cluster_id: u32, to: SocketAddr, nonce: u8, unix_secs: u64) -> String {
    mint(
        &FleetKey::new(1, KEY),
        &RoutingHint {
            cluster_id,
            loop_addr: to,
        },
        MintTime::from_unix_secs(unix_secs),
        [nonce; 12],
    )
}

/// A STUN binding request as a browser sends it: USERNAME, PRIORITY, a dummy
/// MESSAGE-INTEGRITY and FINGERPRINT.
fn stun(username: &[u8]) -> Vec<u8> {
    let mut m = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
    m.extend_from_slice(&[0x5A; 12]);
    let mut attr = |t: u16, v: &[u8]| {
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&(v.len() as u16).to_be_bytes());
        m.extend_from_slice(v);
        m.resize(m.len().next_multiple_of(4), 0);
    };
    attr(0x0006, username);
    attr(0x0024, &[0x6e, 0, 0x1e, 0xff]);
    attr(0x0008, &[0x77; 20]);
    attr(0x8028, &[0xde, 0xad, 0xbe, 0xef]);
    let len = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

fn check_for(ufrag: &str) -> Vec<u8> {
    stun(format!("{ufrag}:cli1").as_bytes())
}

fn framed(direction: Direction, client: SocketAddr, payload: &[u8]) -> Vec<u8> {
    framed_with(RelayHeader::udp(direction, client), payload)
}

fn framed_with(header: RelayHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; MAX_HEADER_LEN];
    let n = header.encode(&mut out).unwrap();
    out.truncate(n);
    out.extend_from_slice(payload);
    out
}

/// A frame of the relay TCP connection `conn` of `client`, as a version 2 datagram.
fn tcp_framed(direction: Direction, client: SocketAddr, conn: u32, payload: &[u8]) -> Vec<u8> {
    let header = RelayHeader {
        direction,
        client,
        transport: Transport::Tcp { conn },
    };
    framed_with(header, payload)
}

fn reply(client: SocketAddr, payload: &[u8]) -> Vec<u8> {
    framed(Direction::ToClient, client, payload)
}

fn to_transceiver(c: SocketAddr) -> Option<RelayHeader> {
    Some(RelayHeader::udp(Direction::ToTransceiver, c))
}

const DTLS: &[u8] = &[22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 1];

fn drops(t: &FlowTable, r: DropReason) -> u64 {
    t.stats().drops[r.index()]
}

#[test]
fn valid_hint_creates_tentative_flow_and_forwards_with_header() {
    let mut t = table(cfg());
    let now = Instant::now();
    let dg = check_for(&hint_for(OWN_CLUSTER, loop_addr(), 1));
    let v = t.on_client_datagram(now, client(1), &dg);
    assert_eq!(
        v,
        Verdict::Forward {
            to: loop_addr(),
            header: to_transceiver(client(1))
        }
    );
    assert_eq!(t.route_of(client(1)), Some((loop_addr(), false)));
    assert_eq!((t.flow_count(), t.tentative_count()), (1, 1));
    assert_eq!(t.stats().flows_created, 1);
}

#[test]
fn a_prefaulted_table_is_empty_keeps_its_allocation_and_works() {
    let mut t = table(cfg());
    let capacity = t.flows.capacity();
    let bytes = t.prefault(Instant::now());
    assert!(
        bytes >= capacity * std::mem::size_of::<Flow>(),
        "{bytes} bytes"
    );
    assert_eq!(t.flows.capacity(), capacity, "no reallocation");
    assert_eq!((t.flow_count(), t.tentative_count()), (0, 0));
    assert!(t.tentative_per_source.is_empty());
    let now = Instant::now();
    let dg = check_for(&hint_for(OWN_CLUSTER, loop_addr(), 1));
    assert!(matches!(
        t.on_client_datagram(now, client(1), &dg),
        Verdict::Forward { .. }
    ));
    assert_eq!((t.flow_count(), t.tentative_count()), (1, 1));
}

#[test]
fn later_packets_of_a_known_flow_are_forwarded_opaquely() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    for dg in [DTLS, &[0x80, 0x60, 1, 2][..], &[], &[0xD0, 0xFF]] {
        assert_eq!(
            t.on_client_datagram(now, client(1), dg),
            Verdict::Forward {
                to: loop_addr(),
                header: to_transceiver(client(1))
            }
        );
    }
    // Even a check naming another loop: the flow is opaque once created.
    let other = check_for(&hint_for(0, loop2_addr(), 2));
    assert!(matches!(
        t.on_client_datagram(now, client(1), &other),
        Verdict::Forward { to, .. } if to == loop_addr()
    ));
    assert_eq!(t.flow_count(), 1);
}

#[test]
fn forged_and_corrupted_hints_create_no_flow() {
    let mut t = table(cfg());
    let now = Instant::now();
    let good = hint_for(0, loop_addr(), 3);
    let mut forged: Vec<String> = Vec::new();
    // Every single-character corruption of a real hint.
    for i in 0..good.len() {
        let mut b = good.clone().into_bytes();
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        forged.push(String::from_utf8(b).unwrap());
    }
    // Minted under another key, and under an unknown key id.
    let hint = RoutingHint {
        cluster_id: 0,
        loop_addr: loop_addr(),
    };
    let minted = MintTime::from_unix_secs(WALL_T0);
    forged.push(mint(&FleetKey::new(1, OTHER_KEY), &hint, minted, [1; 12]));
    forged.push(mint(&FleetKey::new(9, KEY), &hint, minted, [1; 12]));
    // Plausible-looking ufrags.
    forged.push("A".repeat(55));
    forged.push("short".into());
    forged.push("+/+/".repeat(18));
    for (i, ufrag) in forged.iter().enumerate() {
        let v = t.on_client_datagram(now, client(i as u16), &check_for(ufrag));
        assert_eq!(v, Verdict::Drop(DropReason::BadHint), "{ufrag}");
    }
    assert_eq!(t.flow_count(), 0);
    assert_eq!(drops(&t, DropReason::BadHint), forged.len() as u64);
    assert_eq!(t.poll_timeout(), None, "no timer either: no state at all");
}

#[test]
fn previous_fleet_key_is_still_accepted_during_rotation() {
    let mut c = cfg();
    c.keyring = Keyring::new(FleetKey::new(2, OTHER_KEY)).with_previous(FleetKey::new(1, KEY));
    let mut t = table(c);
    let v = t.on_client_datagram(
        Instant::now(),
        client(1),
        &check_for(&hint_for(0, loop_addr(), 1)),
    );
    assert!(matches!(v, Verdict::Forward { to, .. } if to == loop_addr()));
}

#[test]
fn malformed_stun_and_garbage_create_no_flow() {
    let mut t = table(cfg());
    let now = Instant::now();
    let good = check_for(&hint_for(0, loop_addr(), 1));
    let mut truncated = good.clone();
    truncated.truncate(30);
    let mut response = good.clone();
    response[0..2].copy_from_slice(&0x0101u16.to_be_bytes());
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (truncated, DropReason::BadStun),
        (response, DropReason::BadStun),
        (stun(b"nocolon"), DropReason::BadStun),
        (DTLS.to_vec(), DropReason::UnknownFlow),
        (vec![], DropReason::UnknownFlow),
        (vec![0x90; 200], DropReason::UnknownFlow),
    ];
    for (dg, reason) in cases {
        assert_eq!(
            t.on_client_datagram(now, client(1), &dg),
            Verdict::Drop(reason)
        );
    }
    assert_eq!(t.flow_count(), 0);
}

#[test]
fn hint_of_an_unknown_cluster_is_dropped() {
    let mut t = table(cfg());
    let dg = check_for(&hint_for(99, loop_addr(), 1));
    assert_eq!(
        t.on_client_datagram(Instant::now(), client(1), &dg),
        Verdict::Drop(DropReason::UnknownCluster)
    );
    assert_eq!(t.flow_count(), 0);
}

#[test]
fn tentative_flows_are_capped_per_client_ip() {
    let mut t = table(cfg());
    let now = Instant::now();
    let dg = check_for(&hint_for(0, loop_addr(), 1));
    for port in 0..4 {
        assert!(matches!(
            t.on_client_datagram(now, client(port), &dg),
            Verdict::Forward { .. }
        ));
    }
    assert_eq!(
        t.on_client_datagram(now, client(4), &dg),
        Verdict::Drop(DropReason::TentativeCap)
    );
    // Another IP is not affected.
    let elsewhere = SocketAddr::from(([203, 0, 113, 1], 5000));
    assert!(matches!(
        t.on_client_datagram(now, elsewhere, &dg),
        Verdict::Forward { .. }
    ));
    // A reply establishes one flow, which frees a tentative slot on that IP.
    t.on_internal_datagram(now, loop_addr(), &reply(client(0), b"x"));
    assert!(matches!(
        t.on_client_datagram(now, client(4), &dg),
        Verdict::Forward { .. }
    ));
    assert_eq!(t.tentative_count(), 5);
    assert_eq!(t.flow_count(), 6);
}

#[test]
fn a_table_full_of_established_flows_refuses_new_ones() {
    let mut c = cfg();
    c.max_flows = 8;
    let mut t = table(c);
    let now = Instant::now();
    let dg = check_for(&hint_for(0, loop_addr(), 1));
    for i in 0..8u8 {
        let from = SocketAddr::from(([203, 0, 113, i], 5000));
        assert!(matches!(
            t.on_client_datagram(now, from, &dg),
            Verdict::Forward { .. }
        ));
        t.on_internal_datagram(now, loop_addr(), &reply(from, b"x"));
    }
    let ninth = SocketAddr::from(([203, 0, 113, 99], 5000));
    assert_eq!(
        t.on_client_datagram(now, ninth, &dg),
        Verdict::Drop(DropReason::TableFull)
    );
    assert_eq!(t.flow_count(), 8);
    assert_eq!(t.stats().flows_evicted_tentative, 0);
}

#[test]
fn a_full_table_evicts_its_oldest_tentative_flow_never_an_established_one() {
    let mut c = cfg();
    c.max_flows = 8;
    let mut t = table(c);
    let t0 = Instant::now();
    let dg = check_for(&hint_for(0, loop_addr(), 1));
    let from = |i: u8| SocketAddr::from(([203, 0, 113, i], 5000));
    // Four established, then four tentative created one second apart.
    for i in 0..4 {
        t.on_client_datagram(t0, from(i), &dg);
        t.on_internal_datagram(t0, loop_addr(), &reply(from(i), b"x"));
    }
    for i in 4..8 {
        t.on_client_datagram(t0 + Duration::from_secs(u64::from(i)), from(i), &dg);
    }
    assert_eq!((t.flow_count(), t.tentative_count()), (8, 4));
    let newcomer = SocketAddr::from(([198, 51, 100, 200], 5000));
    let later = t0 + Duration::from_secs(9);
    assert!(matches!(
        t.on_client_datagram(later, newcomer, &dg),
        Verdict::Forward { .. }
    ));
    assert_eq!(
        t.route_of(from(4)),
        None,
        "the oldest tentative flow made room"
    );
    assert!((0..4).all(|i| t.route_of(from(i)) == Some((loop_addr(), true))));
    assert!((5..8).all(|i| t.route_of(from(i)).is_some()));
    assert_eq!(t.stats().flows_evicted_tentative, 1);
    assert_eq!((t.flow_count(), t.tentative_count()), (8, 4));
}

#[test]
fn tentative_flows_are_capped_per_ipv6_64_not_per_address() {
    let mut t = table(cfg());
    let now = Instant::now();
    let dg = check_for(&hint_for(0, loop_addr(), 1));
    // A flood from 1,000 addresses of one /64: only the per-source cap gets flows.
    let flooder = |i: u16| SocketAddr::from(([0x2001, 0xdb8, 0, 0x66, 0, 0, 0, i], 6000 + i));
    let mut forwarded = 0;
    for i in 0..1000 {
        match t.on_client_datagram(now, flooder(i), &dg) {
            Verdict::Forward { .. } => forwarded += 1,
            v => assert_eq!(v, Verdict::Drop(DropReason::TentativeCap)),
        }
    }
    assert_eq!(forwarded, 4);
    assert_eq!(drops(&t, DropReason::TentativeCap), 996);
    // The neighbouring /64, an IPv4 client and an IPv4-mapped one still get flows.
    let neighbour = SocketAddr::from(([0x2001, 0xdb8, 0, 0x67, 0, 0, 0, 1], 7000));
    let v4 = SocketAddr::from(([203, 0, 113, 5], 7000));
    for other in [neighbour, v4] {
        assert!(matches!(
            t.on_client_datagram(now, other, &dg),
            Verdict::Forward { .. }
        ));
    }
    // 203.0.113.5 already has one; as ::ffff:203.0.113.5 it is the same source.
    let mapped: SocketAddr = "[::ffff:203.0.113.5]:7001".parse().unwrap();
    t.on_client_datagram(now, mapped, &dg);
    assert_eq!(
        client_source(mapped.ip()),
        client_source(v4.ip()),
        "mapped IPv4 counts as IPv4"
    );
    // Establishing one flooder flow frees one slot of that /64.
    t.on_internal_datagram(now, loop_addr(), &reply(flooder(0), b"x"));
    assert!(matches!(
        t.on_client_datagram(now, flooder(999), &dg),
        Verdict::Forward { .. }
    ));
}

#[test]
fn a_tentative_flood_from_many_sources_evicts_oldest_first_and_spares_established_flows() {
    let mut c = cfg();
    c.max_flows = 64;
    c.max_tentative = 16;
    c.max_tentative_per_ip = 1;
    let mut t = table(c);
    let t0 = Instant::now();
    let dg = check_for(&hint_for(0, loop_addr(), 1));
    let established: Vec<SocketAddr> = (0..10)
        .map(|i| SocketAddr::from(([198, 51, 100, i], 4000)))
        .collect();
    for &e in &established {
        t.on_client_datagram(t0, e, &dg);
        t.on_internal_datagram(t0, loop_addr(), &reply(e, b"x"));
    }
    // 5,000 flood flows from distinct IPv4 sources, 1 ms apart.
    let flooder = |i: u32| SocketAddr::from((std::net::Ipv4Addr::from(0x0a40_0000 + i), 9));
    for i in 0..5000 {
        let now = t0 + Duration::from_millis(u64::from(i));
        assert!(matches!(
            t.on_client_datagram(now, flooder(i), &dg),
            Verdict::Forward { .. }
        ));
        assert!(t.tentative_count() <= 16);
    }
    assert_eq!(t.stats().flows_evicted_tentative, 5000 - 16);
    // The survivors are the newest 16; every established flow is untouched.
    assert!((5000 - 16..5000).all(|i| t.route_of(flooder(i)).is_some()));
    assert_eq!(t.route_of(flooder(5000 - 17)), None);
    for &e in &established {
        assert_eq!(t.route_of(e), Some((loop_addr(), true)));
    }
    // A legitimate newcomer gets a flow and, answered, is established.
    let later = t0 + Duration::from_secs(6);
    let newcomer = SocketAddr::from(([203, 0, 113, 50], 5000));
    assert!(matches!(
        t.on_client_datagram(later, newcomer, &dg),
        Verdict::Forward { .. }
    ));
    assert!(matches!(
        t.on_internal_datagram(later, loop_addr(), &reply(newcomer, b"y")),
        Verdict::ToClient { .. }
    ));
    assert_eq!(t.route_of(newcomer), Some((loop_addr(), true)));
    assert_eq!(t.flow_count(), 10 + 16 + 1 - 1);
}

#[test]
fn hint_naming_a_loop_outside_the_transceiver_networks_creates_no_flow() {
    let mut t = table(cfg());
    let now = Instant::now();
    for (n, outside) in ["192.0.2.9:40001", "[2001:db8::9]:40001", "11.0.0.5:40001"]
        .iter()
        .enumerate()
    {
        let dg = check_for(&hint_for(OWN_CLUSTER, outside.parse().unwrap(), 1));
        assert_eq!(
            t.on_client_datagram(now, client(n as u16), &dg),
            Verdict::Drop(DropReason::HintDestination),
            "{outside}"
        );
    }
    // Handed over by a peer relay: the same check.
    let dg = framed(
        Direction::ToTransceiver,
        client(9),
        &check_for(&hint_for(
            OWN_CLUSTER,
            "192.0.2.9:40001".parse().unwrap(),
            2,
        )),
    );
    assert_eq!(
        t.on_client_datagram(now, peer_addr(), &dg),
        Verdict::Drop(DropReason::HintDestination)
    );
    assert_eq!(t.flow_count(), 0);
    assert_eq!(drops(&t, DropReason::HintDestination), 4);
}

#[test]
fn hints_open_flows_only_within_their_max_age_and_the_skew_allowance() {
    let day = 86_400;
    let skew = HINT_CLOCK_SKEW.as_secs();
    let mut t = table(cfg());
    let now = Instant::now();
    let cases = [
        (WALL_T0, Ok(())),
        (WALL_T0 - day, Ok(())),
        (WALL_T0 - day - skew + 60, Ok(())),
        (WALL_T0 - day - skew - 60, Err(DropReason::HintExpired)),
        (WALL_T0 - 30 * day, Err(DropReason::HintExpired)),
        (WALL_T0 + skew, Ok(())),
        (WALL_T0 + skew + 60, Err(DropReason::HintFromFuture)),
        (0, Err(DropReason::HintExpired)),
    ];
    for (i, (minted, want)) in cases.into_iter().enumerate() {
        let dg = check_for(&hint_minted(OWN_CLUSTER, loop_addr(), 3, minted));
        let v = t.on_client_datagram(now, client(100 + i as u16), &dg);
        match want {
            Ok(()) => assert!(matches!(v, Verdict::Forward { .. }), "{minted}: {v:?}"),
            Err(reason) => assert_eq!(v, Verdict::Drop(reason), "{minted}"),
        }
        // Keep the per-IP cap out of the way.
        t.on_internal_datagram(now, loop_addr(), &reply(client(100 + i as u16), b"x"));
    }
    assert_eq!(drops(&t, DropReason::HintExpired), 3);
    assert_eq!(drops(&t, DropReason::HintFromFuture), 1);
}

#[test]
fn a_hint_expires_as_the_clock_advances_but_its_flow_lives_on() {
    let mut c = cfg();
    c.hint_max_age = Duration::from_secs(600);
    let mut t = table(c);
    let t0 = Instant::now();
    let check = check_for(&hint_for(OWN_CLUSTER, loop_addr(), 4));
    assert!(matches!(
        t.on_client_datagram(t0, client(1), &check),
        Verdict::Forward { .. }
    ));
    t.on_internal_datagram(t0, loop_addr(), &reply(client(1), b"x"));
    // Consent checks every 5 s for two hours, past the max age: the flow keeps forwarding
    // them (established flows are never re-checked).
    let mut now = t0;
    for _ in 0..(2 * 3600 / 5) {
        now += Duration::from_secs(5);
        t.handle_timeout(now);
        assert!(matches!(
            t.on_client_datagram(now, client(1), &check),
            Verdict::Forward { to, .. } if to == loop_addr()
        ));
        t.on_internal_datagram(now, loop_addr(), &reply(client(1), b"ok"));
    }
    // The same ufrag from a new address (a network change) no longer opens a flow.
    assert_eq!(
        t.on_client_datagram(now, client(2), &check),
        Verdict::Drop(DropReason::HintExpired)
    );
    // The wall clock follows set_wall_clock: stepping it back makes the hint young again.
    t.set_wall_clock(now, Duration::from_secs(WALL_T0 + 60));
    assert!(matches!(
        t.on_client_datagram(now, client(2), &check),
        Verdict::Forward { .. }
    ));
}

#[test]
fn a_max_age_too_large_to_add_means_no_expiry_not_a_panic() {
    let mut c = cfg();
    c.hint_max_age = Duration::MAX;
    let mut t = table(c);
    let dg = check_for(&hint_minted(OWN_CLUSTER, loop_addr(), 9, 0));
    assert!(matches!(
        t.on_client_datagram(Instant::now(), client(1), &dg),
        Verdict::Forward { .. }
    ));
}

#[test]
fn without_a_wall_clock_no_hint_can_be_judged_and_none_opens_a_flow() {
    let mut t = FlowTable::new(cfg());
    let dg = check_for(&hint_for(OWN_CLUSTER, loop_addr(), 5));
    assert_eq!(
        t.on_client_datagram(Instant::now(), client(1), &dg),
        Verdict::Drop(DropReason::HintExpired)
    );
}

#[test]
fn version_1_hints_open_flows_only_when_untimed_hints_are_accepted() {
    let route = RoutingHint {
        cluster_id: OWN_CLUSTER,
        loop_addr: loop_addr(),
    };
    let dg = check_for(&mint_untimed(&FleetKey::new(1, KEY), &route, [6; 12]));
    let now = Instant::now();
    let mut strict = table(cfg());
    assert_eq!(
        strict.on_client_datagram(now, client(1), &dg),
        Verdict::Drop(DropReason::HintUntimed)
    );
    let mut upgrading = table(RoutingConfig {
        accept_untimed_hints: true,
        ..cfg()
    });
    assert!(matches!(
        upgrading.on_client_datagram(now, client(1), &dg),
        Verdict::Forward { .. }
    ));
}

#[test]
fn tentative_flow_expires_after_the_tentative_timeout() {
    let mut t = table(cfg());
    let t0 = Instant::now();
    t.on_client_datagram(t0, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    assert_eq!(t.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    t.handle_timeout(t0 + Duration::from_millis(4999));
    assert_eq!(t.flow_count(), 1);
    t.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!((t.flow_count(), t.tentative_count()), (0, 0));
    assert_eq!(t.stats().flows_expired_tentative, 1);
    assert_eq!(t.poll_timeout(), None);
    // Gone: non-STUN is unknown again, and the IP's tentative slot is free.
    assert_eq!(
        t.on_client_datagram(t0 + Duration::from_secs(6), client(1), DTLS),
        Verdict::Drop(DropReason::UnknownFlow)
    );
}

#[test]
fn client_traffic_does_not_keep_a_tentative_flow_alive() {
    let mut t = table(cfg());
    let t0 = Instant::now();
    t.on_client_datagram(t0, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    for s in 1..5 {
        t.on_client_datagram(t0 + Duration::from_secs(s), client(1), DTLS);
    }
    t.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(t.flow_count(), 0);
}

#[test]
fn established_flow_expires_only_after_idle_timeout_and_traffic_refreshes_it() {
    let mut t = table(cfg());
    let t0 = Instant::now();
    let s = Duration::from_secs;
    t.on_client_datagram(t0, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    t.on_internal_datagram(t0 + s(1), loop_addr(), &reply(client(1), b"ok"));
    assert_eq!(t.route_of(client(1)), Some((loop_addr(), true)));
    // Past the tentative timeout: still there.
    t.handle_timeout(t0 + s(10));
    assert_eq!(t.flow_count(), 1);
    // Client traffic at 20 s, a reply at 40 s: each refreshes.
    t.on_client_datagram(t0 + s(20), client(1), DTLS);
    t.handle_timeout(t0 + s(45));
    assert_eq!(t.flow_count(), 1);
    t.on_internal_datagram(t0 + s(46), loop_addr(), &reply(client(1), b"ok"));
    t.handle_timeout(t0 + s(75));
    assert_eq!(t.flow_count(), 1);
    t.handle_timeout(t0 + s(76));
    assert_eq!(t.flow_count(), 0);
    assert_eq!(t.stats().flows_expired_established, 1);
}

#[test]
fn reply_establishes_the_flow_and_goes_to_the_client_without_header() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    let r = reply(client(1), b"stun-response");
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &r),
        Verdict::ToClient {
            to: client(1),
            payload_at: 8
        }
    );
    assert_eq!(&r[8..], b"stun-response");
    assert_eq!(t.stats().flows_established, 1);
    assert_eq!(t.tentative_count(), 0);
}

#[test]
fn return_path_from_a_non_transceiver_source_is_dropped_as_spoofed() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    for from in ["198.51.100.7:5001", "127.0.0.1:40001", "192.0.2.1:1"] {
        let from: SocketAddr = from.parse().unwrap();
        assert_eq!(
            t.on_internal_datagram(now, from, &reply(client(1), b"evil")),
            Verdict::Drop(DropReason::SpoofedReturn)
        );
    }
    assert_eq!(t.route_of(client(1)), Some((loop_addr(), false)));
}

#[test]
fn return_path_from_another_transceiver_than_the_flows_is_dropped() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    let wrong_port = SocketAddr::from(([10, 0, 0, 5], 40002));
    for from in [loop2_addr(), wrong_port] {
        assert_eq!(
            t.on_internal_datagram(now, from, &reply(client(1), b"x")),
            Verdict::Drop(DropReason::WrongSource)
        );
    }
    assert_eq!(t.route_of(client(1)), Some((loop_addr(), false)));
}

#[test]
fn malformed_or_unknown_replies_are_dropped() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (reply(client(2), b"x"), DropReason::UnknownFlow),
        (
            framed(Direction::ToTransceiver, client(1), b"x"),
            DropReason::BadHeader,
        ),
        (vec![0xD1, 0x04, 0, 0, 1, 2, 3, 4], DropReason::BadHeader),
        (vec![0xD1, 0x01, 0], DropReason::BadHeader),
        (DTLS.to_vec(), DropReason::BadHeader),
    ];
    for (dg, reason) in cases {
        assert_eq!(
            t.on_internal_datagram(now, loop_addr(), &dg),
            Verdict::Drop(reason)
        );
    }
}

#[test]
fn a_tcp_reply_at_a_udp_worker_is_dropped_and_never_reaches_the_udp_client() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    let tcp_reply = tcp_framed(Direction::ToClient, client(1), 7, b"frame");
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &tcp_reply),
        Verdict::Drop(DropReason::WrongTransport)
    );
    assert_eq!(drops(&t, DropReason::WrongTransport), 1);
    // It changed nothing: the flow is still tentative, and a UDP reply still gets through.
    assert_eq!(t.stats().flows_established, 0);
    assert_eq!(t.tentative_count(), 1);
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &reply(client(1), b"ok")),
        Verdict::ToClient {
            to: client(1),
            payload_at: 8
        }
    );
    // Once established, still never: the client is a UDP client.
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &tcp_reply),
        Verdict::Drop(DropReason::WrongTransport)
    );
    assert_eq!(drops(&t, DropReason::WrongTransport), 2);
}

#[test]
fn unknown_non_stun_asks_for_a_lookup_only_when_a_cache_is_configured() {
    let now = Instant::now();
    let mut without = table(cfg());
    assert_eq!(
        without.on_client_datagram(now, client(1), DTLS),
        Verdict::Drop(DropReason::UnknownFlow)
    );
    let mut with = table(with_cache());
    assert_eq!(
        with.on_client_datagram(now, client(1), DTLS),
        Verdict::Lookup(client(1))
    );
    // STUN never triggers a lookup: it carries its own route (or none).
    assert_eq!(
        with.on_client_datagram(now, client(2), &stun(b"bogus:x")),
        Verdict::Drop(DropReason::BadHint)
    );
    assert_eq!(with.flow_count(), 0);
}

#[test]
fn lookups_are_deduplicated_negatively_cached_and_rate_limited() {
    let mut t = table(with_cache());
    let t0 = Instant::now();
    assert_eq!(
        t.on_client_datagram(t0, client(1), DTLS),
        Verdict::Lookup(client(1))
    );
    assert_eq!(
        t.on_client_datagram(t0, client(1), DTLS),
        Verdict::Drop(DropReason::LookupPending)
    );
    t.on_lookup_miss(t0, client(1));
    assert_eq!(
        t.on_client_datagram(t0 + Duration::from_secs(1), client(1), DTLS),
        Verdict::Drop(DropReason::UnknownFlow)
    );
    t.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(
        t.on_client_datagram(t0 + Duration::from_secs(5), client(1), DTLS),
        Verdict::Lookup(client(1))
    );
    // Rate: 10 per second, burst 10. Two used so far (at t0 and t0 + 5 s, refilled between).
    let t1 = t0 + Duration::from_secs(5);
    let mut started = 0;
    for n in 2..40 {
        if t.on_client_datagram(t1, client(n), DTLS) == Verdict::Lookup(client(n)) {
            started += 1;
        }
    }
    assert_eq!(started, 9);
    assert!(drops(&t, DropReason::LookupLimited) > 0);
    // A second later the bucket is full again.
    let t2 = t1 + Duration::from_secs(1);
    assert_eq!(
        t.on_client_datagram(t2, client(100), DTLS),
        Verdict::Lookup(client(100))
    );
}

#[test]
fn unanswered_lookup_may_be_retried_after_the_lookup_timeout() {
    let mut t = table(with_cache());
    let t0 = Instant::now();
    assert_eq!(
        t.on_client_datagram(t0, client(1), DTLS),
        Verdict::Lookup(client(1))
    );
    t.handle_timeout(t0 + LOOKUP_TIMEOUT);
    assert_eq!(
        t.on_client_datagram(t0 + LOOKUP_TIMEOUT, client(1), DTLS),
        Verdict::Lookup(client(1))
    );
}

#[test]
fn installed_route_restores_the_flow_without_stun() {
    let mut t = table(with_cache());
    let now = Instant::now();
    assert_eq!(
        t.on_client_datagram(now, client(1), DTLS),
        Verdict::Lookup(client(1))
    );
    t.install_route(now, client(1), loop_addr());
    assert_eq!(
        t.on_client_datagram(now, client(1), DTLS),
        Verdict::Forward {
            to: loop_addr(),
            header: to_transceiver(client(1))
        }
    );
    assert_eq!(t.stats().routes_installed, 1);
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &reply(client(1), b"srtp")),
        Verdict::ToClient {
            to: client(1),
            payload_at: 8
        }
    );
}

#[test]
fn installed_route_to_an_unlisted_address_is_refused() {
    let mut t = table(with_cache());
    let now = Instant::now();
    t.install_route(now, client(1), "8.8.8.8:53".parse().unwrap());
    t.install_route(now, client(2), "192.0.2.77:9999".parse().unwrap());
    assert_eq!(t.flow_count(), 0);
    assert_eq!(t.stats().routes_rejected, 2);
    // The peer ingress itself is fine.
    t.install_route(now, client(3), peer_addr());
    assert_eq!(t.route_of(client(3)), Some((peer_addr(), false)));
}

#[test]
fn established_flow_queues_its_route_once_and_again_after_the_refresh_period() {
    let mut t = table(with_cache());
    let t0 = Instant::now();
    t.on_client_datagram(t0, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    assert_eq!(
        t.drain_route_writes().count(),
        0,
        "tentative flows are not cached"
    );
    t.on_internal_datagram(t0, loop_addr(), &reply(client(1), b"ok"));
    let writes: Vec<_> = t.drain_route_writes().collect();
    assert_eq!(
        writes,
        vec![RouteWrite {
            client: client(1),
            to: loop_addr()
        }]
    );
    t.on_client_datagram(t0 + Duration::from_secs(10), client(1), DTLS);
    assert_eq!(t.drain_route_writes().count(), 0);
    t.on_client_datagram(t0 + Duration::from_secs(29), client(1), DTLS);
    t.on_client_datagram(t0 + Duration::from_secs(58), client(1), DTLS);
    t.on_client_datagram(t0 + Duration::from_secs(61), client(1), DTLS);
    assert_eq!(t.drain_route_writes().count(), 1);
}

#[test]
fn no_route_writes_without_a_cache() {
    let mut t = table(cfg());
    let now = Instant::now();
    t.on_client_datagram(now, client(1), &check_for(&hint_for(0, loop_addr(), 1)));
    t.on_internal_datagram(now, loop_addr(), &reply(client(1), b"ok"));
    assert_eq!(t.drain_route_writes().count(), 0);
}

#[test]
fn hint_of_a_peer_cluster_is_forwarded_to_that_clusters_relay() {
    let mut t = table(cfg());
    let now = Instant::now();
    let dg = check_for(&hint_for(
        PEER_CLUSTER,
        "10.9.0.1:40000".parse().unwrap(),
        1,
    ));
    assert_eq!(
        t.on_client_datagram(now, client(1), &dg),
        Verdict::Forward {
            to: peer_addr(),
            header: to_transceiver(client(1))
        }
    );
    // The peer relay answers from its internal socket: same IP, another port.
    let peer_internal = SocketAddr::from(([192, 0, 2, 77], 3578));
    assert_eq!(
        t.on_internal_datagram(now, peer_internal, &reply(client(1), b"ok")),
        Verdict::ToClient {
            to: client(1),
            payload_at: 8
        }
    );
}

#[test]
fn relay_framed_datagram_from_a_non_peer_is_dropped() {
    let mut t = table(cfg());
    let now = Instant::now();
    let inner = check_for(&hint_for(0, loop_addr(), 1));
    let dg = framed(Direction::ToTransceiver, client(1), &inner);
    for from in ["203.0.113.5:3478", "10.0.0.5:40001"] {
        assert_eq!(
            t.on_client_datagram(now, from.parse().unwrap(), &dg),
            Verdict::Drop(DropReason::NotPeer)
        );
    }
    assert_eq!(t.flow_count(), 0);
}

#[test]
fn flow_handed_over_by_a_peer_relay_goes_back_through_that_peer() {
    let mut t = table(cfg());
    let now = Instant::now();
    let peer_internal = SocketAddr::from(([192, 0, 2, 77], 3579));
    let inner = check_for(&hint_for(0, loop_addr(), 1));
    let dg = framed(Direction::ToTransceiver, client(1), &inner);
    assert_eq!(
        t.on_client_datagram(now, peer_internal, &dg),
        Verdict::Forward {
            to: loop_addr(),
            header: None
        }
    );
    // Later datagrams of the flow, still framed by the peer.
    let later = framed(Direction::ToTransceiver, client(1), DTLS);
    assert_eq!(
        t.on_client_datagram(now, peer_internal, &later),
        Verdict::Forward {
            to: loop_addr(),
            header: None
        }
    );
    assert_eq!(
        t.on_internal_datagram(now, loop_addr(), &reply(client(1), b"ok")),
        Verdict::Forward {
            to: peer_internal,
            header: None
        }
    );
    // A flow of a client's TCP connection held by the peer: the TCP reply goes back to the
    // peer with its header untouched, not dropped as a wrong transport.
    let tcp_check = tcp_framed(Direction::ToTransceiver, client(4), 7, &inner);
    assert!(matches!(
        t.on_client_datagram(now, peer_internal, &tcp_check),
        Verdict::Forward { header: None, .. }
    ));
    assert_eq!(
        t.on_internal_datagram(
            now,
            loop_addr(),
            &tcp_framed(Direction::ToClient, client(4), 7, b"ok")
        ),
        Verdict::Forward {
            to: peer_internal,
            header: None
        }
    );
    assert_eq!(drops(&t, DropReason::WrongTransport), 0);
    // A peer may only hand over flows of our cluster (no bouncing between tiers).
    let elsewhere = check_for(&hint_for(PEER_CLUSTER, loop_addr(), 2));
    let dg = framed(Direction::ToTransceiver, client(2), &elsewhere);
    assert_eq!(
        t.on_client_datagram(now, peer_internal, &dg),
        Verdict::Drop(DropReason::UnknownCluster)
    );
    // Malformed or wrong-way framing from a peer.
    let wrong_way = framed(Direction::ToClient, client(3), &inner);
    assert_eq!(
        t.on_client_datagram(now, peer_internal, &wrong_way),
        Verdict::Drop(DropReason::BadHeader)
    );
}

#[test]
fn drop_reason_labels_are_distinct_snake_case() {
    let labels: HashSet<_> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(labels.len(), DropReason::COUNT);
    for (i, r) in DropReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
        assert!(r
            .as_str()
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_'));
    }
}

// ---- properties ----

fn any_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::from((ip, p))),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::from((ip, p))),
        // Sources the config treats specially: transceiver net, the loops, the peer IP.
        (0u8..4, any::<u16>()).prop_map(|(h, p)| SocketAddr::from(([10, 0, 0, h], p))),
        Just(loop_addr()),
        Just(peer_addr()),
        any::<u16>().prop_map(|p| SocketAddr::from(([192, 0, 2, 77], p))),
    ]
}

/// Datagrams an attacker can make without the fleet key.
fn hostile_datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        "[A-Za-z0-9+/]{0,80}".prop_map(|u| check_for(&u)),
        proptest::collection::vec(any::<u8>(), 0..120).prop_map(|u| stun(&u)),
        (any_addr(), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(|(c, p)| reply(c, &p)),
        (any_addr(), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(|(c, p)| framed(
            Direction::ToTransceiver,
            c,
            &p
        )),
        (any_addr(), "[A-Za-z0-9+/]{50,60}").prop_map(|(c, u)| framed(
            Direction::ToTransceiver,
            c,
            &check_for(&u)
        )),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Client(SocketAddr, Vec<u8>),
    Internal(SocketAddr, Vec<u8>),
    /// A real client check, naming one of the fixed destinations.
    ValidCheck(SocketAddr, usize),
    Advance(u64),
}

fn destinations() -> [(u32, SocketAddr); 4] {
    [
        (OWN_CLUSTER, loop_addr()),
        (OWN_CLUSTER, loop2_addr()),
        (PEER_CLUSTER, "10.9.0.1:40000".parse().unwrap()),
        (99, "10.0.0.9:40009".parse().unwrap()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any_addr(), hostile_datagram()).prop_map(|(a, d)| Op::Client(a, d)),
        4 => (any_addr(), hostile_datagram()).prop_map(|(a, d)| Op::Internal(a, d)),
        2 => (any_addr(), 0..destinations().len()).prop_map(|(a, i)| Op::ValidCheck(a, i)),
        1 => (0u64..40_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn hostile_datagrams_never_panic_and_create_no_state(
        ops in proptest::collection::vec((any::<bool>(), any_addr(), hostile_datagram()), 1..64),
        cache in any::<bool>(),
    ) {
        let mut t = table(if cache { with_cache() } else { cfg() });
        let now = Instant::now();
        for (public, from, dg) in &ops {
            let v = if *public {
                t.on_client_datagram(now, *from, dg)
            } else {
                t.on_internal_datagram(now, *from, dg)
            };
            prop_assert!(
                matches!(v, Verdict::Drop(_) | Verdict::Lookup(_)),
                "hostile input got {v:?}"
            );
        }
        prop_assert_eq!(t.flow_count(), 0);
    }

    #[test]
    fn forwards_only_to_hinted_or_configured_addresses_and_replies_only_to_known_clients(
        ops in proptest::collection::vec(op(), 1..128),
    ) {
        let mut c = with_cache();
        c.max_tentative_per_ip = 3;
        c.max_flows = 16;
        let max_flows = c.max_flows;
        let mut t = table(c);
        let mut now = Instant::now();
        let dests = destinations();
        let hints: Vec<Vec<u8>> = dests
            .iter()
            .enumerate()
            .map(|(i, (cl, a))| check_for(&hint_for(*cl, *a, i as u8)))
            .collect();
        // Addresses a valid hint or the configuration names.
        let allowed: HashSet<SocketAddr> =
            [loop_addr(), loop2_addr(), peer_addr()].into_iter().collect();
        let mut hinted_clients: HashSet<SocketAddr> = HashSet::new();
        for op in ops {
            let (v, public, from) = match op {
                Op::Client(from, dg) => (t.on_client_datagram(now, from, &dg), true, from),
                Op::Internal(from, dg) => (t.on_internal_datagram(now, from, &dg), false, from),
                Op::ValidCheck(from, i) => {
                    let v = t.on_client_datagram(now, from, &hints[i]);
                    if matches!(v, Verdict::Forward { .. }) {
                        hinted_clients.insert(from);
                    }
                    (v, true, from)
                }
                Op::Advance(ms) => {
                    now += Duration::from_millis(ms);
                    t.handle_timeout(now);
                    continue;
                }
            };
            match v {
                Verdict::Forward { to, header } => {
                    // Downstream hops are peer relays, recognised by IP.
                    let peer_hop = to.ip() == peer_addr().ip();
                    prop_assert!(allowed.contains(&to) || peer_hop, "forward to {to}");
                    if public {
                        if let Some(h) = header {
                            prop_assert_eq!(h.client, from);
                            prop_assert!(hinted_clients.contains(&from), "flow of {from} never hinted");
                        } else {
                            prop_assert_eq!(from.ip(), peer_addr().ip());
                        }
                    } else {
                        prop_assert!(header.is_none());
                        prop_assert!(peer_hop);
                    }
                }
                Verdict::ToClient { to, .. } => {
                    prop_assert!(!public);
                    prop_assert!(hinted_clients.contains(&to), "reply to unknown {to}");
                }
                Verdict::Drop(_) | Verdict::Lookup(_) => {}
            }
            prop_assert!(t.flow_count() <= max_flows);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Model check of the caps: whatever mix of new clients (few IPv4 sources, few IPv6 /64s
    /// with many addresses), replies and time, the tentative caps hold and an established
    /// flow disappears only by idling out.
    #[test]
    fn caps_hold_and_established_flows_are_never_evicted(
        ops in proptest::collection::vec(
            prop_oneof![
                6 => (any::<bool>(), 0u8..6, any::<u16>()).prop_map(|(v6, net, host)| (0u8, v6, net, host)),
                3 => (Just(1u8), any::<bool>(), 0u8..6, any::<u16>()),
                1 => (Just(2u8), Just(false), 0u8..1, 0u16..3000),
            ],
            1..250,
        ),
        max_tentative in 1usize..12,
    ) {
        let mut c = cfg();
        c.max_flows = 24;
        c.max_tentative = max_tentative;
        c.max_tentative_per_ip = 3;
        let idle = c.idle_timeout;
        let mut t = table(c);
        let dg = check_for(&hint_for(OWN_CLUSTER, loop_addr(), 7));
        let mut now = Instant::now();
        let addr = |v6: bool, net: u8, host: u16| -> SocketAddr {
            if v6 {
                SocketAddr::from(([0x2001, 0xdb8, 0, u16::from(net), host, 0, 0, 1], 5000))
            } else {
                SocketAddr::from(([198, 51, 100, net], host))
            }
        };
        let mut clients: Vec<SocketAddr> = Vec::new();
        // Established flows and when they last saw traffic.
        let mut established: std::collections::HashMap<SocketAddr, Instant> = Default::default();
        for (kind, v6, net, host) in ops {
            match kind {
                0 => {
                    let from = addr(v6, net, host);
                    let known = t.route_of(from).is_some();
                    t.on_client_datagram(now, from, &dg);
                    if known {
                        if let Some(at) = established.get_mut(&from) { *at = now; }
                    } else {
                        clients.push(from);
                    }
                }
                1 if !clients.is_empty() => {
                    let c = clients[usize::from(host) % clients.len()];
                    if matches!(
                        t.on_internal_datagram(now, loop_addr(), &reply(c, b"r")),
                        Verdict::ToClient { .. }
                    ) {
                        established.insert(c, now);
                    }
                }
                _ => {
                    now += Duration::from_millis(u64::from(host) * 20);
                    t.handle_timeout(now);
                }
            }
            prop_assert!(t.tentative_count() <= max_tentative);
            prop_assert!(t.flow_count() <= 24);
            let mut per_source: std::collections::HashMap<IpAddr, u32> = Default::default();
            let unique: HashSet<SocketAddr> = clients.iter().copied().collect();
            for c in &unique {
                if let Some((_, false)) = t.route_of(*c) {
                    *per_source.entry(client_source(c.ip())).or_default() += 1;
                }
            }
            prop_assert!(per_source.values().all(|&n| n <= 3), "{per_source:?}");
            for (c, last) in &established {
                if *last + idle > now {
                    prop_assert_eq!(t.route_of(*c), Some((loop_addr(), true)), "{} lost", c);
                }
            }
        }
    }

    /// A hint opens a flow iff its mint minute lies within [wall - max_age - skew,
    /// wall + skew], whatever the wall clock and the mint time.
    #[test]
    fn hint_age_window_is_exact(
        wall in 1_000_000u64..4_000_000_000,
        offset in -200_000i64..2_000,
        max_age in 1u64..100_000,
    ) {
        let mut c = cfg();
        c.hint_max_age = Duration::from_secs(max_age);
        let mut t = FlowTable::new(c);
        let now = Instant::now();
        t.set_wall_clock(now, Duration::from_secs(wall));
        let minted = wall.saturating_add_signed(offset);
        let minute = minted / 60 * 60;
        let dg = check_for(&hint_minted(OWN_CLUSTER, loop_addr(), 8, minted));
        let v = t.on_client_datagram(now, client(1), &dg);
        let skew = HINT_CLOCK_SKEW.as_secs();
        let want = if minute > wall + skew {
            Some(DropReason::HintFromFuture)
        } else if wall.saturating_sub(minute) > max_age + skew {
            Some(DropReason::HintExpired)
        } else {
            None
        };
        match want {
            Some(reason) => prop_assert_eq!(v, Verdict::Drop(reason)),
            None => prop_assert!(matches!(v, Verdict::Forward { .. }), "{:?}", v),
        }
    }
}
