//! End to end on loopback: the real transceiver process and str0m test clients (testkit)
//! doing real ICE, DTLS and SRTP with real Opus.

mod support;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use support::{http_get, http_post_sdp, metric_sum, ServerProcess};
use voxgate_proto::hint::{self, FleetKey, Keyring};
use voxgate_testkit::{Fleet, SessionConfig};

const FLEET_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn client(server: &ServerProcess, i: u64, send_for: Duration) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        tone_hz: 300.0 + 20.0 * i as f32,
        send_for,
        seed: i,
        data_channel: i.is_multiple_of(2),
        decode_downlink: false,
        ..Default::default()
    }
}

fn metrics(server: &ServerProcess) -> String {
    http_get(&server.url("/metrics"), None).body
}

fn wait_metric(server: &ServerProcess, name: &str, labels: &[&str], want: u64) -> u64 {
    wait_metric_for(server, name, labels, want, Duration::from_secs(10))
}

#[test]
fn fifty_sessions_connect_send_opus_spread_over_loops_and_are_freed_on_delete() {
    let server = ServerProcess::start(&["--loops", "2"]);
    let loop_addrs: Vec<SocketAddr> = (0..2)
        .map(|i| ([127, 0, 0, 1], server.media_base_port + i).into())
        .collect();
    let mut fleet = Fleet::new().unwrap();
    for i in 0..50 {
        fleet
            .open(client(&server, i, Duration::from_millis(2500)))
            .unwrap();
    }
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        f.all_connected()
    });
    assert!(
        connected,
        "only {}/50 connected\n{}",
        fleet.connected_count(),
        server.log_tail(40)
    );
    // Each client sends 2.5 s of Opus (125 packets); let it all arrive.
    fleet.run_for(Duration::from_millis(3000));

    let mut per_loop: HashMap<u64, usize> = HashMap::new();
    for i in 0..fleet.len() {
        let report = fleet.report(i);
        assert!(
            report.audio_packets_sent >= 100,
            "client {i} sent only {} packets",
            report.audio_packets_sent
        );
        let snap = fleet.server_state(i).unwrap();
        let arrived = snap["counters"]["audio_packets_in"].as_u64().unwrap();
        assert!(
            arrived >= report.audio_packets_sent * 95 / 100,
            "session {i}: server got {arrived} of {} audio packets: {snap}",
            report.audio_packets_sent
        );
        assert_eq!(snap["state"], "connected");
        let loop_index = snap["loop"].as_u64().unwrap();
        *per_loop.entry(loop_index).or_default() += 1;
        // The client only ever talked to its own loop's socket.
        let seen: HashSet<SocketAddr> = fleet.session(i).remote_addrs_seen().clone();
        assert_eq!(
            seen,
            HashSet::from([loop_addrs[loop_index as usize]]),
            "session {i} on loop {loop_index}"
        );
        // And the server mapped exactly the client's address.
        let addrs = snap["client_addrs"].as_array().unwrap();
        assert_eq!(addrs.len(), 1);
        assert_eq!(addrs[0], fleet.session(i).local_addr().to_string());
    }
    assert_eq!(per_loop.len(), 2, "both loops carry sessions: {per_loop:?}");
    assert!(per_loop.values().all(|n| *n >= 20), "{per_loop:?}");

    // No loop saw a datagram it could not attribute to one of its own sessions.
    let text = metrics(&server);
    for l in 0..2 {
        let label = format!("loop=\"{l}\"");
        assert!(metric_sum(&text, "voxgate_datagrams_in_total", &[&label]) > 0);
        assert_eq!(
            metric_sum(&text, "voxgate_dropped_datagrams_total", &[&label]),
            0,
            "{text}"
        );
    }
    assert_eq!(metric_sum(&text, "voxgate_sessions_active", &[]), 50);
    // Each offer's server-side stages were timed once, and the whole covers its parts.
    for stage in ["accept", "insert", "answer"] {
        let label = format!("stage=\"{stage}\"");
        assert_eq!(
            metric_sum(&text, "voxgate_offer_seconds_count", &[&label]),
            50,
            "{text}"
        );
    }
    let sum = |stage: &str| {
        text.lines()
            .find(|l| l.starts_with("voxgate_offer_seconds_sum") && l.contains(stage))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no sum for {stage}: {text}"))
    };
    assert!(sum("answer") >= sum("accept") + sum("insert"));

    for i in 0..fleet.len() {
        fleet.delete(i).unwrap();
    }
    assert_eq!(wait_metric(&server, "voxgate_sessions_active", &[], 0), 0);
    for i in 0..fleet.len() {
        let status = http_get(&server.url(&fleet.report(i).location), None).status;
        assert_eq!(status, 404);
    }
    assert_eq!(
        wait_metric(
            &server,
            "voxgate_sessions_ended_total",
            &["reason=\"deleted\""],
            50
        ),
        50
    );
}

/// Direct mode over IPv6: loops on ::1, clients on ::1; each session's hint names its own IPv6
/// loop socket, the only address its client ever talked to.
#[test]
fn ipv6_sessions_connect_directly_and_their_hints_name_the_ipv6_loop() {
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let server = ServerProcess::start_media_on(v6, &["--loops", "2", "--fleet-key", FLEET_KEY]);
    let keys = Keyring::new(FleetKey::from_hex(1, FLEET_KEY).unwrap());
    let mut fleet = Fleet::new().unwrap();
    for i in 0..6 {
        fleet
            .open(SessionConfig {
                bind_ip: v6,
                ..client(&server, i, Duration::from_millis(1500))
            })
            .unwrap();
    }
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(15), |f| f
            .all_connected()),
        "{}/6 connected\n{}",
        fleet.connected_count(),
        server.log_tail(40)
    );
    fleet.run_for(Duration::from_millis(2000));
    let mut loops = HashSet::new();
    for i in 0..fleet.len() {
        let snap = fleet.server_state(i).unwrap();
        let loop_index = snap["loop"].as_u64().unwrap() as u16;
        let loop_addr = SocketAddr::new(v6, server.media_base_port + loop_index);
        let h = hint::decode(&keys, fleet.session(i).server_ufrag().as_bytes())
            .expect("minted hint decodes");
        assert_eq!(h.loop_addr, loop_addr, "session {i}");
        let seen: HashSet<SocketAddr> = fleet.session(i).remote_addrs_seen().clone();
        assert_eq!(seen, HashSet::from([loop_addr]), "session {i}");
        assert_eq!(
            snap["client_addrs"][0],
            fleet.session(i).local_addr().to_string()
        );
        let sent = fleet.report(i).audio_packets_sent;
        let arrived = snap["counters"]["audio_packets_in"].as_u64().unwrap();
        assert!(
            sent >= 60 && arrived >= sent * 95 / 100,
            "{i}: {arrived} of {sent}"
        );
        loops.insert(loop_index);
    }
    assert_eq!(loops.len(), 2, "both IPv6 loops carry sessions");
}

/// The busy gauge of `loop_label` as a float (metric_sum truncates to integers).
fn loop_busy(server: &ServerProcess, loop_label: &str) -> f64 {
    metrics(server)
        .lines()
        .find(|l| l.starts_with("voxgate_loop_busy_ratio{") && l.contains(loop_label))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// One limit of admission by load, as the tests below see it.
struct LoadLimit {
    /// What the limit measures (for messages).
    what: &'static str,
    /// In the 503's body.
    says: &'static str,
    /// `reason` of `voxgate_sessions_refused_total`.
    reason: &'static str,
    /// Logged once when refusals begin, and once when they end.
    log_refusing: &'static str,
    log_room: &'static str,
}

/// Opens sessions that send audio until `server` refuses one by `limit`, then checks the 503
/// (why, Retry-After, the counter, one log line), that `loaded` holds while the load is there,
/// that the admitted sessions kept their audio, and that sessions are taken again once their
/// load is gone.
fn refuses_by_load_until_it_falls(
    server: &ServerProcess,
    limit: &LoadLimit,
    loaded: impl Fn(&ServerProcess, &str),
) {
    let mut fleet = Fleet::new().unwrap();
    // Each admitted session sends audio for 20 s; open sessions until one is refused.
    let mut refusal = None;
    let deadline = Instant::now() + Duration::from_secs(15);
    while refusal.is_none() && Instant::now() < deadline {
        match fleet.open(client(server, fleet.len() as u64, Duration::from_secs(20))) {
            Ok(_) => {
                fleet.run_for(Duration::from_millis(50));
            }
            Err(e) => refusal = Some(e),
        }
    }
    let admitted = fleet.len();
    let refusal =
        refusal.unwrap_or_else(|| panic!("no session was refused while {} worked", limit.what));
    assert!(
        admitted >= 1,
        "the idle {} refused the first session",
        limit.what
    );
    assert_eq!(refusal.status(), Some(503), "{refusal}");
    assert!(
        refusal.to_string().contains(limit.says),
        "the 503 says why: {refusal}"
    );
    let text = metrics(server);
    let refused = |reason: &str| {
        metric_sum(
            &text,
            "voxgate_sessions_refused_total",
            &[&format!("reason=\"{reason}\"")],
        )
    };
    assert_eq!(refused(limit.reason), 1, "{text}");
    for other in ["loops_saturated", "process_saturated"] {
        if other != limit.reason {
            assert_eq!(refused(other), 0, "{text}");
        }
    }
    loaded(server, &refusal.to_string());
    // A raw POST shows the Retry-After.
    let raw = http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
    assert_eq!(raw.status, 503, "{}", raw.body);
    assert_eq!(raw.header("retry-after").as_deref(), Some("1"));

    // The admitted sessions were not disturbed.
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected()),
        "{}/{admitted} admitted sessions connected",
        fleet.connected_count()
    );
    fleet.run_for(Duration::from_secs(1));
    for i in 0..fleet.len() {
        let snap = fleet.server_state(i).unwrap();
        assert!(
            snap["counters"]["audio_packets_in"].as_u64().unwrap() > 0,
            "admitted session {i} carries audio: {snap}"
        );
    }

    // Load gone: within a few seconds sessions are taken again.
    for i in 0..fleet.len() {
        fleet.delete(i).unwrap();
    }
    drop(fleet);
    let deadline = Instant::now() + Duration::from_secs(10);
    let accepted = loop {
        let r = http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
        if r.status == 201 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(accepted.status, 201, "{}", accepted.body);
    // Operators see the transitions, once each, not a line per refused POST.
    let log = server.log_tail(400);
    assert_eq!(log.matches(limit.log_refusing).count(), 1, "{log}");
    assert!(log.contains(limit.log_room), "{log}");
}

/// Admission control by load: with a (deliberately tiny) `--max-loop-busy`, sessions are taken
/// while the loop is idle, then refused with 503 + Retry-After once the loop measurably works,
/// and taken again once their load is gone. The sessions already admitted keep their audio.
#[test]
fn a_saturated_loop_refuses_new_sessions_until_its_load_falls() {
    let server = ServerProcess::start(&["--loops", "1", "--max-loop-busy", "0.001"]);
    let limit = LoadLimit {
        what: "loop",
        says: "every media loop is saturated",
        reason: "loops_saturated",
        log_refusing: "every media loop is saturated: refusing",
        log_room: "a media loop has room again",
    };
    refuses_by_load_until_it_falls(&server, &limit, |server, _| {
        assert!(loop_busy(server, "loop=\"0\"") >= 0.001);
    });
}

/// The process CPU gauge (share of usable cores over the last second) as a float.
fn process_cpu(server: &ServerProcess) -> f64 {
    metrics(server)
        .lines()
        .find(|l| l.starts_with("voxgate_process_cpu_ratio "))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Admission by the whole process's CPU: the same, with the loops' own limit off and a
/// (deliberately small) `--max-process-cpu`. The limit sits above what the idle debug build
/// reads while this test scrapes it every 200 ms (0.009 to 0.029 of two cores on a fresh CI
/// machine, where the earlier 0.01 was under the idle process and failed every run) and far
/// below what the sessions the test opens until one is refused cost.
#[test]
fn a_process_short_of_cpu_refuses_new_sessions_until_its_load_falls() {
    let limit = 0.06;
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--max-loop-busy",
        "1",
        "--max-process-cpu",
        "0.06",
    ]);
    // Start-up work (the runtimes, the loops) must first leave the 1 s window. The gauge reads
    // 0 until the sampler's first window closes (a process never uses no CPU at all), so wait
    // for two measured readings under the limit in a row.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut idle_readings = 0;
    let mut idle_max: f64 = 0.0;
    while idle_readings < 2 {
        let r = process_cpu(&server);
        (idle_readings, idle_max) = if r > 0.0 && r < limit {
            (idle_readings + 1, idle_max.max(r))
        } else {
            (0, 0.0)
        };
        assert!(
            Instant::now() < deadline,
            "the idle process stayed at {r} of its cores"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let load_limit = LoadLimit {
        what: "process",
        says: "the transceiver's CPU is saturated",
        reason: "process_saturated",
        log_refusing: "the process's CPU is saturated: refusing",
        log_room: "the process's CPU has room again",
    };
    // Admission projects what the sessions it just admitted will add, so it refuses on that
    // figure (the 503 names it), ahead of the gauge: the gauge shows the sessions' load above
    // the idle process's, but may stay under the limit (on a fast machine 56 sessions read
    // 0.05 of two cores, steady).
    refuses_by_load_until_it_falls(&server, &load_limit, |server, refusal| {
        let percent: f64 = refusal
            .split("saturated (")
            .nth(1)
            .and_then(|r| r.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("the 503 names the figure: {refusal}"));
        assert!(percent >= limit * 100.0, "{refusal}");
        let loaded = process_cpu(server);
        assert!(loaded > idle_max, "gauge {loaded}, idle {idle_max}");
    });
}

/// A fresh transceiver admits its first callers: measuring its codecs' cost at start-up is
/// calibration, not load. Before, a debug build's start-up measurement filled most of the first
/// window and `scripts/bench --smoke` saw every caller of its first scenario refused with 503.
/// From the first reading on, the idle process stays far under a limit of 0.2 of its cores, and
/// an offer made right away is taken.
#[test]
fn a_fresh_process_counts_none_of_its_start_up_as_load() {
    let limit = 0.2;
    let server = ServerProcess::start(&["--loops", "1", "--max-process-cpu", "0.2"]);
    let first = http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
    assert_eq!(first.status, 201, "{}", first.body);
    // The gauge reads 0 until the sampler's first window closes; then every reading of the
    // first 1.5 s (the whole 1 s window after start-up, and more) is under the limit.
    let deadline = Instant::now() + Duration::from_millis(1_500);
    let mut readings = Vec::new();
    while Instant::now() < deadline {
        readings.push(process_cpu(&server));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        readings.iter().any(|r| *r > 0.0),
        "the sampler published nothing: {readings:?}"
    );
    assert!(
        readings.iter().all(|r| *r < limit),
        "start-up read as load: {readings:?}"
    );
    let again = http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
    assert_eq!(again.status, 201, "{}", again.body);
    let text = metrics(&server);
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_sessions_refused_total",
            &["reason=\"process_saturated\""]
        ),
        0,
        "{text}"
    );
    assert!(
        server.log_tail(200).contains("calibration_ms"),
        "the start-up measurement is logged"
    );
}

#[test]
fn ice_restart_keeps_the_session_on_its_loop_with_a_new_minted_ufrag() {
    let server = ServerProcess::start(&["--loops", "2", "--fleet-key", FLEET_KEY]);
    let keys = Keyring::new(FleetKey::from_hex(1, FLEET_KEY).unwrap());
    let mut fleet = Fleet::new().unwrap();
    // Two sessions so the second lands on loop 1 (least loaded); restart that one.
    fleet
        .open(client(&server, 0, Duration::from_secs(30)))
        .unwrap();
    let i = fleet
        .open(client(&server, 1, Duration::from_secs(30)))
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    fleet.run_for(Duration::from_millis(500));
    let before = fleet.server_state(i).unwrap();
    let old_ufrag = fleet.session(i).server_ufrag().to_string();
    let old_hint = hint::decode(&keys, old_ufrag.as_bytes()).expect("minted hint decodes");
    let loop_index = before["loop"].as_u64().unwrap() as u16;
    assert_eq!(
        old_hint.loop_addr.port(),
        server.media_base_port + loop_index
    );

    fleet.ice_restart(i).unwrap();
    let new_ufrag = fleet.session(i).server_ufrag().to_string();
    assert_ne!(new_ufrag, old_ufrag);
    let new_hint = hint::decode(&keys, new_ufrag.as_bytes()).expect("new ufrag is a hint");
    assert_eq!(
        new_hint.loop_addr, old_hint.loop_addr,
        "same loop after restart"
    );

    // Media keeps flowing on the same session after the restart.
    let arrived_before = fleet.server_state(i).unwrap()["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();
    fleet.run_for(Duration::from_millis(1500));
    let after = fleet.server_state(i).unwrap();
    assert_eq!(after["id"], before["id"]);
    assert_eq!(after["loop"], before["loop"]);
    assert_eq!(after["server_ufrag"], new_ufrag.as_str());
    assert_eq!(after["counters"]["ice_restarts"], 1);
    let arrived_after = after["counters"]["audio_packets_in"].as_u64().unwrap();
    assert!(
        arrived_after >= arrived_before + 50,
        "audio after restart: {arrived_before} -> {arrived_after}"
    );
    assert!(fleet.session(i).is_connected());
}

#[test]
fn unconnected_session_ends_at_the_connect_timeout() {
    let server = ServerProcess::start(&["--loops", "1", "--connect-timeout-secs", "1"]);
    let created = support::http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
    assert_eq!(created.status, 201);
    let location = created.header("location").unwrap();
    assert_eq!(http_get(&server.url(&location), None).status, 200);
    let ended = wait_metric(
        &server,
        "voxgate_sessions_ended_total",
        &["reason=\"connect_timeout\""],
        1,
    );
    assert_eq!(ended, 1);
    assert_eq!(http_get(&server.url(&location), None).status, 404);
    assert_eq!(wait_metric(&server, "voxgate_sessions_active", &[], 0), 0);
}

#[test]
fn sigterm_ends_sessions_cleanly_and_exits_zero() {
    let mut server = ServerProcess::start(&["--loops", "2"]);
    let mut fleet = Fleet::new().unwrap();
    for i in 0..4 {
        fleet
            .open(client(&server, i, Duration::from_secs(30)))
            .unwrap();
    }
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    let status = server.stop().expect("server exited");
    assert!(status.success(), "exit status {status:?}");
    // The clients hear the goodbye (DTLS close_notify) instead of waiting for consent to fail.
    let closed = fleet.run_until(Instant::now() + Duration::from_secs(3), |f| {
        (0..f.len()).all(|i| f.session(i).is_closed())
    });
    assert!(closed, "clients saw the session end");
}

fn sigterm(server: &ServerProcess) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(server.pid() as libc::pid_t, libc::SIGTERM);
    }
}

#[test]
fn drain_refuses_new_sessions_keeps_existing_ones_and_exits_when_they_end() {
    let mut server = ServerProcess::start(&["--loops", "1", "--drain-timeout-secs", "30"]);
    let mut fleet = Fleet::new().unwrap();
    for i in 0..2 {
        fleet
            .open(client(&server, i, Duration::from_secs(60)))
            .unwrap();
    }
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    sigterm(&server);
    fleet.run_for(Duration::from_millis(300));
    assert_eq!(http_get(&server.url("/readyz"), None).status, 503);
    let refused = support::http_post_sdp(&server.url("/v1/sessions"), support::AUDIO_OFFER, None);
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    // Existing sessions keep flowing during the drain.
    let before = fleet.server_state(0).unwrap()["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();
    fleet.run_for(Duration::from_millis(1000));
    let after = fleet.server_state(0).unwrap()["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();
    assert!(after >= before + 40, "{before} -> {after}");
    assert!(server.is_running());
    // When the last session ends, the process exits 0 without waiting for the timeout.
    fleet.delete(0).unwrap();
    fleet.delete(1).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !server.is_running(),
        "still running after its sessions ended"
    );
    assert!(server.stop().unwrap().success());
}

#[test]
fn drain_timeout_ends_remaining_sessions_with_a_reason_sent_to_the_client() {
    let mut server = ServerProcess::start(&["--loops", "1", "--drain-timeout-secs", "1"]);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            data_channel: true,
            ..client(&server, 0, Duration::from_secs(60))
        })
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(i)
            .channel_open())
    );
    sigterm(&server);
    let closed = fleet.run_until(Instant::now() + Duration::from_secs(5), |f| {
        f.session(i).is_closed()
    });
    assert!(closed, "session closed at the drain timeout");
    let messages = fleet.session(i).channel_messages().to_vec();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("session.ended") && m.contains("shutdown")),
        "{messages:?}"
    );
    assert!(server.stop().unwrap().success());
}

#[test]
fn a_vanished_client_is_ended_by_ice_consent_loss() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(client(&server, 0, Duration::from_secs(60)))
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    fleet.run_for(Duration::from_millis(500));
    // The client goes silent without a goodbye (a closed laptop lid, a lost network).
    let t0 = Instant::now();
    fleet.abandon(i);
    let ended = wait_metric_for(
        &server,
        "voxgate_sessions_ended_total",
        &["reason=\"ice_disconnected\""],
        1,
        Duration::from_secs(40),
    );
    assert_eq!(ended, 1, "{}", server.log_tail(20));
    println!(
        "consent loss detected after {} ms",
        t0.elapsed().as_millis()
    );
    assert_eq!(wait_metric(&server, "voxgate_sessions_active", &[], 0), 0);
    assert_eq!(
        http_get(&server.url(&fleet.report(i).location), None).status,
        404
    );
}

fn wait_metric_for(
    server: &ServerProcess,
    name: &str,
    labels: &[&str],
    want: u64,
    limit: Duration,
) -> u64 {
    let deadline = Instant::now() + limit;
    loop {
        let v = metric_sum(&metrics(server), name, labels);
        if v == want || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
