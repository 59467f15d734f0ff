//! ICE over TCP (issue 13) against the real transceiver process: a testkit client over TCP
//! hears the echo-bot; a call moves from UDP to TCP when UDP gets blocked and keeps its media;
//! relayed TCP through a hand-rolled fake relay gets v2 replies with its connection id; and bad
//! direct TCP input is never answered while caps hold and other calls keep their media.
//!
//! The echo-bot binary comes from `cargo build --workspace --bins` (as `scripts/test` does).

mod support;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::backend::{tone, TestWorker};
use support::raw_tcp::{connect_from, read_until_closed};
use support::{
    binding_request, drive_fleet_until, metric_sum, metrics, snapshot, transceiver_bin,
    wait_metric, ServerProcess,
};
use voxgate_proto::relay_header::{Direction, RelayHeader, Transport, MAX_HEADER_LEN};
use voxgate_proto::rfc4571::{self, encode_frame};
use voxgate_testkit::{signal, Fleet, SessionConfig};

/// The transports of a session's authenticated paths, as the server reports them.
fn path_transports(snap: &serde_json::Value) -> Vec<String> {
    snap["client_paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["transport"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn caller(server: &ServerProcess, udp: bool, tcp: bool) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        tone_hz: 600.0,
        amplitude: 0.3,
        send_for: Duration::from_secs(1),
        udp,
        tcp,
        ..SessionConfig::default()
    }
}

/// 20 ms frames (48 kHz) of `pcm` louder than -30 dBFS.
fn loud_frames(pcm: &[i16]) -> usize {
    pcm.chunks_exact(signal::FRAME_SAMPLES)
        .filter(|f| {
            let sq: f64 = f.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
            let rms = (sq / f.len() as f64).sqrt() / 32768.0;
            20.0 * rms.max(1e-9).log10() > -30.0
        })
        .count()
}

/// The echo-bot process subscribed to `server`, stopped on drop.
struct EchoBot(Child, PathBuf);

impl EchoBot {
    fn start(server: &ServerProcess) -> EchoBot {
        let bin = transceiver_bin().with_file_name("echo-bot");
        assert!(
            bin.exists(),
            "{} is missing: run `cargo build --workspace --bins` first",
            bin.display()
        );
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("ice-tcp-echo-bot-{}.log", std::process::id()));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(bin)
            .args(["--transceiver", &server.grpc_url])
            .args(["--worker-id", "tcp-echo", "--silence-ms", "400"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out)
            .spawn()
            .expect("spawn echo-bot");
        let bot = EchoBot(child, log);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !bot.output().contains("registered") {
            assert!(
                Instant::now() < deadline,
                "echo-bot did not register:\n{}",
                bot.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        bot
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

impl Drop for EchoBot {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_tcp_only_caller_hears_the_echo_bot_in_direct_mode() {
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    let bot = EchoBot::start(&server);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(caller(&server, false, true)).expect("open");
    assert!(
        drive_fleet_until(&mut fleet, Duration::from_secs(15), |f| f
            .session(i)
            .is_connected()),
        "no TCP connection: {:?}\n{}",
        fleet.report(i),
        server.log_tail(40)
    );
    // 1 s of tone, the bot's 400 ms silence window, then 1 s of reply.
    let heard = drive_fleet_until(&mut fleet, Duration::from_secs(10), |f| {
        loud_frames(f.session(i).received_pcm()) >= 45
    });
    let report = fleet.report(i);
    assert!(
        heard,
        "no echo over TCP: {report:?}\nbot:\n{}",
        bot.output()
    );
    let hz = signal::dominant_frequency(fleet.session(i).received_pcm(), signal::SAMPLE_RATE);
    assert!((hz - 600.0).abs() < 5.0, "echo at {hz} Hz");
    assert_eq!(
        report.tcp_frames_received, report.datagrams_received,
        "everything came over TCP"
    );
    let snap = snapshot(&server, &report.session_id);
    assert_eq!(path_transports(&snap), vec!["tcp"], "{snap}");
    let m = metrics(&server);
    assert_eq!(metric_sum(&m, "voxgate_tcp_connections", &[]), 1, "{m}");
    assert!(metric_sum(&m, "voxgate_tcp_frames_out_total", &[]) > 50);
    fleet.delete(i).expect("delete");
}

#[test]
fn a_call_moves_from_udp_to_tcp_when_udp_is_blocked_and_keeps_its_media() {
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    let mut fleet = Fleet::new().unwrap();
    let mut cfg = caller(&server, true, true);
    cfg.send_for = Duration::MAX;
    let i = fleet.open(cfg).expect("open");
    assert!(drive_fleet_until(
        &mut fleet,
        Duration::from_secs(15),
        |f| { f.session(i).is_connected() && worker.attached().len() == 1 }
    ));
    let id = fleet.report(i).session_id;
    worker.play(&id, &tone(700.0, 60.0, 48_000), "long");
    // UDP wins while both work: media arrives over UDP.
    assert!(drive_fleet_until(
        &mut fleet,
        Duration::from_secs(10),
        |f| f.report(i).audio_packets_received >= 100
    ));
    let before = fleet.report(i);
    assert!(
        before.tcp_frames_received * 10 < before.datagrams_received,
        "media came over UDP first: {before:?}"
    );
    let uplink_before = snapshot(&server, &id)["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();

    fleet.set_udp_blocked(i, true);
    // ICE gives up the UDP pair and nominates TCP; media resumes over it, both ways. The
    // client's str0m declares the silent UDP pair failed after its check timeouts (~25-30 s
    // here), so the budget is generous.
    let moved = drive_fleet_until(&mut fleet, Duration::from_secs(60), |f| {
        f.report(i).tcp_frames_received >= before.tcp_frames_received + 150
    });
    let after = fleet.report(i);
    assert!(
        moved,
        "media did not move to TCP: {after:?}\n{}",
        server.log_tail(40)
    );
    assert!(
        after.audio_packets_received >= before.audio_packets_received + 100,
        "downlink audio continued over TCP: {before:?} -> {after:?}"
    );
    let snap = snapshot(&server, &id);
    assert_eq!(snap["state"], "connected", "same session, still up: {snap}");
    assert!(path_transports(&snap).contains(&"tcp".to_owned()), "{snap}");
    let uplink_after = snap["counters"]["audio_packets_in"].as_u64().unwrap();
    // Uplink keeps arriving after the switch (50 packets/s; allow a gap of several seconds).
    let t = Instant::now();
    fleet.run_for(Duration::from_secs(2));
    let uplink_later = snapshot(&server, &id)["counters"]["audio_packets_in"]
        .as_u64()
        .unwrap();
    assert!(uplink_after > uplink_before, "uplink during the move");
    assert!(
        uplink_later >= uplink_after + (t.elapsed().as_millis() as u64 / 20) / 2,
        "uplink over TCP: {uplink_after} -> {uplink_later}"
    );
    assert!(!fleet.session(i).is_closed());
}

// ---- Relayed TCP, through a hand-rolled fake relay ----------------------------------------------

const CONN_ID: u32 = 0xC0FF_EE01;

#[derive(Default)]
struct RelayStats {
    frames_to_transceiver: AtomicU64,
    replies_ok: AtomicU64,
    replies_bad: AtomicU64,
}

/// Terminates one client TCP connection (RFC 4571) and forwards each frame to the loop as a v2
/// datagram with [`CONN_ID`]; writes back replies that carry the same id.
struct FakeRelay {
    stats: Arc<RelayStats>,
    stop: Arc<AtomicBool>,
}

impl FakeRelay {
    fn start(listener: TcpListener, loop_addr: SocketAddr) -> FakeRelay {
        let udp = Arc::new(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap());
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let stats = Arc::new(RelayStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (stats.clone(), stop.clone());
        std::thread::spawn(move || {
            let Ok((stream, peer)) = listener.accept() else {
                return;
            };
            let mut writer = stream.try_clone().unwrap();
            let (udp2, st2, sp2) = (udp.clone(), st.clone(), sp.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !sp2.load(Ordering::Relaxed) {
                    let Ok((n, _)) = udp2.recv_from(&mut buf) else {
                        continue;
                    };
                    match RelayHeader::decode(&buf[..n]) {
                        Ok((h, payload))
                            if h.direction == Direction::ToClient
                                && h.transport == (Transport::Tcp { conn: CONN_ID })
                                && h.client == peer
                                && buf[0] == voxgate_proto::relay_header::MAGIC_V2 =>
                        {
                            st2.replies_ok.fetch_add(1, Ordering::Relaxed);
                            if rfc4571::write_frame(&mut writer, payload).is_err() {
                                return;
                            }
                        }
                        _ => {
                            st2.replies_bad.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
            let mut reader = stream;
            while !sp.load(Ordering::Relaxed) {
                let Ok(frame) = rfc4571::read_frame(&mut reader) else {
                    return;
                };
                let mut dgram = [0u8; MAX_HEADER_LEN].to_vec();
                let h = RelayHeader {
                    direction: Direction::ToTransceiver,
                    client: peer,
                    transport: Transport::Tcp { conn: CONN_ID },
                };
                let hl = h.encode(&mut dgram).unwrap();
                dgram.truncate(hl);
                dgram.extend_from_slice(&frame);
                let _ = udp.send_to(&dgram, loop_addr);
                st.frames_to_transceiver.fetch_add(1, Ordering::Relaxed);
            }
        });
        FakeRelay { stats, stop }
    }
}

impl Drop for FakeRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn relayed_tcp_replies_come_back_v2_with_the_same_conn_id_and_untrusted_sources_are_dropped() {
    // The fake relay's TCP listener is what the answer advertises; only 127.0.0.1 is a relay.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let advertised = listener.local_addr().unwrap().to_string();
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--no-pin",
        "--relays",
        "127.0.0.1/32",
        "--advertise",
        &advertised,
    ]);
    let loop_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, server.media_base_port));
    let relay = FakeRelay::start(listener, loop_addr);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    let mut fleet = Fleet::new().unwrap();
    let mut cfg = caller(&server, false, true);
    cfg.send_for = Duration::MAX;
    let i = fleet.open(cfg).expect("open");
    assert!(
        drive_fleet_until(&mut fleet, Duration::from_secs(15), |f| {
            f.session(i).is_connected() && worker.attached().len() == 1
        }),
        "no connection through the fake relay: {:?}\n{}",
        fleet.report(i),
        server.log_tail(40)
    );
    let id = fleet.report(i).session_id;
    worker.play(&id, &tone(700.0, 10.0, 48_000), "reply");
    assert!(drive_fleet_until(
        &mut fleet,
        Duration::from_secs(10),
        |f| f.report(i).audio_packets_received >= 100
    ));
    let snap = snapshot(&server, &id);
    assert!(
        snap["counters"]["audio_packets_in"].as_u64().unwrap() >= 50,
        "{snap}"
    );
    assert_eq!(path_transports(&snap), vec!["tcp"], "{snap}");
    assert_eq!(snap["relays"].as_array().map(Vec::len), Some(1), "{snap}");
    let ok = relay.stats.replies_ok.load(Ordering::Relaxed);
    assert!(ok >= 100, "v2 replies with conn {CONN_ID:#x}: {ok}");
    assert_eq!(
        relay.stats.replies_bad.load(Ordering::Relaxed),
        0,
        "every reply is v2, ToClient, conn {CONN_ID:#x}, for the client"
    );
    assert!(relay.stats.frames_to_transceiver.load(Ordering::Relaxed) >= 50);

    // The same framing from 127.0.0.2 (not in --relays): dropped, counted, never answered.
    let before = metric_sum(
        &metrics(&server),
        "voxgate_dropped_datagrams_total",
        &["reason=\"relay_not_allowed\""],
    );
    let ufrag = snap["server_ufrag"].as_str().unwrap().to_owned();
    let rogue = UdpSocket::bind("127.0.0.2:0").unwrap();
    let h = RelayHeader {
        direction: Direction::ToTransceiver,
        client: SocketAddr::from(([127, 0, 0, 9], 5555)),
        transport: Transport::Tcp { conn: CONN_ID },
    };
    for txid in 0..20u32 {
        let mut dgram = vec![0u8; MAX_HEADER_LEN];
        let n = h.encode(&mut dgram).unwrap();
        dgram.truncate(n);
        dgram.extend_from_slice(&binding_request(&ufrag, txid));
        rogue.send_to(&dgram, loop_addr).unwrap();
    }
    let dropped = wait_metric(
        &server,
        "voxgate_dropped_datagrams_total",
        &["reason=\"relay_not_allowed\""],
        before + 20,
    );
    assert_eq!(dropped, before + 20);
    rogue
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 2048];
    assert!(rogue.recv_from(&mut buf).is_err(), "nothing answered");
    fleet.delete(i).expect("delete");
}

// ---- Bad direct TCP input -----------------------------------------------------------------------

/// Connects from `from_ip`, sends `bytes`, and waits up to `within` for the server to close
/// the connection. Returns (bytes the server sent, whether it closed).
fn probe(to: SocketAddr, from_ip: Ipv4Addr, bytes: &[u8], within: Duration) -> (usize, bool) {
    let s = connect_from(to, from_ip);
    let mut s = s.expect("connect");
    let _ = s.write_all(bytes);
    read_until_closed(&mut s, within)
}

fn closed_count(server: &ServerProcess, reason: &str) -> u64 {
    metric_sum(
        &metrics(server),
        "voxgate_tcp_closed_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

#[test]
fn bad_tcp_input_is_never_answered_caps_hold_and_other_calls_keep_their_media() {
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--no-pin",
        "--tcp-max-conns-per-ip",
        "8",
        "--tcp-max-conns",
        "20",
        "--tcp-first-frame-timeout-secs",
        "3",
        "--opus-bitrate",
        "128000",
    ]);
    let tcp = SocketAddr::from((Ipv4Addr::LOCALHOST, server.media_base_port));
    let worker = TestWorker::start(&server.grpc_url, "w1", 8, 48_000);
    let mut fleet = Fleet::new().unwrap();
    // A UDP caller and a TCP caller on the same loop, both hearing a long backend tone.
    let mut cfg = caller(&server, true, false);
    cfg.send_for = Duration::MAX;
    let udp_call = fleet.open(cfg.clone()).expect("udp caller");
    cfg.udp = false;
    cfg.tcp = true;
    let tcp_call = fleet.open(cfg.clone()).expect("tcp caller");
    // The slow reader: a TCP caller with a tiny receive window that stops reading.
    cfg.tcp_recv_buffer = Some(4096);
    let slow = fleet.open(cfg).expect("slow caller");
    assert!(drive_fleet_until(
        &mut fleet,
        Duration::from_secs(20),
        |f| { f.all_connected() && worker.attached().len() == 3 }
    ));
    let ids: Vec<String> = (0..3).map(|i| fleet.report(i).session_id).collect();
    for id in &ids {
        worker.play(id, &tone(700.0, 60.0, 48_000), "long");
    }
    let ufrag = snapshot(&server, &ids[udp_call])["server_ufrag"]
        .as_str()
        .unwrap()
        .to_owned();
    fleet.run_for(Duration::from_millis(500));
    let start = (
        fleet.report(udp_call).audio_packets_received,
        fleet.report(tcp_call).audio_packets_received,
    );
    let t0 = Instant::now();
    fleet.set_tcp_paused(slow, true);

    // Probes run on a thread while the fleet keeps both calls going.
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let live_ufrag = ufrag.clone();
    let prober = std::thread::spawn(move || {
        let local = Ipv4Addr::LOCALHOST;
        let wait = Duration::from_secs(5);
        let mut answered = 0;
        let mut unclosed = 0;
        let mut tally = |(got, closed): (usize, bool)| {
            answered += got;
            unclosed += usize::from(!closed);
        };
        for k in 0..20u8 {
            // Garbage: not STUN (first byte outside 0..=3).
            tally(probe(
                tcp,
                local,
                &encode_frame(&[0xFF, k, 1, 2, 3, 4, 5, 6]).unwrap(),
                wait,
            ));
        }
        for _ in 0..5 {
            // An empty frame carries nothing a datagram could: garbage too.
            tally(probe(tcp, local, &[0, 0], wait));
        }
        for _ in 0..20 {
            tally(probe(tcp, local, &[0xFF, 0xFF, 0, 0, 0], wait)); // 65535 > max frame
        }
        for txid in 0..20 {
            tally(probe(
                tcp,
                local,
                &encode_frame(&binding_request("nosuchufrag", txid)).unwrap(),
                wait,
            ));
        }
        for txid in 0..20 {
            // The live ufrag with a wrong MESSAGE-INTEGRITY: str0m answers nothing.
            tally(probe(
                tcp,
                local,
                &encode_frame(&binding_request(&live_ufrag, txid)).unwrap(),
                wait,
            ));
        }
        // Slow drip: a valid-looking first frame, one byte every 300 ms.
        let mut drip = TcpStream::connect(tcp).unwrap();
        let bytes = encode_frame(&binding_request(&live_ufrag, 99)).unwrap();
        let dripped_at = Instant::now();
        let mut closed_after = None;
        for b in bytes.iter() {
            if drip.write_all(&[*b]).is_err() {
                break;
            }
            let (got, closed) = read_until_closed(&mut drip, Duration::from_millis(300));
            answered += got;
            if closed {
                closed_after = Some(dripped_at.elapsed());
                break;
            }
        }
        d2.store(true, Ordering::Relaxed);
        (answered, unclosed, closed_after)
    });
    while !done.load(Ordering::Relaxed) {
        fleet.run_for(Duration::from_millis(50));
    }
    let (answered, unclosed, drip_closed) = prober.join().unwrap();
    assert_eq!(answered, 0, "no byte was ever answered");
    assert_eq!(unclosed, 0, "every bad connection was closed");
    let drip_closed = drip_closed.expect("the slow drip was closed");
    assert!(
        drip_closed >= Duration::from_secs(2) && drip_closed < Duration::from_secs(10),
        "closed by the 3 s first-frame timeout, after {drip_closed:?}"
    );
    assert_eq!(closed_count(&server, "garbage"), 25);
    assert_eq!(closed_count(&server, "oversize"), 20);
    assert_eq!(closed_count(&server, "unknown_ufrag"), 20);
    assert_eq!(closed_count(&server, "unauthenticated"), 20);
    assert_eq!(closed_count(&server, "first_frame_timeout"), 1);

    // Caps: 30 connections from 127.0.0.2 (8 stay), then 8 each from .3 and .4: the loop
    // holds 20 at most (2 callers + 18). All are held open while the counts are read.
    let mut held = Vec::new();
    for ip in [2u8, 3, 4] {
        let n = if ip == 2 { 30 } else { 8 };
        for _ in 0..n {
            held.push(connect_from(tcp, Ipv4Addr::new(127, 0, 0, ip)).expect("connect"));
        }
        fleet.run_for(Duration::from_millis(300));
    }
    let per_ip = wait_metric(
        &server,
        "voxgate_tcp_closed_total",
        &["reason=\"per_ip_cap\""],
        22,
    );
    let global = wait_metric(
        &server,
        "voxgate_tcp_closed_total",
        &["reason=\"global_cap\""],
        6,
    );
    let open = metric_sum(&metrics(&server), "voxgate_tcp_connections", &[]);
    assert_eq!(per_ip, 22, "30 from one IP, 8 allowed");
    // .3 gets 8 (2 + 8 + 8 = 18 open), .4 gets 2 before the loop is full.
    assert_eq!(global, 6, "20 connections per loop");
    assert_eq!(open, 20);
    let mut answered = 0;
    for s in &mut held {
        answered += read_until_closed(s, Duration::from_millis(1)).0;
    }
    assert_eq!(answered, 0);
    drop(held);

    // Meanwhile the slow reader's queue dropped, and the other calls kept their media.
    let dropped = wait_metric(&server, "voxgate_tcp_write_dropped_total", &[], 1);
    assert!(dropped >= 1, "the slow reader's write queue dropped frames");
    fleet.run_for(Duration::from_millis(500));
    let secs = t0.elapsed().as_secs_f64();
    let expected = (secs * 50.0) as u64;
    for (call, before) in [(udp_call, start.0), (tcp_call, start.1)] {
        let got = fleet.report(call).audio_packets_received - before;
        assert!(
            got >= expected * 8 / 10,
            "call {call} heard {got} of ~{expected} packets while under attack"
        );
    }
    for id in &ids[..2] {
        assert_eq!(snapshot(&server, id)["state"], "connected");
    }
}
