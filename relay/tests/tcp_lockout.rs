//! ICE-TCP lock-out of the relay (issue 37, item 3), against the real relay process. A
//! connection whose first frame carries a valid hint (of a session long deleted, with a wrong
//! password) used to go straight to forwarding and live on its own client's frames: ten
//! thousand of them held the relay's whole TCP tier. Here such a connection stays tentative
//! until the transceiver answers on it (capped, the oldest evicted, closed at the tentative
//! timeout), an established one lives on the transceiver's replies and not on what its client
//! sends, a new TCP caller connects during the attack and a neighbour's call keeps its pace;
//! and the caps per IPv6 /56 and /48 are tried from many addresses, in a network namespace of
//! the test's own.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::stack::{start_echo_bot_with, start_transceiver, Transceiver};
use common::*;
use voxgate_proto::rfc4571::{encode_frame, read_frame, write_frame};
use voxgate_testkit::{Fleet, SessionConfig};

/// What kept a connection before: one RFC 4571 frame of one byte, 3 bytes on the wire.
const JUNK: [u8; 3] = [0, 1, 0x42];

fn closed(relay: &RelayProcess, reason: &str) -> f64 {
    relay.metric(
        "voxgate_relay_tcp_connections_closed_total",
        &[("reason", reason)],
    )
}

/// Whether the relay has closed `s` (EOF or reset), without waiting; what it sent is dropped.
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

fn session_json(t: &Transceiver, location: &str) -> serde_json::Value {
    reqwest::blocking::get(format!("{}{location}", t.signal_url))
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn connections_for_a_deleted_session_cannot_lock_out_the_relays_tcp_tier() {
    const SLOTS: usize = 300;
    const ATTACK: Duration = Duration::from_secs(16);
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--tcp-max-connections", &SLOTS.to_string()]);
    let t = start_transceiver(relay.public, 0, 1);
    // Plays back what each caller says, in one-second pieces, for as long as it talks.
    let _bot = start_echo_bot_with(&t, None, &["--continuous", "--max-utterance-secs", "1"]);
    let caller = |send_for| SessionConfig {
        base_url: t.signal_url.clone(),
        tone_hz: 500.0,
        send_for,
        data_channel: false,
        udp: false,
        tcp: true,
        ..Default::default()
    };
    let mut fleet = Fleet::new().unwrap();
    // A session that is then deleted: its hint stays valid for a day.
    let gone = fleet.open(caller(Duration::ZERO)).unwrap();
    let gone_location = fleet.report(gone).location;
    let gone_ufrag = session_json(&t, &gone_location)["server_ufrag"]
        .as_str()
        .unwrap()
        .to_owned();
    fleet.delete(gone).unwrap();
    // The neighbour: a TCP caller through the relay, hearing its own tone back.
    let neighbour = fleet.open(caller(Duration::MAX)).unwrap();
    let heard_echo = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        f.report(neighbour).audio_packets_received >= 50
    });
    assert!(heard_echo, "{:?}", fleet.report(neighbour));
    let location = fleet.report(neighbour).location;
    let check = encode_frame(&binding_request(&gone_ufrag)).unwrap();

    let rss_before = rss_kib(&relay);
    let uplink_before = session_json(&t, &location)["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();
    let downlink_before = fleet.report(neighbour).audio_packets_received;
    let arrivals_before = fleet.session(neighbour).arrival_times().len();
    let stop = AtomicBool::new(false);
    let opened = AtomicU64::new(0);
    let mut newcomer = None;
    let mut connected_after = None;
    let attack_start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Keeps SLOTS + 60 connections from six addresses (within the per-IP cap), each
            // opened with the dead session's check and fed junk every second.
            let mut conns: Vec<(TcpStream, Instant)> = Vec::new();
            let mut next_ip = 0u8;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..8 {
                    if conns.len() >= SLOTS + 60 {
                        break;
                    }
                    let ip = IpAddr::from(Ipv4Addr::new(127, 0, 0, 2 + next_ip % 6));
                    next_ip = next_ip.wrapping_add(1);
                    let mut c = tcp_from(ip, relay.public, 1000);
                    if c.write_all(&check).is_ok() {
                        opened.fetch_add(1, Ordering::Relaxed);
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
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        // The attack fills the tier; more than a tentative timeout passes.
        fleet.run_for(Duration::from_secs(7));
        let i = fleet.open(caller(Duration::MAX)).unwrap();
        newcomer = Some(i);
        let asked = Instant::now();
        while attack_start.elapsed() < ATTACK {
            fleet.run_for(Duration::from_millis(20));
            if connected_after.is_none() && fleet.session(i).is_connected() {
                connected_after = Some(asked.elapsed());
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let secs = attack_start.elapsed().as_secs_f64();
    let rss_after = rss_kib(&relay);
    let uplink = session_json(&t, &location)["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap()
        - uplink_before;
    let downlink = fleet.report(neighbour).audio_packets_received - downlink_before;
    let arrivals = fleet.session(neighbour).arrival_times();
    let max_gap = arrivals[arrivals_before.saturating_sub(1)..]
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .max()
        .unwrap_or_default();
    let opened = opened.load(Ordering::Relaxed);
    let tentative_timeout = closed(&relay, "tentative_timeout");
    let evicted = closed(&relay, "tentative_evicted");
    let refused = relay.metric("voxgate_relay_tcp_connections_refused_total", &[]);
    eprintln!(
        "relay tcp lock-out: {opened} connections opened with the dead session's check; \
         {tentative_timeout} closed at the tentative timeout, {evicted} evicted, {refused} \
         refused; new caller connected after {connected_after:?}; RSS {rss_before} -> \
         {rss_after} KiB; neighbour over {secs:.1} s: {uplink} uplink packets at the \
         transceiver, {downlink} downlink packets, largest gap {max_gap:?}"
    );
    assert!(
        opened >= SLOTS as u64,
        "the attack opened only {opened} connections"
    );
    let connected_after = connected_after.unwrap_or_else(|| {
        panic!(
            "a new TCP caller could not connect through the relay during the attack: {:?}\n{}",
            fleet.report(newcomer.unwrap()),
            relay.log_text()
        )
    });
    assert!(connected_after < Duration::from_secs(8));
    assert!(
        tentative_timeout + evicted >= SLOTS as f64,
        "the attacker's connections were closed and counted"
    );
    assert!(
        rss_after <= rss_before + 8 * 1024,
        "relay memory grew from {rss_before} to {rss_after} KiB"
    );
    // The neighbour keeps its pace both ways (50 packets a second each way).
    let expected = (secs * 50.0) as u64;
    assert!(
        uplink >= expected * 9 / 10,
        "the transceiver got {uplink} of ~{expected} uplink packets"
    );
    assert!(
        downlink >= expected * 8 / 10,
        "the neighbour heard {downlink} of ~{expected} downlink packets"
    );
    assert!(
        max_gap <= Duration::from_millis(250),
        "a downlink gap of {max_gap:?}"
    );
}

#[test]
fn a_connection_the_transceiver_never_answers_is_closed_at_the_tentative_timeout() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &[]);
    let lp = FakeLoop::new();
    let mut c = tcp_from(Ipv4Addr::LOCALHOST.into(), relay.public, 1000);
    write_frame(&mut c, &binding_request(&hint(0, lp.addr()))).unwrap();
    assert!(lp.recv().is_some(), "the first frame is forwarded");
    let opened = Instant::now();
    let mut closed_after = None;
    while opened.elapsed() < Duration::from_secs(10) {
        let _ = c.write_all(&JUNK);
        if is_closed(&mut c) {
            closed_after = Some(opened.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let closed_after = closed_after.expect("the unanswered connection was never closed");
    assert!(
        closed_after >= Duration::from_millis(4500) && closed_after <= Duration::from_secs(7),
        "closed by the 5 s tentative timeout, after {closed_after:?}"
    );
    let counted = relay.wait_metric(
        "voxgate_relay_tcp_connections_closed_total",
        &[("reason", "tentative_timeout")],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    assert_eq!(counted, 1.0);
}

#[test]
fn an_established_connection_lives_on_the_transceivers_replies_not_on_its_clients_frames() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--tcp-idle-timeout-secs", "3"]);
    let lp = FakeLoop::new();
    let open = || {
        let mut c = tcp_from(Ipv4Addr::LOCALHOST.into(), relay.public, 2000);
        write_frame(&mut c, &binding_request(&hint(0, lp.addr()))).unwrap();
        let relayed = lp.recv().expect("the first frame is forwarded");
        lp.reply_tcp(&relayed, b"answer");
        assert_eq!(read_frame(&mut c).unwrap(), b"answer");
        (c, relayed)
    };
    // Its session ended: the transceiver stops answering; the client goes on sending.
    let (mut orphan, _) = open();
    // A live call: every frame of its client is answered.
    let (mut live, live_relayed) = open();
    let opened = Instant::now();
    let mut orphan_closed_after = None;
    let mut answers = 0;
    while opened.elapsed() < Duration::from_secs(8) {
        let _ = orphan.write_all(&JUNK);
        live.write_all(&encode_frame(b"media").unwrap()).unwrap();
        while let Some(got) = lp.recv() {
            if got.header == live_relayed.header {
                lp.reply_tcp(&got, b"reply");
                assert_eq!(read_frame(&mut live).unwrap(), b"reply");
                answers += 1;
                break;
            }
        }
        if orphan_closed_after.is_none() && is_closed(&mut orphan) {
            orphan_closed_after = Some(opened.elapsed());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let after = orphan_closed_after.expect("the unanswered connection was never closed");
    assert!(
        after >= Duration::from_millis(2500) && after <= Duration::from_secs(5),
        "closed by the 3 s idle timeout, after {after:?}"
    );
    assert!(answers >= 12, "{answers} replies to the live connection");
    assert!(!is_closed(&mut live), "the answered connection stays open");
    assert_eq!(closed(&relay, "idle_timeout"), 1.0);
}

#[test]
fn ipv6_clients_are_capped_per_slash_56_and_per_slash_48_too() {
    use voxgate_fleet_tests::netns::{check_privileges, ipv6_in, Network};
    if let Err(e) = check_privileges() {
        eprintln!("skipped: {e}");
        return;
    }
    // One host whose loopback owns all of 2001:db8::/32, so any address in it can connect.
    let net = Network::loopback_owning("vgv6r-", "2001:db8::/32").unwrap();
    let counts = net.run_in("host", || {
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let ports = RelayPorts::new(1);
        let relay =
            RelayProcess::start_on(ip, &ports, 1, &["--tcp-first-frame-timeout-secs", "60"]);
        let mut held = Vec::new();
        // One /56 (2001:db8:0:100::/56): 64 connections (the per-/64 cap) from each of 8 /64s.
        let slash_56: Ipv6Addr = "2001:db8:0:100::".parse().unwrap();
        for n in 0..8 {
            for host in 1..=64 {
                held.push(tcp_from(ipv6_in(slash_56, n, host), relay.public, 1000));
            }
        }
        // One /48 (2001:db8:1::/48): 256 connections (the per-/56 cap) from each of 8 /56s.
        let slash_48: Ipv6Addr = "2001:db8:1::".parse().unwrap();
        for n56 in 0..8u16 {
            for n64 in 0..4u16 {
                for host in 1..=64 {
                    let from = ipv6_in(slash_48, (n56 << 8) | n64, host);
                    held.push(tcp_from(from, relay.public, 1000));
                }
            }
        }
        // Another network is served at once.
        let other = tcp_from("2001:db8:2::1".parse().unwrap(), relay.public, 1000);
        let refused = |reason: &str, want: f64| {
            relay.wait_metric(
                "voxgate_relay_tcp_connections_refused_total",
                &[("reason", reason)],
                Duration::from_secs(15),
                |v| v >= want,
            )
        };
        let per_56 = refused("per_56_cap", 256.0);
        let per_48 = refused("per_48_cap", 1024.0);
        let per_ip = relay.metric(
            "voxgate_relay_tcp_connections_refused_total",
            &[("reason", "per_ip_cap")],
        );
        let open = relay.wait_metric(
            "voxgate_relay_tcp_connections_open",
            &[],
            Duration::from_secs(5),
            |v| v <= 256.0 + 1024.0 + 1.0,
        );
        drop((held, other));
        (per_56, per_48, per_ip, open)
    });
    let (per_56, per_48, per_ip, open) = counts;
    assert_eq!(per_56, 256.0, "512 from one /56, 256 allowed");
    assert_eq!(per_48, 1024.0, "2048 from one /48, 1024 allowed");
    assert_eq!(per_ip, 0.0, "no /64 went past its own cap");
    assert_eq!(open, 256.0 + 1024.0 + 1.0);
}
