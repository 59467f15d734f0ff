use super::*;
use std::time::SystemTime;
use voxgate_proto::{mint, FleetKey, Keyring, MintTime, RoutingHint};

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn cfg() -> RoutingConfig {
    let key = FleetKey::from_hex(1, KEY).unwrap();
    RoutingConfig {
        keyring: Keyring::new(key),
        cluster_id: 0,
        peers: vec![(9, "10.9.0.1:3478".parse().unwrap())],
        transceivers: vec!["127.0.0.0/8".parse().unwrap()],
        max_tentative_per_ip: 16,
        max_flows: 100,
        max_tentative: 25,
        hint_max_age: Duration::from_secs(3600),
        accept_untimed_hints: false,
        tentative_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        lookups: false,
        lookup_rate: 0,
        lookup_negative_ttl: Duration::from_secs(5),
        route_refresh: Duration::from_secs(60),
    }
}

const T: Timeouts = Timeouts {
    first_frame: Duration::from_secs(5),
    tentative: Duration::from_secs(5),
    idle: Duration::from_secs(30),
};

fn clock(now: Instant) -> WallClock {
    let mut c = WallClock::default();
    c.set_from(now, SystemTime::now());
    c
}

fn check(cluster_id: u32, loop_addr: SocketAddr, at: SystemTime) -> Vec<u8> {
    let key = FleetKey::from_hex(1, KEY).unwrap();
    let route = RoutingHint {
        cluster_id,
        loop_addr,
    };
    let ufrag = mint(&key, &route, MintTime::from_system_time(at), [7; 12]);
    // Binding request: header, USERNAME "ufrag:cli".
    let username = format!("{ufrag}:cli");
    let mut m = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
    m.extend_from_slice(&[1; 12]);
    m.extend_from_slice(&0x0006u16.to_be_bytes());
    m.extend_from_slice(&(username.len() as u16).to_be_bytes());
    m.extend_from_slice(username.as_bytes());
    m.resize(m.len().next_multiple_of(4), 0);
    let len = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

fn client() -> SocketAddr {
    "192.0.2.7:50000".parse().unwrap()
}

fn loop_addr() -> SocketAddr {
    "127.0.0.5:40000".parse().unwrap()
}

#[test]
fn a_valid_first_frame_opens_forwarding_with_a_tcp_header() {
    let now = Instant::now();
    let mut c = Connection::new(now, 42, client());
    let v = c.on_frame(
        now,
        &check(0, loop_addr(), SystemTime::now()),
        &cfg(),
        &clock(now),
    );
    let header = RelayHeader {
        direction: Direction::ToTransceiver,
        client: client(),
        transport: Transport::Tcp { conn: 42 },
    };
    assert_eq!(
        v,
        FrameVerdict::Forward {
            to: loop_addr(),
            header
        }
    );
    assert!(c.is_forwarding());
    // Later frames go the same way, whatever they hold.
    let v = c.on_frame(now, &[0x16, 0xfe, 0xfd], &cfg(), &clock(now));
    assert_eq!(
        v,
        FrameVerdict::Forward {
            to: loop_addr(),
            header
        }
    );
}

#[test]
fn bad_first_frames_are_rejected_and_leave_the_connection_waiting() {
    let now = Instant::now();
    let cfg = cfg();
    let clock = clock(now);
    let hour_ago = SystemTime::now() - Duration::from_secs(3600 + 600);
    let cases: [(Vec<u8>, DropReason); 5] = [
        (b"GET / HTTP/1.1\r\n".to_vec(), DropReason::BadStun),
        (vec![0x16, 0xfe, 0xfd, 0, 0], DropReason::BadStun),
        (
            check(0, "10.0.0.1:4000".parse().unwrap(), SystemTime::now()),
            DropReason::HintDestination,
        ),
        (check(0, loop_addr(), hour_ago), DropReason::HintExpired),
        (
            check(5, loop_addr(), SystemTime::now()),
            DropReason::UnknownCluster,
        ),
    ];
    for (frame, reason) in cases {
        let mut c = Connection::new(now, 1, client());
        assert_eq!(
            c.on_frame(now, &frame, &cfg, &clock),
            FrameVerdict::Reject(reason)
        );
        assert!(!c.is_forwarding());
    }
    let mut forged = check(0, loop_addr(), SystemTime::now());
    forged[30] ^= 0x01; // inside the ufrag
    let mut c = Connection::new(now, 1, client());
    assert!(matches!(
        c.on_frame(now, &forged, &cfg, &clock),
        FrameVerdict::Reject(_)
    ));
}

#[test]
fn a_hint_of_a_peer_cluster_goes_to_the_peer_relay_and_its_replies_come_from_its_ip() {
    let now = Instant::now();
    let mut c = Connection::new(now, 3, client());
    let v = c.on_frame(
        now,
        &check(9, loop_addr(), SystemTime::now()),
        &cfg(),
        &clock(now),
    );
    let peer: SocketAddr = "10.9.0.1:3478".parse().unwrap();
    assert!(matches!(v, FrameVerdict::Forward { to, .. } if to == peer));
    let reply = RelayHeader {
        direction: Direction::ToClient,
        client: client(),
        transport: Transport::Tcp { conn: 3 },
    };
    assert_eq!(
        c.on_reply(now, "10.9.0.1:3579".parse().unwrap(), &reply),
        Ok(())
    );
    assert_eq!(
        c.on_reply(now, "10.9.0.2:3579".parse().unwrap(), &reply),
        Err(DropReason::WrongSource)
    );
}

#[test]
fn replies_only_from_the_next_hop_and_only_for_this_client() {
    let now = Instant::now();
    let mut c = Connection::new(now, 8, client());
    let reply = RelayHeader {
        direction: Direction::ToClient,
        client: client(),
        transport: Transport::Tcp { conn: 8 },
    };
    assert_eq!(
        c.on_reply(now, loop_addr(), &reply),
        Err(DropReason::WrongSource),
        "before forwarding"
    );
    c.on_frame(
        now,
        &check(0, loop_addr(), SystemTime::now()),
        &cfg(),
        &clock(now),
    );
    assert_eq!(c.on_reply(now, loop_addr(), &reply), Ok(()));
    assert_eq!(
        c.on_reply(now, "127.0.0.5:40001".parse().unwrap(), &reply),
        Err(DropReason::WrongSource)
    );
    let other = RelayHeader {
        client: "192.0.2.7:50001".parse().unwrap(),
        ..reply
    };
    assert_eq!(
        c.on_reply(now, loop_addr(), &other),
        Err(DropReason::BadHeader)
    );
}

#[test]
fn the_first_frame_timer_runs_from_the_accept_and_is_not_extended() {
    let t0 = Instant::now();
    let c = Connection::new(t0, 1, client());
    assert_eq!(c.timed_out(t0 + Duration::from_millis(4999), &T), None);
    assert_eq!(
        c.timed_out(t0 + T.first_frame, &T),
        Some(CloseReason::FirstFrameTimeout)
    );
    assert_eq!(c.deadline(&T), t0 + T.first_frame);
}

/// A connection accepted at `t0` whose valid first frame came a second later.
fn forwarded_a_second_after(t0: Instant) -> Connection {
    let mut c = Connection::new(t0, 1, client());
    c.on_frame(
        t0 + Duration::from_secs(1),
        &check(0, loop_addr(), SystemTime::now()),
        &cfg(),
        &clock(t0),
    );
    c
}

#[test]
fn a_forwarded_connection_is_tentative_until_its_first_reply_and_closes_without_one() {
    let t0 = Instant::now();
    let mut c = forwarded_a_second_after(t0);
    assert!(c.is_forwarding());
    assert!(!c.is_established(), "nothing answered yet");
    // Past the first-frame deadline: no longer relevant; the tentative one runs from the first
    // frame, and the client's own frames do not extend it.
    c.on_frame(t0 + Duration::from_secs(3), b"x", &cfg(), &clock(t0));
    assert_eq!(c.timed_out(t0 + Duration::from_millis(5999), &T), None);
    assert_eq!(c.deadline(&T), t0 + Duration::from_secs(6));
    assert_eq!(
        c.timed_out(t0 + Duration::from_secs(6), &T),
        Some(CloseReason::TentativeTimeout)
    );
}

#[test]
fn once_established_only_the_next_hops_replies_keep_the_connection_alive() {
    let t0 = Instant::now();
    let mut c = forwarded_a_second_after(t0);
    let reply = RelayHeader {
        direction: Direction::ToClient,
        client: client(),
        transport: Transport::Tcp { conn: 1 },
    };
    c.on_reply(t0 + Duration::from_secs(2), loop_addr(), &reply)
        .unwrap();
    assert!(c.is_established());
    assert_eq!(c.timed_out(t0 + Duration::from_secs(10), &T), None);
    c.on_reply(t0 + Duration::from_secs(20), loop_addr(), &reply)
        .unwrap();
    assert_eq!(c.timed_out(t0 + Duration::from_secs(49), &T), None);
    assert_eq!(
        c.timed_out(t0 + Duration::from_secs(50), &T),
        Some(CloseReason::IdleTimeout)
    );
    // Junk from the client (anyone can send a frame) keeps nothing.
    c.on_frame(t0 + Duration::from_secs(45), b"x", &cfg(), &clock(t0));
    assert_eq!(
        c.timed_out(t0 + Duration::from_secs(50), &T),
        Some(CloseReason::IdleTimeout)
    );
}
