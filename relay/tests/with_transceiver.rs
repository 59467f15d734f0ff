//! The relay in front of the real transceiver, with real WebRTC clients (testkit, headless
//! Chromium), the echo-bot backend for audio back, and a real Redis.
//!
//! The `transceiver` and `echo-bot` binaries are the workspace's own, built next to `relay`
//! (`cargo build --workspace --bins`; cargo-nextest builds them with the tests).

mod common;

use std::collections::HashSet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use common::stack::{
    chromium_report, start_echo_bot, start_transceiver, start_transceiver_on,
    start_transceiver_with, Transceiver,
};
use common::{fleet_key, Redis, RelayPorts, RelayProcess};
use voxgate_proto::hint::{self, Keyring};
use voxgate_testkit::{signal, Fleet, SessionConfig};

fn session_json(t: &Transceiver, location: &str) -> serde_json::Value {
    reqwest::blocking::get(format!("{}{location}", t.signal_url))
        .unwrap()
        .json()
        .unwrap()
}

fn audio_in(t: &Transceiver, location: &str) -> u64 {
    session_json(t, location)["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap_or(0)
}

fn caller(t: &Transceiver, tone: f32, send_for: Duration) -> SessionConfig {
    SessionConfig {
        base_url: t.signal_url.clone(),
        tone_hz: tone,
        send_for,
        data_channel: false,
        ..Default::default()
    }
}

/// Every caller of `fleet` connects, and hears at least half a second of its echo back.
fn connect_all_and_hear_the_echo(fleet: &mut Fleet, t: &Transceiver, relay: &RelayProcess) {
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(20), |f| f
            .all_connected()),
        "{}/{} connected\n{}\nrelay:\n{}",
        fleet.connected_count(),
        fleet.len(),
        t.proc.log_text(),
        relay.log_text()
    );
    let echoed = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        (0..f.len()).all(|i| f.report(i).audio_packets_received >= 25)
    });
    let deaf: Vec<usize> = (0..fleet.len())
        .filter(|i| fleet.report(*i).audio_packets_received < 25)
        .collect();
    assert!(echoed, "callers without their echo: {deaf:?}");
}

/// Session `i`'s server state, after checking that its client only ever talked to the relay's
/// public port and that the transceiver saw the client's true address through the relay.
fn relayed_session(
    fleet: &Fleet,
    i: usize,
    t: &Transceiver,
    relay: &RelayProcess,
) -> serde_json::Value {
    let seen: HashSet<SocketAddr> = fleet.session(i).remote_addrs_seen().clone();
    assert_eq!(seen, HashSet::from([relay.public]), "client {i}");
    let snap = session_json(t, &fleet.report(i).location);
    assert_eq!(
        snap["client_addrs"][0],
        fleet.session(i).local_addr().to_string(),
        "the transceiver saw the true client address: {snap}"
    );
    snap
}

#[test]
fn fifty_sessions_through_the_relay_exchange_audio_both_ways() {
    let ports = RelayPorts::new(2);
    let relay = RelayProcess::start(&ports, 2, &[]);
    let t = start_transceiver(relay.public, 0, 2);
    let _bot = start_echo_bot(&t);
    let mut fleet = Fleet::new().unwrap();
    for i in 0..50 {
        // One second of tone, then silence: the echo bot answers each caller.
        fleet
            .open(caller(&t, 300.0 + 10.0 * i as f32, Duration::from_secs(1)))
            .unwrap();
    }
    connect_all_and_hear_the_echo(&mut fleet, &t, &relay);
    let mut loops = HashSet::new();
    for i in 0..fleet.len() {
        // What the client sent is its business (a client starved of CPU skips frames rather
        // than burst them); what the relay must do is deliver all of it.
        let r = fleet.report(i);
        assert!(
            r.audio_packets_sent >= 25,
            "{i}: sent only {} packets of its 1 s tone",
            r.audio_packets_sent
        );
        let snap = relayed_session(&fleet, i, &t, &relay);
        assert_eq!(snap["relays"].as_array().map(Vec::len), Some(1), "{snap}");
        let received = snap["counters"]["audio_packets_in"].as_u64().unwrap();
        assert!(
            received * 100 >= r.audio_packets_sent * 98,
            "{i}: the transceiver got {received} of {} audio packets",
            r.audio_packets_sent
        );
        loops.insert(snap["loop"].as_u64().unwrap());
    }
    assert_eq!(loops.len(), 2, "sessions on both loops");
    // Both relay workers carried flows, and nothing was dropped as unroutable.
    let text = relay.scrape();
    for w in ["0", "1"] {
        assert!(
            common::metric_sum(&text, "voxgate_relay_flows_created_total", &[("worker", w)]) > 0.0,
            "worker {w} created no flow:\n{text}"
        );
    }
    for reason in ["bad_hint", "unknown_flow", "spoofed_return"] {
        assert_eq!(
            common::metric_sum(&text, "voxgate_relay_drops_total", &[("reason", reason)]),
            0.0,
            "{reason}"
        );
    }
}

/// The dominant frequency of what session `i` heard, over its loud 20 ms frames only (the
/// silence before the echo would otherwise dilute the analysis window).
fn heard_hz(fleet: &Fleet, i: usize) -> f32 {
    let loud: Vec<i16> = fleet
        .session(i)
        .received_pcm()
        .chunks_exact(signal::FRAME_SAMPLES)
        .filter(|f| f.iter().any(|&s| s.unsigned_abs() > 1000))
        .flatten()
        .copied()
        .collect();
    signal::dominant_frequency(&loud, signal::SAMPLE_RATE)
}

/// Issue 13's mixed load: a caller whose only candidate is ICE-TCP shares the relay with 50
/// UDP callers. Every caller hears its own tone echoed, the TCP caller's media goes both ways
/// over the relay's TCP listener only, and the UDP callers never touch it.
#[test]
fn one_tcp_caller_and_fifty_udp_callers_share_the_relay_and_all_hear_their_echo() {
    let ports = RelayPorts::new(2);
    let relay = RelayProcess::start(&ports, 2, &[]);
    let t = start_transceiver(relay.public, 0, 2);
    let _bot = start_echo_bot(&t);
    let mut fleet = Fleet::new().unwrap();
    let tone = |i: usize| 300.0 + 20.0 * i as f32;
    let tcp = fleet
        .open(SessionConfig {
            udp: false,
            tcp: true,
            ..caller(&t, tone(0), Duration::from_secs(1))
        })
        .unwrap();
    for i in 1..=50 {
        fleet
            .open(caller(&t, tone(i), Duration::from_secs(1)))
            .unwrap();
    }
    connect_all_and_hear_the_echo(&mut fleet, &t, &relay);
    // Let the echoes finish before judging what each caller heard.
    fleet.run_for(Duration::from_secs(1));

    for i in 0..fleet.len() {
        let r = fleet.report(i);
        let hz = heard_hz(&fleet, i);
        assert!(
            (hz - tone(i)).abs() < 5.0,
            "caller {i} sent {} Hz and heard {hz} Hz",
            tone(i)
        );
        let snap = if i == tcp {
            session_json(&t, &r.location)
        } else {
            relayed_session(&fleet, i, &t, &relay)
        };
        let want = if i == tcp { "tcp" } else { "udp" };
        let paths = snap["client_paths"].as_array().unwrap();
        assert!(
            !paths.is_empty()
                && paths
                    .iter()
                    .all(|p| p["transport"] == want && p["via"].is_string()),
            "caller {i}: every path must be {want} through the relay: {snap}"
        );
        let received = snap["counters"]["audio_packets_in"].as_u64().unwrap();
        assert!(
            received * 100 >= r.audio_packets_sent * 98,
            "{i}: the transceiver got {received} of {} audio packets",
            r.audio_packets_sent
        );
    }
    let r = fleet.report(tcp);
    println!(
        "TCP caller: {} frames received over TCP of {} datagrams, heard {} Hz",
        r.tcp_frames_received,
        r.datagrams_received,
        heard_hz(&fleet, tcp)
    );
    assert!(r.tcp_frames_received > 0);
    assert_eq!(
        r.tcp_frames_received, r.datagrams_received,
        "the TCP caller got everything over TCP"
    );

    let text = relay.scrape();
    let forwarded = |transport: &str, direction: &str| {
        common::metric_sum(
            &text,
            "voxgate_relay_packets_forwarded_total",
            &[("transport", transport), ("direction", direction)],
        )
    };
    for transport in ["tcp", "udp"] {
        for direction in ["to_transceiver", "to_client"] {
            assert!(
                forwarded(transport, direction) > 0.0,
                "nothing forwarded {direction} over {transport}:\n{text}"
            );
        }
    }
    println!(
        "relay forwarded to the transceiver: {} over TCP, {} over UDP",
        forwarded("tcp", "to_transceiver"),
        forwarded("udp", "to_transceiver")
    );
    assert_eq!(
        common::metric_sum(&text, "voxgate_relay_tcp_connections_accepted_total", &[]),
        1.0,
        "only the TCP caller connects over TCP"
    );
    for reason in ["bad_hint", "unknown_flow", "spoofed_return"] {
        assert_eq!(
            common::metric_sum(&text, "voxgate_relay_drops_total", &[("reason", reason)]),
            0.0,
            "{reason}"
        );
    }
}

#[test]
fn two_tier_cluster_a_relay_forwards_to_cluster_b_relay_and_back() {
    let ports_a = RelayPorts::new(1);
    let ports_b = RelayPorts::new(1);
    let a_public: SocketAddr = ([127, 0, 0, 1], ports_a.public).into();
    let b_public: SocketAddr = ([127, 0, 0, 1], ports_b.public).into();
    let relay_a = RelayProcess::start(
        &ports_a,
        1,
        &[
            "--cluster-id",
            "1",
            "--peer-cluster",
            &format!("2={b_public}"),
        ],
    );
    let relay_b = RelayProcess::start(
        &ports_b,
        1,
        &[
            "--cluster-id",
            "2",
            "--peer-cluster",
            &format!("1={a_public}"),
        ],
    );
    // The transceiver lives in cluster 2 but its callers enter through cluster 1's relay.
    let t = start_transceiver(relay_a.public, 2, 1);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(caller(&t, 500.0, Duration::from_secs(30)))
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected()),
        "two-tier session did not connect\nA:\n{}\nB:\n{}",
        relay_a.log_text(),
        relay_b.log_text()
    );
    fleet.run_for(Duration::from_secs(1));
    let r = fleet.report(i);
    assert!(audio_in(&t, &r.location) >= 40);
    assert_eq!(
        fleet.session(i).remote_addrs_seen().clone(),
        HashSet::from([relay_a.public])
    );
    // Relay B received the flow from relay A, not from the client.
    assert!(relay_b.metric("voxgate_relay_flows_created_total", &[]) >= 1.0);
    let snap = session_json(&t, &r.location);
    assert_eq!(
        snap["client_addrs"][0],
        fleet.session(i).local_addr().to_string()
    );
}

/// Drives `fleet` until the server's audio counter for `location` grows past `base`;
/// returns how long that took.
fn time_until_media_resumes(
    fleet: &mut Fleet,
    t: &Transceiver,
    location: &str,
    limit: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    let base = audio_in(t, location);
    while start.elapsed() < limit {
        fleet.run_for(Duration::from_millis(20));
        if audio_in(t, location) > base + 1 {
            return Some(start.elapsed());
        }
    }
    None
}

/// Kills the relay mid-session, starts a new one on the same ports, and measures how long
/// the caller's media takes to reach the transceiver again.
fn restart_gap(with_redis: bool) -> Duration {
    let redis = with_redis.then(Redis::start);
    let ports = RelayPorts::new(1);
    let redis_args: Vec<String> = redis
        .iter()
        .flat_map(|r| ["--redis".to_string(), r.url()])
        .collect();
    let args: Vec<&str> = redis_args.iter().map(String::as_str).collect();
    let mut relay = RelayProcess::start(&ports, 1, &args);
    let t = start_transceiver(relay.public, 0, 1);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(caller(&t, 440.0, Duration::from_secs(120)))
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    fleet.run_for(Duration::from_millis(1500));
    let location = fleet.report(i).location;
    if let Some(r) = &redis {
        let route = r.get(&format!("voxgate:route:{}", fleet.session(i).local_addr()));
        assert!(route.is_some(), "the relay cached the route in Redis");
    }
    relay.kill();
    fleet.run_for(Duration::from_millis(500));
    let _relay2 = RelayProcess::start(&ports, 1, &args);
    let gap = time_until_media_resumes(&mut fleet, &t, &location, Duration::from_secs(15))
        .expect("media resumed through the new relay");
    assert!(fleet.session(i).is_connected(), "the session survived");
    gap
}

#[test]
fn relay_restart_with_redis_resumes_media_before_the_next_consent_check() {
    let with_redis = restart_gap(true);
    let without = restart_gap(false);
    println!(
        "media gap after a relay restart: {} ms with the Redis route, {} ms waiting for the next STUN check",
        with_redis.as_millis(),
        without.as_millis()
    );
    // With Redis the first media packet restores the flow; without, the next consent
    // check (seconds away) has to.
    assert!(
        with_redis < Duration::from_millis(500),
        "{} ms",
        with_redis.as_millis()
    );
    assert!(with_redis < without, "Redis beat waiting for STUN");
}

#[test]
fn redis_stopped_mid_run_does_not_disturb_existing_flows() {
    let mut redis = Redis::start();
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--redis", &redis.url()]);
    let t = start_transceiver(relay.public, 0, 1);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(caller(&t, 440.0, Duration::from_secs(60)))
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    fleet.run_for(Duration::from_secs(1));
    let location = fleet.report(i).location;
    redis.kill();
    let before = audio_in(&t, &location);
    fleet.run_for(Duration::from_secs(2));
    let after = audio_in(&t, &location);
    assert!(
        after >= before + 90,
        "forwarding stalled without Redis: {before} -> {after}"
    );
    assert!(fleet.session(i).is_connected());
}

/// The whole path over IPv6: clients on ::1, the relay's public and internal sockets on ::1,
/// the transceiver's loops on ::1 (so every routing hint carries an IPv6 loop address and every
/// relay header an IPv6 client address), audio both ways through the echo-bot.
#[test]
fn ipv6_sessions_through_the_relay_exchange_audio_both_ways() {
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let ports = RelayPorts::new(2);
    let relay = RelayProcess::start_on(v6, &ports, 2, &[]);
    let t = start_transceiver_on(v6, relay.public, 0, 2);
    let _bot = start_echo_bot(&t);
    let mut fleet = Fleet::new().unwrap();
    for i in 0..10 {
        fleet
            .open(SessionConfig {
                bind_ip: v6,
                seed: i,
                ..caller(&t, 300.0 + 40.0 * i as f32, Duration::from_secs(2))
            })
            .unwrap();
    }
    connect_all_and_hear_the_echo(&mut fleet, &t, &relay);
    let keys = Keyring::new(fleet_key());
    let workers: Vec<SocketAddr> = (0..2)
        .map(|k| SocketAddr::new(v6, ports.internal_base + k))
        .collect();
    let mut loops = HashSet::new();
    for i in 0..fleet.len() {
        let snap = relayed_session(&fleet, i, &t, &relay);
        let via: SocketAddr = snap["relays"][0].as_str().unwrap().parse().unwrap();
        assert!(workers.contains(&via), "{via} is not a worker: {snap}");
        let ufrag = snap["server_ufrag"].as_str().unwrap();
        let h = hint::decode(&keys, ufrag.as_bytes()).expect("the server ufrag is a hint");
        assert!(h.loop_addr.is_ipv6(), "hint names {}", h.loop_addr);
        loops.insert(h.loop_addr);
        assert!(snap["counters"]["audio_packets_in"].as_u64().unwrap() >= 45);
    }
    assert_eq!(loops.len(), 2, "hints name both IPv6 loops: {loops:?}");
    for reason in ["bad_hint", "unknown_flow", "spoofed_return"] {
        assert_eq!(
            common::metric_sum(
                &relay.scrape(),
                "voxgate_relay_drops_total",
                &[("reason", reason)]
            ),
            0.0,
            "{reason}"
        );
    }
}

#[test]
fn chromium_connects_through_the_relay() {
    let ports = RelayPorts::new(2);
    // The relay's TCP side (ICE over TCP, issue 13) reaches the transceiver from its own
    // internal socket: bound here, so the test knows it as one of this relay's addresses.
    let tcp_internal = format!("127.0.0.1:{}", common::free_udp_range(1));
    let relay = RelayProcess::start(&ports, 2, &["--tcp-internal-listen", &tcp_internal]);
    let t = start_transceiver(relay.public, 0, 2);
    let report = chromium_report(
        Command::new("node"),
        &[("SIGNAL_URL", t.signal_url.as_str()), ("HOLD_MS", "3000")],
        || format!("relay:\n{}", relay.log_text()),
    );
    let line = report.to_string();
    assert!(
        report["server"]["counters"]["audio_packets_in"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Chromium gathers every local address (loopback and, on most machines, a LAN address)
    // and may use several pairs, over UDP and TCP (the answer has passive TCP candidates);
    // SO_REUSEPORT can hash each UDP pair to a different worker. What must hold is that every
    // path runs through this relay (one of its UDP workers or its TCP side), and that the
    // relay carried at least every datagram the transceiver counted in and out.
    let workers: Vec<String> = (0..2)
        .map(|i| format!("127.0.0.1:{}", ports.internal_base + i))
        .chain([tcp_internal.clone()])
        .collect();
    let relays: Vec<&str> = report["server"]["relays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(!relays.is_empty(), "no relayed path: {line}");
    assert!(
        relays.iter().all(|r| workers.iter().any(|w| w == r)),
        "a path bypassed this relay's workers {workers:?}: {line}"
    );
    // The relay publishes its workers' counters every 100 ms, so the last datagrams of the
    // call can be counted by the transceiver before the relay's scrape shows them: wait for
    // the relay's count to catch up (it can only grow) rather than compare two moments.
    let counters = &report["server"]["counters"];
    let forwarded_at_least = |direction: &str, want: f64| {
        relay.wait_metric(
            "voxgate_relay_packets_forwarded_total",
            &[("direction", direction)],
            Duration::from_secs(5),
            |v| v >= want,
        ) >= want
    };
    assert!(
        forwarded_at_least("to_transceiver", counters["datagrams_in"].as_f64().unwrap()),
        "the transceiver received datagrams the relay did not carry: {line}"
    );
    assert!(
        forwarded_at_least("to_client", counters["datagrams_out"].as_f64().unwrap()),
        "the transceiver sent datagrams around the relay: {line}"
    );
}

/// One report line of an external client (the last JSON object on its stdout).
fn client_report(who: &str, out: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{who} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{who} printed no report:\n{stdout}"));
    serde_json::from_str(line).unwrap()
}

/// Request-steered ingress (issue 13) with unmodified clients: the transceiver knows two
/// relay ingresses, `eu` (the default) and `us`, each a real relay; signaling from 127.0.0.1
/// is steered to `us` by a CIDR rule. The `us` answer carries two candidates, its relay's
/// IPv4 address and an IPv6 one (where this test runs no relay, as when one family of an
/// ingress is down). Chromium and aiortc each accept that answer, connect through the `us`
/// relay and send audio; the `eu` relay carries nothing.
#[test]
fn chromium_and_aiortc_connect_through_the_ingress_they_are_steered_to() {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    assert!(
        repo.join("tests/browser/node_modules/playwright-core")
            .exists(),
        "run scripts/setup first (playwright-core missing)"
    );
    let python = repo.join(".venv/bin/python");
    assert!(python.exists(), "run scripts/setup first (.venv missing)");
    let eu = RelayProcess::start(&RelayPorts::new(1), 1, &[]);
    let us_ports = RelayPorts::new(2);
    // Chromium may also connect over ICE-TCP, which the relay's TCP side forwards from its own
    // internal socket: bound here, so the test knows it as one of the `us` relay's addresses.
    let us_tcp_internal = format!("127.0.0.1:{}", common::free_udp_range(1));
    let us = RelayProcess::start(&us_ports, 2, &["--tcp-internal-listen", &us_tcp_internal]);
    let eu_arg = format!("eu={}", eu.public);
    let us_arg = format!("us={},[::1]:{}", us.public, us.public.port());
    let localhost = IpAddr::from([127, 0, 0, 1]);
    let t = start_transceiver_with(
        localhost,
        localhost,
        2,
        &[
            "--ingress",
            &eu_arg,
            "--ingress",
            &us_arg,
            "--ingress-cidr",
            "127.0.0.1/32=us",
            // The relays of these tests forward from loopback.
            "--relays",
            "127.0.0.0/8,::1/128",
        ],
        &[],
    );
    let us_workers: Vec<String> = (0..2)
        .map(|i| format!("127.0.0.1:{}", us_ports.internal_base + i))
        .chain([us_tcp_internal.clone()])
        .collect();
    let chromium = Command::new("node")
        .arg(repo.join("tests/browser/chromium_session.mjs"))
        .current_dir(repo.join("tests/browser"))
        .env("SIGNAL_URL", &t.signal_url)
        .env("HOLD_MS", "2000")
        .output()
        .expect("run node");
    let aiortc = Command::new(&python)
        .arg(repo.join("tests/aiortc_client.py"))
        .args(["--url", &t.signal_url, "--seconds", "2"])
        .current_dir(&repo)
        .output()
        .expect("run the aiortc client");
    for (who, out) in [("chromium", &chromium), ("aiortc", &aiortc)] {
        let report = client_report(who, out);
        let server = &report["server"];
        assert_eq!(server["ingress"], "us", "{who}: {server}");
        assert_eq!(server["ingress_reason"], "cidr", "{who}: {server}");
        assert!(
            server["counters"]["audio_packets_in"].as_u64().unwrap_or(0) > 0,
            "{who}: no audio reached the transceiver: {server}\n{}",
            t.proc.log_text()
        );
        let relays: Vec<&str> = server["relays"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_str())
            .collect();
        assert!(
            !relays.is_empty() && relays.iter().all(|r| us_workers.iter().any(|w| w == r)),
            "{who}: media must arrive through the us relay {us_workers:?}: {server}"
        );
    }
    assert!(
        us.metric(
            "voxgate_relay_packets_forwarded_total",
            &[("direction", "to_transceiver")]
        ) > 0.0
    );
    assert_eq!(
        eu.metric("voxgate_relay_packets_forwarded_total", &[]),
        0.0,
        "the eu relay was not advertised, so it carries nothing"
    );
}
