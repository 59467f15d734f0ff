//! A real relay process forwarding real UDP flows both ways on loopback.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use voxgate_proto::Direction;

#[test]
fn valid_flows_are_forwarded_both_ways_and_clients_only_see_the_relay_address() {
    let workers = 2;
    let ports = RelayPorts::new(workers);
    let relay = RelayProcess::start(&ports, workers, &[]);
    let lp = FakeLoop::new();

    // Several clients, so the kernel spreads them over both workers.
    let clients: Vec<_> = (0..12).map(|_| udp(2000)).collect();
    let mut checks = HashMap::new();
    for c in &clients {
        let check = binding_request(&hint(0, lp.addr()));
        c.send_to(&check, relay.public).unwrap();
        checks.insert(c.local_addr().unwrap(), check);
    }

    // The loop sees each check once, behind a header naming the real client.
    let mut worker_of = HashMap::new();
    for _ in 0..clients.len() {
        let got = lp.recv().expect("check forwarded to the loop");
        assert_eq!(got.header.direction, Direction::ToTransceiver);
        assert_eq!(
            &got.payload, &checks[&got.header.client],
            "payload untouched"
        );
        assert!(ports_of_workers(&ports, workers).contains(&got.from.port()));
        worker_of.insert(got.header.client, got.from);
    }
    assert_eq!(worker_of.len(), clients.len());
    assert!(lp.recv().is_none(), "nothing else reaches the loop");

    // Replies go back through the worker that forwarded, and reach the right client from
    // the relay's public address, header stripped.
    for (client, worker) in &worker_of {
        lp.reply(*worker, *client, format!("answer for {client}").as_bytes());
    }
    for c in &clients {
        let (from, bytes) = recv(c).expect("reply reaches the client");
        assert_eq!(from, relay.public, "client only sees the relay");
        assert_eq!(
            bytes,
            format!("answer for {}", c.local_addr().unwrap()).as_bytes()
        );
    }

    // Later packets (DTLS-like) of each flow: forwarded opaquely through the same worker.
    for round in 0..5u8 {
        for c in &clients {
            c.send_to(&dtls_like(round), relay.public).unwrap();
        }
        for _ in 0..clients.len() {
            let got = lp.recv().expect("media forwarded");
            assert_eq!(got.payload, dtls_like(round));
            assert_eq!(
                got.from, worker_of[&got.header.client],
                "flow stays on its worker"
            );
            lp.reply(got.from, got.header.client, &[0x80, round]);
        }
        for c in &clients {
            let (from, bytes) = recv(c).expect("media reply");
            assert_eq!(from, relay.public);
            assert_eq!(bytes, [0x80, round]);
        }
    }

    let n = clients.len() as f64;
    let up = relay.wait_metric(
        "voxgate_relay_packets_forwarded_total",
        &[("direction", "to_transceiver")],
        Duration::from_secs(3),
        |v| v >= 6.0 * n,
    );
    assert_eq!(up, 6.0 * n);
    let down = relay.metric(
        "voxgate_relay_packets_forwarded_total",
        &[("direction", "to_client")],
    );
    assert_eq!(down, 6.0 * n);
    assert_eq!(
        relay.metric("voxgate_relay_flows_established_total", &[]),
        n
    );
    assert_eq!(relay.metric("voxgate_relay_flows_active", &[]), n);
    assert_eq!(relay.metric("voxgate_relay_flows_tentative", &[]), 0.0);
    assert_eq!(relay.metric("voxgate_relay_drops_total", &[]), 0.0);
    assert!(relay.metric("voxgate_relay_recv_batches_total", &[]) > 0.0);
}

fn ports_of_workers(ports: &RelayPorts, workers: u16) -> Vec<u16> {
    (0..workers).map(|i| ports.internal_base + i).collect()
}

#[test]
fn sigterm_stops_the_relay_with_exit_code_zero() {
    let ports = RelayPorts::new(1);
    let mut relay = RelayProcess::start(&ports, 1, &[]);
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &relay.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let ok = eventually(Duration::from_secs(5), || {
        matches!(relay.child.try_wait(), Ok(Some(_)))
    });
    assert!(ok, "relay did not stop on SIGTERM");
    let status = relay.child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
    let log = relay.log_text();
    assert!(log.contains("stopped"), "{log}");
    assert!(!log.contains(FLEET_KEY_HEX), "the key must never be logged");
}

#[test]
fn help_documents_every_flag_with_its_environment_twin_and_hides_the_key() {
    let out = std::process::Command::new(relay_bin())
        .arg("--help")
        .env("VOXGATE_RELAY_FLEET_KEY", FLEET_KEY_HEX)
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--listen",
        "--internal-listen",
        "--workers",
        "--fleet-key",
        "--fleet-key-file",
        "--fleet-key-id",
        "--previous-fleet-key",
        "--previous-fleet-key-id",
        "--cluster-id",
        "--peer-cluster",
        "--transceivers",
        "--max-tentative-per-ip",
        "--max-flows",
        "--tentative-timeout-secs",
        "--idle-timeout-secs",
        "--redis",
        "--route-ttl-secs",
        "--metrics-listen",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    assert!(help.contains("VOXGATE_RELAY_LISTEN"));
    assert!(help.contains("VOXGATE_RELAY_FLEET_KEY"));
    assert!(!help.contains(FLEET_KEY_HEX), "--help printed the key");
}

#[test]
fn a_bad_key_is_refused_at_startup_without_being_echoed() {
    let bad = "zz1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
    let out = std::process::Command::new(relay_bin())
        .args(["--fleet-key", bad, "--metrics-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("non-hex"), "{all}");
    assert!(!all.contains("1e2d3c4b"), "{all}");
}

#[test]
fn flow_of_another_cluster_crosses_the_peer_relay_both_ways() {
    // Relay A serves cluster 1, relay B cluster 2; each names the other as a peer.
    let (pa, pb) = (RelayPorts::new(1), RelayPorts::new(1));
    let peer_b = format!("2=127.0.0.1:{}", pb.public);
    let peer_a = format!("1=127.0.0.1:{}", pa.public);
    let a = RelayProcess::start(&pa, 1, &["--cluster-id", "1", "--peer-cluster", &peer_b]);
    let b = RelayProcess::start(&pb, 1, &["--cluster-id", "2", "--peer-cluster", &peer_a]);
    let lp = FakeLoop::new(); // a loop of cluster 2
    let client = udp(2000);
    let me = client.local_addr().unwrap();

    // The client only knows relay A (its regional VIP); the hint names cluster 2.
    let check = binding_request(&hint(2, lp.addr()));
    client.send_to(&check, a.public).unwrap();
    let got = lp.recv().expect("check crosses A then B to the loop");
    assert_eq!(
        got.header.client, me,
        "the header still names the real client"
    );
    assert_eq!(got.payload, check);
    assert_eq!(got.from.port(), pb.internal_base, "delivered by relay B");
    lp.reply(got.from, me, b"from cluster 2");
    let (from, bytes) = recv(&client).expect("reply comes back through B then A");
    assert_eq!(from, a.public, "the client only ever sees relay A");
    assert_eq!(bytes, b"from cluster 2");

    for n in 0..3 {
        client.send_to(&dtls_like(n), a.public).unwrap();
        let got = lp.recv().expect("media crosses both relays");
        assert_eq!((got.header.client, got.payload), (me, dtls_like(n)));
        lp.reply(got.from, me, &[0x80, n]);
        let (from, bytes) = recv(&client).expect("media reply");
        assert_eq!((from, bytes), (a.public, vec![0x80, n]));
    }
    assert_eq!(
        b.wait_metric(
            "voxgate_relay_flows_established_total",
            &[],
            Duration::from_secs(2),
            |v| v >= 1.0
        ),
        1.0
    );
    assert_eq!(a.metric("voxgate_relay_flows_established_total", &[]), 1.0);
    assert_eq!(a.metric("voxgate_relay_drops_total", &[]), 0.0);
    assert_eq!(b.metric("voxgate_relay_drops_total", &[]), 0.0);
}
