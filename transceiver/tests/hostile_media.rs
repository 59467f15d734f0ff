//! Hostile input on the media path, against the real transceiver process with real str0m
//! clients (testkit) and a real gRPC backend: spoofed relay frames, relay framing from
//! outside `--relays`, one session's client trying to take another's address, a tap flood,
//! a passthrough downlink far ahead of real time, and a junk flood at the loop's capacity.

mod support;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::backend::{tone, TestWorker};
use support::probe::{caller_config, gap_stats, rss_kib, TimestampedClient};
use support::{
    binding_request, drive_fleet_until, metric_sum, metrics, snapshot, wait_metric, ServerProcess,
};
use voxgate_proto::bridge::AudioMode;
use voxgate_proto::relay_header::{Direction, RelayHeader, MAX_HEADER_LEN};
use voxgate_testkit::client_session::ClientSession;
use voxgate_testkit::{Fleet, SessionConfig};

fn client(server: &ServerProcess) -> SessionConfig {
    caller_config(server)
}

/// A direct caller on a one-loop transceiver, owned by a backend that plays it a long tone.
struct Call {
    server: ServerProcess,
    worker: TestWorker,
    fleet: Fleet,
    id: String,
}

/// A caller of `server`, connected and attached to a new backend worker in `mode`.
fn connected_call(server: &ServerProcess, mode: AudioMode) -> (TestWorker, Fleet, String) {
    let worker = TestWorker::start_with_mode(&server.grpc_url, "w1", 8, 48_000, mode);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(client(server)).unwrap();
    assert!(drive_fleet_until(
        &mut fleet,
        Duration::from_secs(15),
        |f| { f.all_connected() && worker.attached().len() == 1 }
    ));
    let id = fleet.report(i).session_id;
    (worker, fleet, id)
}

fn call_with_downlink(args: &[&str], downlink_secs: f32) -> Call {
    let server = ServerProcess::start(args);
    let (worker, mut fleet, id) = connected_call(&server, AudioMode::Pcm);
    worker.play(&id, &tone(700.0, downlink_secs, 48_000), "reply");
    fleet.run_for(Duration::from_millis(300));
    Call {
        server,
        worker,
        fleet,
        id,
    }
}

/// `bytes` behind a relay header claiming it came from `client`.
fn framed(client: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; MAX_HEADER_LEN];
    let n = RelayHeader::udp(Direction::ToTransceiver, client)
        .encode(&mut buf)
        .expect("encode relay header");
    let mut v = buf[..n].to_vec();
    v.extend_from_slice(bytes);
    v
}

/// Whatever arrives on `sock` within `window`.
fn received_within(sock: &UdpSocket, window: Duration) -> usize {
    let deadline = Instant::now() + window;
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        if sock.recv_from(&mut buf).is_ok() {
            n += 1;
        }
    }
    n
}

#[test]
fn spoofed_relay_frames_reach_nobody_and_the_victims_downlink_goes_on() {
    // Loopback counts as a relay network here, so the forged frames pass the source check:
    // what is tested is that no unauthenticated datagram changes the victim's reply path.
    let Call {
        server,
        worker: _worker,
        mut fleet,
        id,
    } = call_with_downlink(&["--loops", "1", "--relays", "127.0.0.0/8"], 20.0);
    let victim = fleet.session(0).local_addr();
    let ufrag = fleet.session(0).server_ufrag().to_string();
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    let before = fleet.report(0).audio_packets_received;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let spoofer = {
        let attacker = attacker.try_clone().unwrap();
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            // Junk (as in the report), SRTP-looking and DTLS-looking bytes, and checks with
            // the victim's ufrag, all claiming the victim's address.
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let payload = match i % 4 {
                    0 => vec![0x42; 100],
                    1 => [&[0x80u8, 0x6f][..], &[0x11; 120]].concat(),
                    2 => [&[0x17u8, 0xfe, 0xfd][..], &[0x22; 60]].concat(),
                    _ => binding_request(&ufrag, i),
                };
                let _ = attacker.send_to(&framed(victim, &payload), media);
                sent.fetch_add(1, Ordering::Relaxed);
                i += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    fleet.run_for(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    spoofer.join().unwrap();
    let during = fleet.report(0).audio_packets_received - before;
    assert!(sent.load(Ordering::Relaxed) > 200, "the spoofer ran");
    assert_eq!(
        received_within(&attacker, Duration::from_millis(500)),
        0,
        "the attacker received the victim's datagrams"
    );
    // 2 s of downlink is 100 packets; a busy machine may delay a few past the window.
    assert!(during >= 80, "victim got {during} downlink packets in 2 s");
    let snap = snapshot(&server, &id);
    assert_eq!(snap["relays"].as_array().map(Vec::len), Some(0), "{snap}");
    assert_eq!(snap["client_addrs"][0], victim.to_string(), "{snap}");
    // And it keeps flowing after the attack.
    let before = fleet.report(0).audio_packets_received;
    fleet.run_for(Duration::from_secs(1));
    assert!(fleet.report(0).audio_packets_received - before >= 40);
}

#[test]
fn relay_frames_are_dropped_from_outside_relays_and_accepted_from_them() {
    // Default: no relay at all, so every framed datagram is dropped and counted.
    let direct = ServerProcess::start(&["--loops", "1"]);
    let media: SocketAddr = ([127, 0, 0, 1], direct.media_base_port).into();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let claimed: SocketAddr = "198.51.100.7:5000".parse().unwrap();
    for _ in 0..100 {
        sock.send_to(&framed(claimed, &[0x80; 50]), media).unwrap();
    }
    let reason = ["reason=\"relay_not_allowed\""];
    assert_eq!(
        wait_metric(&direct, "voxgate_dropped_datagrams_total", &reason, 100),
        100
    );
    drop(direct);

    // `--relays 127.0.0.2`: frames from 127.0.0.1 are refused, frames from 127.0.0.2 reach
    // the demux (where junk from an unknown client is dropped as unknown_source).
    let server = ServerProcess::start(&["--loops", "1", "--relays", "127.0.0.2"]);
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let outsider = UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay = UdpSocket::bind("127.0.0.2:0").unwrap();
    for _ in 0..50 {
        outsider
            .send_to(&framed(claimed, &[0x80; 50]), media)
            .unwrap();
        relay.send_to(&framed(claimed, &[0x80; 50]), media).unwrap();
    }
    let unknown = ["reason=\"unknown_source\""];
    assert_eq!(
        wait_metric(&server, "voxgate_dropped_datagrams_total", &unknown, 50),
        50
    );
    let text = metrics(&server);
    assert_eq!(
        metric_sum(&text, "voxgate_dropped_datagrams_total", &reason),
        50
    );

    // A real client through the "relay" socket connects; its answers come back framed.
    let mut relayed = RelayedClient::open(&server, &relay, "198.51.100.9:6000".parse().unwrap());
    assert!(
        relayed.drive_until(Duration::from_secs(15), |c| c.is_connected()),
        "a client behind the configured relay connects"
    );
    let snap = snapshot(&server, relayed.session.session_id());
    assert_eq!(snap["client_addrs"][0], "198.51.100.9:6000", "{snap}");
    assert_eq!(snap["relays"][0], relay.local_addr().unwrap().to_string());
}

/// A str0m client whose datagrams travel framed from `relay`, claiming address `claims`.
struct RelayedClient<'a> {
    session: ClientSession,
    relay: &'a UdpSocket,
    media: SocketAddr,
    claims: SocketAddr,
    /// Forward only STUN (ICE checks), as an attacker that only wants the address would.
    stun_only: bool,
    answers: usize,
}

impl<'a> RelayedClient<'a> {
    fn open(server: &ServerProcess, relay: &'a UdpSocket, claims: SocketAddr) -> Self {
        let cfg = client(server);
        let now = Instant::now();
        let (mut session, offer) = ClientSession::new(&cfg, claims, now).unwrap();
        let created = voxgate_testkit::signaling_client::SignalingClient::new()
            .unwrap()
            .create_session(&cfg.base_url, None, None, &offer)
            .unwrap();
        session.accept_created(Instant::now(), &created).unwrap();
        relay.set_nonblocking(true).unwrap();
        RelayedClient {
            session,
            relay,
            media: ([127, 0, 0, 1], server.media_base_port).into(),
            claims,
            stun_only: false,
            answers: 0,
        }
    }

    fn drive_until(&mut self, limit: Duration, pred: impl Fn(&ClientSession) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline {
            let now = Instant::now();
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
            }
            while let Some(t) = self.session.poll_transmit() {
                if self.stun_only && t.contents.first().is_none_or(|b| *b > 3) {
                    continue;
                }
                let _ = self
                    .relay
                    .send_to(&framed(self.claims, &t.contents), self.media);
            }
            while let Ok((n, _)) = self.relay.recv_from(&mut buf) {
                self.answers += 1;
                if let Ok((h, payload)) = RelayHeader::decode(&buf[..n]) {
                    let now = Instant::now();
                    self.session
                        .handle_datagram(now, self.media, h.client, payload);
                }
            }
            if pred(&self.session) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
}

#[test]
fn another_sessions_client_cannot_take_a_live_sessions_address() {
    // The attacker owns a session of its own (valid credentials) and relays its checks,
    // claiming the victim's address, through a source the transceiver trusts as a relay.
    let Call {
        server,
        worker,
        mut fleet,
        id,
    } = call_with_downlink(&["--loops", "1", "--relays", "127.0.0.0/8"], 30.0);
    let victim = fleet.session(0).local_addr();
    let relay = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut attacker = RelayedClient::open(&server, &relay, victim);
    attacker.stun_only = true;
    let attacker_id = attacker.session.session_id().to_string();
    let frames_before = worker.session(&id).unwrap().frames.len();
    let downlink_before = fleet.report(0).audio_packets_received;
    // Interleave: the victim's fleet and the attacker's checks, for 3 s.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        attacker.drive_until(Duration::from_millis(20), |_| false);
        fleet.run_for(Duration::from_millis(20));
    }
    let refused = wait_metric(
        &server,
        "voxgate_dropped_datagrams_total",
        &["reason=\"addr_held\""],
        1,
    );
    assert!(
        refused >= 1,
        "the attacker's checks were refused and counted"
    );
    assert_eq!(attacker.answers, 0, "no check answered for a held address");
    let theirs = snapshot(&server, &attacker_id);
    assert_eq!(
        theirs["client_addrs"].as_array().map(Vec::len),
        Some(0),
        "{theirs}"
    );
    let mine = snapshot(&server, &id);
    assert_eq!(mine["client_addrs"][0], victim.to_string(), "{mine}");
    // The victim's media kept flowing both ways.
    fleet.run_for(Duration::from_millis(500));
    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let downlink = fleet.report(0).audio_packets_received - downlink_before;
    assert!(
        frames >= 100,
        "backend got {frames} uplink frames in ~3.5 s"
    );
    assert!(
        downlink >= 100,
        "caller got {downlink} downlink packets in ~3.5 s"
    );
}

#[test]
fn taps_beyond_max_taps_are_refused_with_resource_exhausted() {
    use voxgate_proto::bridge::bridge_client::BridgeClient;
    use voxgate_proto::bridge::TapRequest;
    let server = ServerProcess::start(&["--loops", "1", "--max-taps", "4"]);
    let (_worker, fleet, id) = connected_call(&server, AudioMode::Pcm);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.grpc_url.clone();
    let (mut open, refused) = rt.block_on(async {
        let mut c = BridgeClient::connect(url).await.unwrap();
        let mut open = Vec::new();
        let mut refused = 0;
        for _ in 0..100 {
            let req = TapRequest {
                session_id: id.clone(),
                sample_rate_hz: 0,
                ..Default::default()
            };
            match c.tap(req).await {
                Ok(stream) => open.push(stream.into_inner()),
                Err(s) => {
                    assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
                    assert!(s.message().contains("max-taps"), "{s:?}");
                    refused += 1;
                }
            }
        }
        (open, refused)
    });
    assert_eq!((open.len(), refused), (4, 96));
    assert_eq!(
        wait_metric(
            &server,
            "voxgate_bridge_refused_total",
            &["reason=\"too_many_taps\""],
            96
        ),
        96
    );
    assert_eq!(snapshot(&server, &fleet.report(0).session_id)["taps"], 4);
    // A tap that hangs up frees its place.
    open.truncate(3);
    let id = fleet.report(0).session_id;
    let url = server.grpc_url.clone();
    let reopened = rt.block_on(async {
        let mut c = BridgeClient::connect(url).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let req = TapRequest {
                session_id: id.clone(),
                sample_rate_hz: 0,
                ..Default::default()
            };
            match c.tap(req).await {
                Ok(s) => return Some(s),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(_) => return None,
            }
        }
    });
    assert!(reopened.is_some(), "a freed tap place can be taken again");
}

#[test]
fn passthrough_downlink_is_bounded_at_30s_and_oversize_packets_are_dropped() {
    use voxgate_proto::bridge::{downlink, OpusPacket};
    let server = ServerProcess::start(&["--loops", "1"]);
    let (worker, mut fleet, id) = connected_call(&server, AudioMode::OpusPassthrough);
    let rss_before = rss_kib(server.pid());
    // Oversize packets (100 KB each, 5 MB in all): dropped and counted, nothing kept.
    for _ in 0..50 {
        worker.send(
            &id,
            downlink::Kind::Opus(OpusPacket {
                data: vec![0xfc; 100_000].into(),
                ..Default::default()
            }),
        );
    }
    let oversize = ["reason=\"oversize\""];
    assert_eq!(
        wait_metric(
            &server,
            "voxgate_bridge_downlink_dropped_total",
            &oversize,
            50
        ),
        50
    );
    // 100 s of ~1000-byte packets, sent as fast as the transceiver takes them.
    let mut enc =
        opus::Encoder::new(48_000, opus::Channels::Mono, opus::Application::Voip).expect("encoder");
    enc.set_bitrate(opus::Bitrate::Bits(400_000)).unwrap();
    let packet = enc.encode_vec(&tone(900.0, 0.02, 48_000), 1275).unwrap();
    let sent = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..5000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                worker.send(
                    &id,
                    downlink::Kind::Opus(OpusPacket {
                        data: packet.clone().into(),
                        ..Default::default()
                    }),
                );
                sent.fetch_add(1, Ordering::Relaxed);
            }
        });
        // The queue fills to its bound, then the backend is held back by flow control.
        let full = drive_fleet_until(&mut fleet, Duration::from_secs(20), |_| {
            metric_sum(
                &metrics(&server),
                "voxgate_bridge_downlink_full_ticks_total",
                &[],
            ) >= 50
        });
        assert!(full, "the downlink queue reached its bound");
        // Held back: from here on the backend gets to send only what the caller plays (50
        // packets a second), whatever the transport buffers (HTTP/2 windows, channels) held.
        fleet.run_for(Duration::from_millis(500));
        let taken = sent.load(Ordering::Relaxed);
        fleet.run_for(Duration::from_secs(2));
        let taken_later = sent.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        assert!(taken < 4000, "{taken} packets (80 s) were taken");
        assert!(
            taken_later - taken <= 150,
            "{} packets taken in 2 s of playout: the backend is not held back",
            taken_later - taken
        );
        let log = worker.session(&id).unwrap();
        let max_queued = log.progress.iter().map(|p| p.queued_ms).max().unwrap_or(0);
        assert!(
            (29_000..=30_100).contains(&max_queued),
            "queued {max_queued} ms of Opus; the bound is 30 s"
        );
        // Still paced: about one packet per 20 ms reached the caller.
        let before = fleet.report(0).audio_packets_received;
        fleet.run_for(Duration::from_secs(1));
        let got = fleet.report(0).audio_packets_received - before;
        assert!((40..=60).contains(&got), "{got} packets in 1 s");
        let rss_after = rss_kib(server.pid());
        assert!(
            rss_after.saturating_sub(rss_before) < 32 * 1024,
            "RSS grew from {rss_before} to {rss_after} KiB"
        );
        // The sender stops at its next send, which the playout makes room for.
    });
}

/// Every loop's scheduling class (`voxgate_loop_scheduling` at 1), in the metrics' order.
fn loop_scheduling(server: &ServerProcess) -> Vec<String> {
    metrics(server)
        .lines()
        .filter(|l| l.starts_with("voxgate_loop_scheduling{") && l.ends_with(" 1"))
        .filter_map(|l| Some(l.split("class=\"").nth(1)?.split('"').next()?.to_string()))
        .collect()
}

/// Waits (5 s at most) until the loops report scheduling classes `want` (each loop sets its
/// own as its thread starts, which can be a moment after the server answers).
fn wait_loop_scheduling(server: &ServerProcess, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while loop_scheduling(server) != want {
        assert!(
            Instant::now() < deadline,
            "loop scheduling {:?}, want {want:?}",
            loop_scheduling(server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The STUN message `check` with an unknown comprehension-optional attribute of `len` bytes
/// before its MESSAGE-INTEGRITY (the last 24 bytes): a receiver must still HMAC all of it.
fn padded(check: &[u8], len: usize) -> Vec<u8> {
    let (head, integrity) = check.split_at(check.len() - 24);
    let mut m = head.to_vec();
    m.extend_from_slice(&0x8055u16.to_be_bytes());
    m.extend_from_slice(&(len as u16).to_be_bytes());
    m.extend(std::iter::repeat_n(0u8, len.next_multiple_of(4)));
    m.extend_from_slice(integrity);
    let attrs = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&attrs.to_be_bytes());
    m
}

/// Sender `index` of a flood: sends `datagram` to `to` as fast as `sendmmsg` allows while
/// `index < senders`, until `stop`; returns the count.
fn flood(
    index: usize,
    to: SocketAddr,
    datagram: &[u8],
    senders: &AtomicUsize,
    stop: &AtomicBool,
) -> u64 {
    use std::os::fd::AsRawFd;
    const N: usize = 64;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(to).unwrap();
    let mut iov: Vec<libc::iovec> = (0..N)
        .map(|_| libc::iovec {
            iov_base: datagram.as_ptr() as *mut libc::c_void,
            iov_len: datagram.len(),
        })
        .collect();
    // SAFETY: zeroed mmsghdr is a valid empty header; each points at one iovec above.
    let mut msgs: Vec<libc::mmsghdr> = (0..N).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if index >= senders.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        // SAFETY: `msgs` holds N initialised headers whose buffers outlive the call.
        let n = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), N as u32, 0) };
        if n > 0 {
            sent += n as u64;
        }
    }
    sent
}

/// Datagrams the kernel dropped because the socket bound at `port` (IPv4) had no room: the
/// `drops` column of `/proc/net/udp`.
fn kernel_drops(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&local))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_junk_flood_at_capacity_leaves_downlink_paced_and_commands_answered() {
    // Unpinned: on a shared test machine a loop pinned to a core other work also wants waits
    // for that core, which would measure the neighbours, not the loop.
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    // The loop runs at the default --loop-priority (this suite runs as root, which may).
    wait_loop_scheduling(&server, &["rt"]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    let mut caller = TimestampedClient::open(&server);
    let id = caller.session.session_id().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(caller.session.is_connected() && worker.attached().len() == 1) {
        assert!(Instant::now() < deadline, "the caller did not connect");
        caller.drive_for(Duration::from_millis(20));
    }
    worker.play(&id, &tone(700.0, 30.0, 48_000), "reply");
    caller.drive_for(Duration::from_millis(300));

    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let stop = AtomicBool::new(false);
    let dropped_of = |server: &ServerProcess| {
        metric_sum(&metrics(server), "voxgate_dropped_datagrams_total", &[])
    };
    let busy_of = |server: &ServerProcess| {
        let text = metrics(server);
        text.lines()
            .find(|l| l.starts_with("voxgate_loop_busy_ratio{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // The flood and its baseline are interleaved: quiet and flooded windows alternate, so
    // whatever the machine's other work costs the loop lands on both alike, and the test asks
    // what the flood costs the session, not what a busy neighbour does.
    let senders = AtomicUsize::new(0);
    let wall = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    std::thread::scope(|s| {
        // The flood, as fast as a thread can send it: checks that carry the caller's real
        // (public) ufrag with a forged MESSAGE-INTEGRITY, the costliest junk there is (each
        // reaches the session and fails str0m's HMAC).
        let forged = padded(&binding_request(caller.session.server_ufrag(), 1), 1_000);
        let (stop, senders) = (&stop, &senders);
        // A real flood arrives from the network at whatever rate the attacker pays for; here it
        // costs this machine's CPU, which the loop (at `--loop-priority rt`, the default) and
        // the machine's other work also want. So the senders get a raised priority (nice -5,
        // still below the loop's) and the attacker brings more of them until the loop's socket
        // overflows: the flood must be at the loop's capacity (asserted below).
        const MAX_SENDERS: usize = 8;
        let flooders: Vec<_> = (0..MAX_SENDERS)
            .map(|index| {
                let forged = forged.clone();
                s.spawn(move || {
                    // SAFETY: setpriority on the calling thread (who = 0).
                    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -5) };
                    flood(index, media, &forged, senders, stop)
                })
            })
            .collect();
        let mut active = 2;
        loop {
            senders.store(active, Ordering::Relaxed);
            let before = kernel_drops(server.media_base_port);
            caller.drive_for(Duration::from_millis(500));
            let overflowed = kernel_drops(server.media_base_port) - before;
            if overflowed >= 1_000 || active == MAX_SENDERS {
                eprintln!("flood: {active} senders ({overflowed} kernel drops in 500 ms)");
                break;
            }
            active += 2;
        }
        senders.store(0, Ordering::Relaxed);
        caller.drive_for(Duration::from_millis(300));
        let rests_of =
            |server: &ServerProcess| metric_sum(&metrics(server), "voxgate_loop_rests_total", &[]);
        let dropped_before = dropped_of(&server);
        let kernel_before = kernel_drops(server.media_base_port);
        let rests_before = rests_of(&server);
        // Windows as (start, end, flooded) on the kernel timestamps' clock.
        let mut windows = Vec::new();
        let mut snap = None;
        for round in 0..4 {
            for flooded in [false, true] {
                senders.store(if flooded { active } else { 0 }, Ordering::Relaxed);
                let start = wall();
                caller.drive_for(Duration::from_millis(1_000));
                if flooded && round == 1 {
                    let asked = Instant::now();
                    let got = snapshot(&server, &id);
                    snap = Some((got, asked.elapsed()));
                    caller.drive_for(Duration::from_millis(200));
                }
                windows.push((start, wall(), flooded));
            }
        }
        let busy = busy_of(&server);
        stop.store(true, Ordering::Relaxed);
        let flooded_total: u64 = flooders.into_iter().map(|f| f.join().unwrap()).sum();
        let dropped = dropped_of(&server) - dropped_before;
        let overflowed = kernel_drops(server.media_base_port) - kernel_before;
        let rests = rests_of(&server) - rests_before;

        // Each gap belongs to the window its later packet arrived in; the first 100 ms of a
        // window are left out (the previous window's backlog is still draining).
        let (mut quiet, mut flood_gaps) = (Vec::new(), Vec::new());
        for w in caller.rtp_arrivals.windows(2) {
            let at = w[1];
            let Some(&(_, _, flooded)) = windows
                .iter()
                .find(|(start, end, _)| at >= *start + Duration::from_millis(100) && at < *end)
            else {
                continue;
            };
            let gap = w[1].saturating_sub(w[0]).as_secs_f64() * 1000.0;
            if flooded { &mut flood_gaps } else { &mut quiet }.push(gap);
        }
        assert!(
            quiet.len() >= 100 && flood_gaps.len() >= 100,
            "downlink packets: {} quiet, {} flooded in 4 s each",
            quiet.len(),
            flood_gaps.len()
        );
        let (base_median, base_p99, _) = gap_stats(quiet);
        let (median, p99, max) = gap_stats(flood_gaps);
        let (snap, answered_in) = snap.expect("asked during a flood");
        eprintln!(
            "flood: {flooded_total} sent, {dropped} dropped by the loop, {overflowed} by the \
             kernel (socket full), loop busy {busy:.2}; downlink gaps (kernel arrival) under \
             the flood median {median:.1} ms, p99 {p99:.1} ms, max {max:.1} ms; in the quiet \
             windows between: median {base_median:.1} ms, p99 {base_p99:.1} ms; GET answered \
             in {answered_in:?}; the loop rested {rests} times"
        );
        // The loop was at capacity: the flood came faster than it could read, so its socket
        // overflowed and the kernel dropped the rest; or the loop spent its whole time on the
        // flood. A saturated loop rests 0.2 ms after every 2 ms without waiting (so its busy
        // gauge tops out near 0.9): on a machine where eight senders fill the loop but not its
        // socket (this one: busy 0.88, 0 kernel drops, 2,800 rests) the rests say so. 1,000
        // rests are at least 2.2 s of the 4 flooded seconds saturated.
        assert!(
            dropped >= 50_000,
            "only {dropped} junk datagrams reached the loop"
        );
        assert!(
            overflowed >= 1_000 || busy >= 0.9 || rests >= 1_000,
            "the loop kept up ({overflowed} kernel drops, busy {busy:.2}, {rests} rests): \
             not at capacity"
        );
        assert_eq!(snap["state"], "connected", "{snap}");
        assert!(
            answered_in < Duration::from_secs(1),
            "GET took {answered_in:?}"
        );
        assert!(
            (18.0..=22.0).contains(&median),
            "median downlink gap {median:.1} ms"
        );
        // Saturated, the loop left its core for a moment every few milliseconds (`core_share`),
        // so the other work on it was never starved long enough for the kernel to stop the loop
        // for 50 ms at once (which showed beside a build as gaps of that size).
        assert!(rests >= 10, "the saturated loop rested {rests} times");
        // The product target: p99 <= 30 ms under the flood. The loop's real-time priority
        // holds it on a busy machine (beside two CPU hogs and a build on 2 cores; at normal or
        // nice -10 the loop waits time slices behind them and misses it: see
        // `thread_priority`). A loop that reads the flood before its timers fails this by far:
        // it sends no tick for a whole read pass.
        assert!(
            p99 <= 30.0,
            "p99 downlink gap {p99:.1} ms under the flood ({base_p99:.1} ms in the quiet windows)"
        );
    });
    // DELETE is answered too.
    let r = support::http_delete(&server.url(&format!("/v1/sessions/{id}")), None);
    assert_eq!(r.status, 204);
}

#[test]
fn loops_that_may_not_raise_their_priority_warn_once_each_and_serve() {
    // Without CAP_SYS_NICE (dropped from the bounding set, so even root lacks it after exec),
    // as in a container that was not granted it.
    let server = ServerProcess::start_via(
        &[
            "setpriv",
            "--bounding-set=-sys_nice",
            "--inh-caps=-sys_nice",
        ],
        &["--loops", "2", "--no-pin"],
    );
    wait_loop_scheduling(&server, &["normal", "normal"]);
    let (worker, mut fleet, id) = connected_call(&server, AudioMode::Pcm);
    worker.play(&id, &tone(700.0, 1.0, 48_000), "reply");
    assert!(
        drive_fleet_until(&mut fleet, Duration::from_secs(10), |f| f
            .report(0)
            .audio_packets_received
            >= 25),
        "the caller heard no reply: {:?}",
        fleet.report(0)
    );
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    let warnings = log
        .lines()
        .filter(|l| l.contains("could not raise the media loop's scheduling priority"))
        .count();
    assert_eq!(warnings, 2, "one warning per loop:\n{log}");

    // Asked for nothing more, the loops say nothing.
    let quiet = ServerProcess::start(&["--loops", "1", "--no-pin", "--loop-priority", "normal"]);
    wait_loop_scheduling(&quiet, &["normal"]);
    let log = std::fs::read_to_string(&quiet.log_path).unwrap();
    assert!(!log.contains("scheduling priority"), "{log}");
}
