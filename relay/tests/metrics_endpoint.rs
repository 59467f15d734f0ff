//! The relay's `/metrics` endpoint under slow and idle clients, and what it exposes.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

/// More than the endpoint keeps open at once (256), each stuck half-way through its request.
const SLOW_CLIENTS: usize = 300;

#[test]
fn many_slow_scrapes_do_not_block_a_normal_scrape_and_are_closed_by_the_deadline() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &[]);
    let mut slow: Vec<TcpStream> = (0..SLOW_CLIENTS)
        .map(|_| {
            let mut s = TcpStream::connect(relay.metrics).unwrap();
            s.write_all(b"GET /metr").unwrap();
            s
        })
        .collect();
    // A normal scrape, while all of them hang: answered.
    for _ in 0..3 {
        let body = http_get(relay.metrics, "/metrics").expect("a normal scrape is answered");
        assert!(body.contains("voxgate_relay_flows_active"), "{body}");
    }
    // Past the cap, the oldest were closed to make room, and counted.
    let evicted = relay.wait_metric(
        "voxgate_relay_scrapes_refused_total",
        &[("reason", "evicted")],
        Duration::from_secs(5),
        |v| v >= (SLOW_CLIENTS - 256) as f64,
    );
    assert!(evicted >= (SLOW_CLIENTS - 256) as f64, "evicted {evicted}");
    // The rest are closed by the 5 s deadline: every slow client sees EOF (or a reset),
    // never a response.
    let deadline = Instant::now() + Duration::from_secs(20);
    for s in &mut slow {
        let left = deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(10))))
            .unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!(
                "a slow client got an answer: {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("slow client not closed by the deadline: {e}"),
        }
    }
    let timed_out = relay.wait_metric(
        "voxgate_relay_scrapes_refused_total",
        &[("reason", "timeout")],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    assert!(timed_out >= 1.0);
    assert!(http_get(relay.metrics, "/metrics").is_some());
}

#[test]
fn an_oversized_request_is_refused_and_counted() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &[]);
    let mut s = TcpStream::connect(relay.metrics).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(&[b'A'; 8192]);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(buf.is_empty(), "{:?}", String::from_utf8_lossy(&buf));
    let refused = relay.wait_metric(
        "voxgate_relay_scrapes_refused_total",
        &[("reason", "bad_request")],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    assert_eq!(refused, 1.0);
}

/// Why the endpoint needs no token on a public bind: nothing in it identifies a client, a
/// transceiver, a session or a secret.
#[test]
fn metrics_expose_no_client_or_transceiver_address_nor_ufrag() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &[]);
    let lp = FakeLoop::new();
    let client = udp(1000);
    let ufrag = hint(0, lp.addr());
    client
        .send_to(&binding_request(&ufrag), relay.public)
        .unwrap();
    let got = lp.recv().expect("the check reaches the loop");
    lp.reply(got.from, got.header.client, b"hi");
    assert!(recv(&client).is_some());
    relay.wait_metric(
        "voxgate_relay_flows_established_total",
        &[],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    let text = relay.scrape();
    let client_port = client.local_addr().unwrap().port().to_string();
    let loop_port = lp.addr().port().to_string();
    for secret in [
        "127.0.0.1",
        client_port.as_str(),
        loop_port.as_str(),
        &ufrag[..20],
        &FLEET_KEY_HEX[..16],
    ] {
        // Ports are numbers, so look for them as whole label values or samples only.
        let leaked = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .any(|l| l.contains(&format!("\"{secret}\"")) || l.contains(&format!("{secret}:")));
        assert!(!leaked, "{secret} appears in /metrics:\n{text}");
    }
}
