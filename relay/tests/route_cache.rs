//! The Redis route cache with real processes: a real `redis-server`, a real relay killed
//! with SIGKILL and restarted, Redis killed under a running relay.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::*;
use voxgate_proto::Direction;

/// Runs a check from `client` through the relay to the loop and back; returns the worker
/// (internal address) that forwarded it.
fn establish(relay: &RelayProcess, lp: &FakeLoop, client: &UdpSocket) -> SocketAddr {
    let me = client.local_addr().unwrap();
    client
        .send_to(&binding_request(&hint(0, lp.addr())), relay.public)
        .unwrap();
    let got = lp.recv().expect("check reaches the loop");
    assert_eq!(got.header.client, me);
    lp.reply(got.from, me, b"binding success");
    let (from, bytes) = recv(client).expect("reply reaches the client");
    assert_eq!(
        (from, bytes.as_slice()),
        (relay.public, &b"binding success"[..])
    );
    got.from
}

/// One media round trip on an existing flow.
fn round_trip(relay: &RelayProcess, lp: &FakeLoop, client: &UdpSocket, n: u8) {
    let me = client.local_addr().unwrap();
    client.send_to(&dtls_like(n), relay.public).unwrap();
    let got = lp.recv().expect("media reaches the loop");
    assert_eq!(got.header.client, me);
    assert_eq!(got.payload, dtls_like(n));
    lp.reply(got.from, me, &[0x90, n]);
    let (from, bytes) = recv(client).expect("media reply reaches the client");
    assert_eq!((from, bytes), (relay.public, vec![0x90, n]));
}

#[test]
fn restarted_relay_restores_a_flow_from_redis_without_waiting_for_stun() {
    let redis = Redis::start();
    let workers = 2;
    let ports = RelayPorts::new(workers);
    let url = redis.url();
    let args = ["--redis", url.as_str(), "--route-ttl-secs", "120"];
    let mut relay = RelayProcess::start(&ports, workers, &args);
    let lp = FakeLoop::new();
    let client = udp(1000);
    let me = client.local_addr().unwrap();

    establish(&relay, &lp, &client);
    let key = format!("voxgate:route:{me}");
    let stored = eventually(Duration::from_secs(5), || redis.get(&key).is_some());
    assert!(
        stored,
        "route not written to redis; log:\n{}",
        relay.log_text()
    );
    assert_eq!(redis.get(&key), Some(lp.addr().to_string()));
    let ttl = redis.ttl(&key);
    assert!((1..=120).contains(&ttl), "ttl {ttl}");

    // Crash the relay: its flow table is gone. Start a fresh one on the same ports.
    relay.kill();
    let relay = RelayProcess::start(&ports, workers, &args);

    // The client keeps sending media (no STUN) every 5 ms, as a browser mid-call would.
    let started = Instant::now();
    let mut sent = 0u32;
    let got = loop {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "media never resumed; log:\n{}",
            relay.log_text()
        );
        client.send_to(&dtls_like(7), relay.public).unwrap();
        sent += 1;
        lp.sock
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        if let Some(got) = lp.recv() {
            break got;
        }
    };
    let gap = started.elapsed();
    println!("media resumed {gap:?} after the restarted relay came up ({sent} datagrams sent, the first ones dropped while the lookup ran)");
    assert_eq!(got.header.direction, Direction::ToTransceiver);
    assert_eq!(got.header.client, me);
    assert_eq!(got.payload, dtls_like(7));
    lp.sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // Drain duplicates sent while the lookup ran, then check the flow works both ways.
    while lp.recv().is_some() {}
    lp.reply(got.from, me, b"welcome back");
    let (from, bytes) = recv(&client).expect("reply after restore");
    assert_eq!(
        (from, bytes.as_slice()),
        (relay.public, &b"welcome back"[..])
    );
    round_trip(&relay, &lp, &client, 8);

    assert!(relay.metric("voxgate_relay_redis_lookups_total", &[("result", "hit")]) >= 1.0);
    let installed = relay.wait_metric(
        "voxgate_relay_routes_installed_total",
        &[],
        Duration::from_secs(2),
        |v| v >= 1.0,
    );
    assert_eq!(installed, 1.0);
    assert_eq!(relay.metric("voxgate_relay_flows_created_total", &[]), 1.0);
}

#[test]
fn unknown_client_with_no_cached_route_is_dropped_after_one_lookup() {
    let redis = Redis::start();
    let ports = RelayPorts::new(1);
    let url = redis.url();
    let relay = RelayProcess::start(&ports, 1, &["--redis", url.as_str()]);
    let lp = FakeLoop::new();
    let stranger = udp(100);
    for n in 0..50 {
        stranger.send_to(&dtls_like(n), relay.public).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(lp.recv().is_none(), "an unknown client was forwarded");
    assert!(recv(&stranger).is_none(), "the relay answered");
    let misses = relay.wait_metric(
        "voxgate_relay_redis_lookups_total",
        &[("result", "miss")],
        Duration::from_secs(2),
        |v| v >= 1.0,
    );
    assert_eq!(misses, 1.0, "deduplicated and negatively cached");
    let lookups = relay.metric("voxgate_relay_route_lookups_total", &[]);
    assert_eq!(lookups, 1.0);
    let drops = relay.metric("voxgate_relay_drops_total", &[]);
    assert_eq!(drops, 50.0);
}

#[test]
fn redis_dying_mid_run_does_not_stop_forwarding_and_errors_are_counted() {
    let mut redis = Redis::start();
    let workers = 2;
    let ports = RelayPorts::new(workers);
    let url = redis.url();
    let relay = RelayProcess::start(&ports, workers, &["--redis", url.as_str()]);
    let lp = FakeLoop::new();
    let a = udp(1000);
    establish(&relay, &lp, &a);
    let key = format!("voxgate:route:{}", a.local_addr().unwrap());
    assert!(eventually(Duration::from_secs(5), || redis
        .get(&key)
        .is_some()));
    assert_eq!(relay.metric("voxgate_relay_redis_connected", &[]), 1.0);

    redis.kill();

    // The existing flow keeps forwarding both ways.
    for n in 0..50 {
        round_trip(&relay, &lp, &a, n);
    }
    // A new flow still works from its STUN check (its route write fails).
    let b = udp(1000);
    establish(&relay, &lp, &b);
    round_trip(&relay, &lp, &b, 1);
    // An unknown client's lookup fails too; it is dropped, never answered.
    let stranger = udp(100);
    stranger.send_to(&dtls_like(1), relay.public).unwrap();
    assert!(recv(&stranger).is_none());

    let errors = relay.wait_metric(
        "voxgate_relay_redis_errors_total",
        &[],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    assert!(errors >= 1.0, "redis errors not counted");
    assert_eq!(relay.metric("voxgate_relay_redis_connected", &[]), 0.0);
    // And forwarding is as alive as ever.
    for n in 50..60 {
        round_trip(&relay, &lp, &a, n);
        round_trip(&relay, &lp, &b, n);
    }
    let log = relay.log_text();
    assert!(log.contains("without the route cache"), "{log}");
}
