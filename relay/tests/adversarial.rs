//! A real relay under hostile traffic: forged hints, garbage, spoofed replies, tentative
//! floods. Nothing may be forwarded anywhere a valid hint does not name, nothing may be
//! answered, state stays under its caps, and every datagram is accounted for by reason.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::*;
use rand::seq::SliceRandom;
use rand::Rng;
use voxgate_proto::{Direction, FleetKey};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    ForgedWrongKey,
    ForgedRandom,
    UnknownCluster,
    BadStun,
    Garbage,
    FramedFromNonPeer,
    SpoofedReturn,
}

impl Kind {
    /// How many of each, and the drop reason each must be counted under.
    const PLAN: [(Kind, usize, &'static str); 7] = [
        (Kind::ForgedWrongKey, 20_000, "bad_hint"),
        (Kind::ForgedRandom, 20_000, "bad_hint"),
        (Kind::UnknownCluster, 5_000, "unknown_cluster"),
        (Kind::BadStun, 5_000, "bad_stun"),
        (Kind::Garbage, 30_000, "unknown_flow"),
        (Kind::FramedFromNonPeer, 5_000, "not_peer"),
        (Kind::SpoofedReturn, 15_000, "spoofed_return"),
    ];
}

const ICE_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const TENTATIVE_CLIENTS: usize = 64;
const CAP_PER_IP: usize = 16;

#[test]
fn hostile_traffic_is_never_forwarded_nor_answered_and_every_drop_is_counted() {
    let workers: u16 = 2;
    let ports = RelayPorts::new(workers);
    let relay = RelayProcess::start(
        &ports,
        workers,
        &[
            "--transceivers",
            "127.0.0.1/32",
            "--max-tentative-per-ip",
            &CAP_PER_IP.to_string(),
            "--max-flows",
            "1000",
            "--tentative-timeout-secs",
            "120",
            "--metrics-interval-ms",
            "20",
        ],
    );
    let internal: Vec<SocketAddr> = (0..workers)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], ports.internal_base + i)))
        .collect();
    // The only destination a valid hint names. It never answers: every flow stays tentative.
    let lp = FakeLoop::new();
    // Named only by forged hints, unknown-cluster hints and framing from non-peers.
    let trap = udp(100);
    let trap_addr = trap.local_addr().unwrap();

    // Many tentative flows from one source IP, each with a valid hint.
    let clients: Vec<UdpSocket> = (0..TENTATIVE_CLIENTS).map(|_| udp(20)).collect();
    let mut client_checks = HashMap::new();
    for c in &clients {
        let check = binding_request(&hint(0, lp.addr()));
        c.send_to(&check, relay.public).unwrap();
        client_checks.insert(c.local_addr().unwrap(), check);
    }

    // Hostile traffic, shuffled.
    let mut rng = rand::rng();
    let wrong_key = FleetKey::new(1, [0xEE; 32]);
    let mut plan: Vec<(Kind, Vec<u8>)> = Vec::with_capacity(100_000);
    for (kind, count, _) in Kind::PLAN {
        for _ in 0..count {
            let bytes = match kind {
                Kind::ForgedWrongKey => binding_request(&hint_with(&wrong_key, 0, trap_addr)),
                Kind::ForgedRandom => {
                    let len = if rng.random() {
                        55
                    } else {
                        rng.random_range(4..120)
                    };
                    let ufrag: String = (0..len)
                        .map(|_| char::from(ICE_CHARS[rng.random_range(0..ICE_CHARS.len())]))
                        .collect();
                    binding_request(&ufrag)
                }
                Kind::UnknownCluster => binding_request(&hint(99, trap_addr)),
                Kind::BadStun => {
                    let mut m = binding_request(&hint(0, trap_addr));
                    m[3] = m[3].wrapping_add(4); // length field disagrees with the datagram
                    m
                }
                Kind::Garbage => {
                    let len = rng.random_range(1..300);
                    let mut g: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    g[0] = rng.random_range(128..=191); // RTP-looking, never STUN
                    g
                }
                Kind::FramedFromNonPeer => frame(
                    Direction::ToTransceiver,
                    trap_addr,
                    &binding_request(&hint(0, trap_addr)),
                ),
                Kind::SpoofedReturn => {
                    // Try to inject into a real client's flow through the return path.
                    let victim = clients[rng.random_range(0..clients.len())]
                        .local_addr()
                        .unwrap();
                    frame(Direction::ToClient, victim, b"injected")
                }
            };
            plan.push((kind, bytes));
        }
    }
    plan.shuffle(&mut rng);
    let total = plan.len();
    assert_eq!(total, 100_000);

    let attackers: Vec<UdpSocket> = (0..8).map(|_| udp_on("127.0.0.3", 20)).collect();
    let spoofers: Vec<UdpSocket> = (0..4).map(|_| udp_on("127.0.0.2", 20)).collect();
    for (i, (kind, bytes)) in plan.iter().enumerate() {
        if *kind == Kind::SpoofedReturn {
            spoofers[i % spoofers.len()]
                .send_to(bytes, internal[i % internal.len()])
                .unwrap();
        } else {
            attackers[i % attackers.len()]
                .send_to(bytes, relay.public)
                .unwrap();
        }
        // Pace, so the kernel's socket buffers never overflow: accounting must be exact.
        // Besides the fixed pace, let the relay catch up every 2,000 datagrams (its counters
        // are published every 20 ms), in case this machine is busy with something else.
        if i % 200 == 199 {
            std::thread::sleep(Duration::from_millis(2));
        }
        if i % 2_000 == 1_999 {
            let sent = (i + 1 + TENTATIVE_CLIENTS) as f64;
            relay.wait_metric(
                "voxgate_relay_recv_datagrams_total",
                &[],
                Duration::from_secs(10),
                |got| got >= sent - 1_000.0,
            );
        }
    }

    // Every datagram reached the relay and was decided.
    let received = relay.wait_metric(
        "voxgate_relay_recv_datagrams_total",
        &[],
        Duration::from_secs(20),
        |v| v >= (total + TENTATIVE_CLIENTS) as f64,
    );
    assert_eq!(
        received,
        (total + TENTATIVE_CLIENTS) as f64,
        "kernel dropped datagrams"
    );

    // Tentative flood: per worker at most CAP_PER_IP flows from that IP; the rest refused.
    let created = relay.wait_metric(
        "voxgate_relay_flows_created_total",
        &[],
        Duration::from_secs(5),
        |v| v > 0.0,
    );
    assert!(created >= CAP_PER_IP as f64, "created {created}");
    assert!(created <= (CAP_PER_IP * usize::from(workers)) as f64);
    for w in 0..workers {
        let w = w.to_string();
        let active = relay.metric("voxgate_relay_flows_active", &[("worker", &w)]);
        assert!(active <= CAP_PER_IP as f64, "worker {w}: {active} flows");
    }
    assert_eq!(relay.metric("voxgate_relay_flows_active", &[]), created);
    assert_eq!(relay.metric("voxgate_relay_flows_tentative", &[]), created);

    // Drop accounting, reason by reason.
    let text = relay.scrape();
    let drops =
        |reason: &str| metric_sum(&text, "voxgate_relay_drops_total", &[("reason", reason)]);
    let mut expected: HashMap<&str, f64> = HashMap::new();
    for (_, count, reason) in Kind::PLAN {
        *expected.entry(reason).or_default() += count as f64;
    }
    expected.insert("tentative_cap", TENTATIVE_CLIENTS as f64 - created);
    for (reason, want) in &expected {
        assert_eq!(drops(reason), *want, "drops with reason {reason}\n{text}");
    }
    assert_eq!(
        metric_sum(&text, "voxgate_relay_drops_total", &[]),
        (total + TENTATIVE_CLIENTS) as f64 - created,
        "no other drops"
    );
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_relay_packets_forwarded_total",
            &[("direction", "to_transceiver")]
        ),
        created
    );
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_relay_packets_forwarded_total",
            &[("direction", "to_client")]
        ),
        0.0
    );

    // The loop got exactly the checks of the accepted clients, nothing else.
    let mut at_loop = 0;
    while let Some(got) = lp.recv() {
        assert_eq!(got.header.direction, Direction::ToTransceiver);
        let check = client_checks
            .get(&got.header.client)
            .unwrap_or_else(|| panic!("loop got a datagram for {}", got.header.client));
        assert_eq!(&got.payload, check);
        at_loop += 1;
    }
    assert_eq!(at_loop as f64, created);

    // Nobody else got anything: not the trap, not the senders, not the spoofers' victims.
    assert!(recv(&trap).is_none(), "something reached the trap");
    for s in attackers.iter().chain(&spoofers).chain(&clients) {
        assert!(
            recv(s).is_none(),
            "the relay answered {}",
            s.local_addr().unwrap()
        );
    }
}
