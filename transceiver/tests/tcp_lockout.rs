//! ICE-TCP lock-out (issue 37, item 3), against the real transceiver process. A caller with a
//! valid call of its own replays its check as the first frame of the loop's TCP connections,
//! each of which str0m answers, then keeps them with a 3-byte junk frame now and then. Such
//! connections used to hold every slot of the loop for as long as the caller liked, also after
//! its session was deleted, and every new TCP caller was refused. Here junk never keeps a
//! connection, an ended session's connections close at once, a new TCP caller connects during
//! the attack, and the neighbour on the loop keeps its pace. The caps per IPv6 /56 and /48 are
//! tried from many addresses, in a network namespace of the test's own.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::backend::{tone, TestWorker};
use support::probe::{gap_stats, rss_kib, TimestampedClient};
use support::raw_tcp::{connect_from, read_until_closed};
use support::{http_delete, metric_sum, metrics, wait_metric, ServerProcess};
use voxgate_proto::rfc4571::{encode_frame, read_frame};
use voxgate_testkit::{Fleet, SessionConfig};

/// What kept a connection before: one RFC 4571 frame of one byte, 3 bytes on the wire.
const JUNK: [u8; 3] = [0, 1, 0x42];

fn closed_count(server: &ServerProcess, reason: &str) -> u64 {
    metric_sum(
        &metrics(server),
        "voxgate_tcp_closed_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

/// A TCP connection from `ip` whose first frame is `check`, if str0m answered it.
fn open_with_check(to: SocketAddr, ip: IpAddr, check: &[u8]) -> Option<TcpStream> {
    let mut s = connect_from(to, ip).ok()?;
    s.write_all(&encode_frame(check).ok()?).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let answer = read_frame(&mut s).ok()?;
    // A STUN Binding success response.
    (answer.len() >= 20 && answer[..2] == [0x01, 0x01]).then_some(s)
}

/// Whether the server has closed `s` (EOF or reset), without waiting; what it sent is dropped.
fn is_closed(s: &mut TcpStream) -> bool {
    let _ = s.set_nonblocking(true);
    let mut buf = [0u8; 2048];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break true,
        }
    };
    let _ = s.set_nonblocking(false);
    closed
}

/// A caller of `server` that is connected, with its backend `worker` attached.
fn connected_caller(server: &ServerProcess, worker: Option<&TestWorker>) -> TimestampedClient {
    let mut c = TimestampedClient::open(server);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(c.session.is_connected() && worker.is_none_or(|w| !w.attached().is_empty())) {
        assert!(Instant::now() < deadline, "the caller did not connect");
        c.drive_for(Duration::from_millis(20));
    }
    c
}

#[test]
fn tcp_slots_held_with_junk_after_a_valid_check_are_freed_and_a_new_tcp_caller_connects() {
    const SLOTS: usize = 48;
    const ATTACK: Duration = Duration::from_secs(16);
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--no-pin",
        "--tcp-max-conns",
        &SLOTS.to_string(),
        "--tcp-idle-timeout-secs",
        "4",
    ]);
    let listener = SocketAddr::from((Ipv4Addr::LOCALHOST, server.media_base_port));
    let worker = TestWorker::start(&server.grpc_url, "w1", 8, 48_000);
    // The neighbour: a UDP caller the backend plays a long reply to.
    let mut neighbour = connected_caller(&server, Some(&worker));
    let id = neighbour.session.session_id().to_string();
    worker.play(&id, &tone(700.0, 60.0, 48_000), "reply");
    // The attacker: a caller of its own, whose valid check opens the TCP connections.
    let mut attacker = connected_caller(&server, None);
    let check = attacker.capture_check(Duration::from_secs(10));
    neighbour.drive_for(Duration::from_millis(500));

    let wall = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let rss_before = rss_kib(server.pid());
    let frames_before = worker.session(&id).unwrap().frames.len();
    let arrivals_before = neighbour.rtp_arrivals.len();
    let stop = AtomicBool::new(false);
    let answered = AtomicU64::new(0);
    let held_most = AtomicU64::new(0);
    let attack_start = wall();
    let mut fleet = Fleet::new().unwrap();
    let mut caller = None;
    let mut connected_after = None;
    let mut open_when_connected = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Keeps SLOTS + 16 connections, each opened with the valid check from one of four
            // addresses (16 each, the per-IP cap), and feeds each the junk frame every second.
            let mut conns: Vec<(TcpStream, Instant)> = Vec::new();
            let mut next_ip = 0u8;
            while !stop.load(Ordering::Relaxed) {
                attacker.drive_for(Duration::from_millis(5));
                for _ in 0..4 {
                    if conns.len() >= SLOTS + 16 {
                        break;
                    }
                    let ip = Ipv4Addr::new(127, 0, 0, 2 + next_ip % 4);
                    next_ip = next_ip.wrapping_add(1);
                    if let Some(c) = open_with_check(listener, ip.into(), &check) {
                        answered.fetch_add(1, Ordering::Relaxed);
                        conns.push((c, Instant::now()));
                    }
                }
                let now = Instant::now();
                conns.retain_mut(|(c, fed)| {
                    if is_closed(c) {
                        return false;
                    }
                    if now.duration_since(*fed) < Duration::from_secs(1) {
                        return true;
                    }
                    *fed = now;
                    c.write_all(&JUNK).is_ok()
                });
                held_most.fetch_max(conns.len() as u64, Ordering::Relaxed);
            }
        });
        let t0 = Instant::now();
        // The attacker fills the slots; more than an idle timeout passes.
        neighbour.drive_for(Duration::from_secs(6));
        // A new TCP-only caller, while the attack goes on.
        let cfg = SessionConfig {
            base_url: server.signal_url.clone(),
            send_for: Duration::MAX,
            udp: false,
            tcp: true,
            ..SessionConfig::default()
        };
        let i = fleet.open(cfg).expect("the new caller's POST");
        caller = Some(i);
        let asked = Instant::now();
        while t0.elapsed() < ATTACK {
            neighbour.drive_for(Duration::from_millis(20));
            fleet.run_for(Duration::from_millis(20));
            if connected_after.is_none() && fleet.session(i).is_connected() {
                connected_after = Some(asked.elapsed());
                open_when_connected = metric_sum(&metrics(&server), "voxgate_tcp_connections", &[]);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let attack_end = wall();
    let rss_after = rss_kib(server.pid());
    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let gaps: Vec<f64> = neighbour.rtp_arrivals[arrivals_before..]
        .windows(2)
        .filter(|w| w[1] >= attack_start + Duration::from_millis(100) && w[1] < attack_end)
        .map(|w| w[1].saturating_sub(w[0]).as_secs_f64() * 1000.0)
        .collect();
    let heard = gaps.len();
    let (median, p99, max) = gap_stats(gaps);
    let answered = answered.load(Ordering::Relaxed);
    let idle = closed_count(&server, "idle_timeout");
    let session_cap = closed_count(&server, "session_cap");
    let refused = closed_count(&server, "unauthenticated") + closed_count(&server, "global_cap");
    eprintln!(
        "tcp lock-out: {answered} connections answered, at most {} held by the attacker; closed: \
         {idle} idle, {session_cap} past the session's share, {refused} refused; new caller \
         connected after {connected_after:?} with {open_when_connected} connections open; RSS \
         {rss_before} -> {rss_after} KiB; neighbour: {frames} uplink frames at the backend, \
         {heard} downlink packets, gaps median {median:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
        held_most.load(Ordering::Relaxed)
    );
    assert!(
        answered >= SLOTS as u64,
        "the attacker opened only {answered} connections with its check"
    );
    let connected_after = connected_after.unwrap_or_else(|| {
        panic!(
            "a new TCP caller could not connect while the attack held the loop: {:?}\n{}",
            fleet.report(caller.unwrap()),
            server.log_tail(30)
        )
    });
    assert!(connected_after < Duration::from_secs(8));
    // The attacker holds no more than a session's share, junk keeps none of them, and each
    // close is counted.
    assert!(
        open_when_connected <= 8 + 1,
        "{open_when_connected} connections open"
    );
    assert!(
        idle >= 1,
        "junk-fed connections closed at their idle timeout"
    );
    assert!(
        session_cap >= 1,
        "connections past the session's share closed"
    );
    assert!(
        rss_after <= rss_before + 16 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    // The neighbour keeps its pace both ways: 16 s of 20 ms frames is 800.
    assert!(
        frames >= 720,
        "the backend got {frames} of ~800 uplink frames"
    );
    assert!(
        heard >= 720,
        "the neighbour heard {heard} of ~800 downlink packets"
    );
    assert!(
        max <= 100.0,
        "a downlink gap of {max:.1} ms (p99 {p99:.1} ms)"
    );
}

#[test]
fn a_deleted_sessions_tcp_connections_are_closed_at_once() {
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    let listener = SocketAddr::from((Ipv4Addr::LOCALHOST, server.media_base_port));
    let mut attacker = connected_caller(&server, None);
    let id = attacker.session.session_id().to_string();
    let check = attacker.capture_check(Duration::from_secs(10));
    let mut conns: Vec<TcpStream> = (0..4)
        .map(|k| {
            open_with_check(listener, Ipv4Addr::LOCALHOST.into(), &check)
                .unwrap_or_else(|| panic!("connection {k} was not answered"))
        })
        .collect();
    let r = http_delete(&server.url(&format!("/v1/sessions/{id}")), None);
    assert!(r.status < 300, "DELETE: {} {}", r.status, r.body);
    let deleted = Instant::now();
    for (k, c) in conns.iter_mut().enumerate() {
        let (_, closed) = read_until_closed(c, Duration::from_secs(3));
        assert!(
            closed,
            "connection {k} of the deleted session still open after {:?}",
            deleted.elapsed()
        );
    }
    let ended = wait_metric(
        &server,
        "voxgate_tcp_closed_total",
        &["reason=\"session_ended\""],
        4,
    );
    assert_eq!(ended, 4);
}

#[test]
fn junk_never_keeps_a_tcp_connection_open_and_answered_checks_do() {
    let server =
        ServerProcess::start(&["--loops", "1", "--no-pin", "--tcp-idle-timeout-secs", "3"]);
    let listener = SocketAddr::from((Ipv4Addr::LOCALHOST, server.media_base_port));
    let mut attacker = connected_caller(&server, None);
    let check = attacker.capture_check(Duration::from_secs(10));
    let local = IpAddr::from(Ipv4Addr::LOCALHOST);
    let mut junk = open_with_check(listener, local, &check).expect("answered");
    let mut checked = open_with_check(listener, local, &check).expect("answered");
    let framed_check = encode_frame(&check).unwrap();
    let opened = Instant::now();
    let mut junk_closed_after = None;
    let mut answers = 0;
    let mut fed = opened;
    while opened.elapsed() < Duration::from_secs(8) {
        attacker.drive_for(Duration::from_millis(50));
        if fed.elapsed() >= Duration::from_secs(1) {
            fed = Instant::now();
            let _ = junk.write_all(&JUNK);
            checked
                .write_all(&framed_check)
                .expect("the checked connection is open");
            let answer = read_frame(&mut checked).expect("an answer to the check");
            answers += usize::from(answer[..2] == [0x01, 0x01]);
        }
        if junk_closed_after.is_none() && is_closed(&mut junk) {
            junk_closed_after = Some(opened.elapsed());
        }
    }
    let junk_closed_after = junk_closed_after.expect("the junk-fed connection was never closed");
    assert!(
        junk_closed_after >= Duration::from_millis(2500)
            && junk_closed_after <= Duration::from_secs(5),
        "closed by the 3 s idle timeout, after {junk_closed_after:?}"
    );
    assert!(answers >= 6, "{answers} checks answered");
    assert!(
        !is_closed(&mut checked),
        "a connection whose checks are answered stays open"
    );
    assert_eq!(closed_count(&server, "idle_timeout"), 1);
}

#[test]
fn ipv6_callers_are_capped_per_slash_56_and_per_slash_48_too() {
    use voxgate_fleet_tests::netns::{check_privileges, ipv6_in, Network};
    if let Err(e) = check_privileges() {
        eprintln!("skipped: {e}");
        return;
    }
    // One host whose loopback owns all of 2001:db8::/32, so any address in it can connect.
    let net = Network::loopback_owning("vgv6t-", "2001:db8::/32").unwrap();
    let counts = net.run_in("host", || {
        let listener: SocketAddr = "[2001:db8::1]:47000".parse().unwrap();
        let server = ServerProcess::start(&[
            "--loops",
            "1",
            "--no-pin",
            "--tcp-listen",
            &listener.to_string(),
            "--tcp-first-frame-timeout-secs",
            "60",
        ]);
        let mut held = Vec::new();
        // One /56 (2001:db8:0:100::/56): 16 connections (the per-/64 cap) from each of 8 /64s.
        let slash_56: Ipv6Addr = "2001:db8:0:100::".parse().unwrap();
        for n in 0..8 {
            for host in 1..=16 {
                held.push(connect_from(listener, ipv6_in(slash_56, n, host)).unwrap());
            }
        }
        // One /48 (2001:db8:1::/48): 64 connections (the per-/56 cap) from each of 8 /56s.
        let slash_48: Ipv6Addr = "2001:db8:1::".parse().unwrap();
        for n56 in 0..8u16 {
            for n64 in 0..4u16 {
                for host in 1..=16 {
                    let from = ipv6_in(slash_48, (n56 << 8) | n64, host);
                    held.push(connect_from(listener, from).unwrap());
                }
            }
        }
        // Another network is served at once.
        let other = connect_from(listener, "2001:db8:2::1".parse::<IpAddr>().unwrap()).unwrap();
        let per_56 = wait_metric(
            &server,
            "voxgate_tcp_closed_total",
            &["reason=\"per_56_cap\""],
            64,
        );
        let per_48 = wait_metric(
            &server,
            "voxgate_tcp_closed_total",
            &["reason=\"per_48_cap\""],
            256,
        );
        let text = metrics(&server);
        let per_ip = metric_sum(
            &text,
            "voxgate_tcp_closed_total",
            &["reason=\"per_ip_cap\""],
        );
        let open = metric_sum(&text, "voxgate_tcp_connections", &[]);
        drop((held, other));
        (per_56, per_48, per_ip, open)
    });
    let (per_56, per_48, per_ip, open) = counts;
    assert_eq!(per_56, 64, "128 from one /56, 64 allowed");
    assert_eq!(per_48, 256, "512 from one /48, 256 allowed");
    assert_eq!(per_ip, 0, "no /64 went past its own cap");
    assert_eq!(open, 64 + 256 + 1);
}
