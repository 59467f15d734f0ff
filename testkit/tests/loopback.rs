//! The testkit against a stand-in server: real sockets on loopback, real ICE/DTLS/SRTP/SCTP.
//!
//! The stand-in is the smallest server of the same shape as the transceiver: WHIP-shaped HTTP
//! on a `TcpListener`, one ice-lite str0m `Rtc` per session on one UDP socket, echoing audio
//! frames and data-channel text back to the client. It proves the client's side of the
//! protocol without the voxgate server.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use voxgate_testkit::signal::{self, SAMPLE_RATE};
use voxgate_testkit::{Fleet, SessionConfig};

type Reply = Sender<Result<(String, String), (u16, String)>>;

enum Cmd {
    Create {
        offer: String,
        reply: Reply,
    },
    Update {
        id: String,
        offer: String,
        reply: Reply,
    },
    Delete {
        id: String,
        reply: Sender<bool>,
    },
}

struct FakeServer {
    base_url: String,
    udp_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl FakeServer {
    fn start(token: Option<&str>, capacity: usize) -> FakeServer {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_addr = udp.local_addr().unwrap();
        let http = TcpListener::bind("127.0.0.1:0").unwrap();
        http.set_nonblocking(true).unwrap();
        let base_url = format!("http://{}", http.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let token = token.map(str::to_owned);
        let media_stop = stop.clone();
        let http_stop = stop.clone();
        let threads = vec![
            thread::spawn(move || media_loop(udp, rx, capacity, media_stop)),
            thread::spawn(move || http_loop(http, tx, token, http_stop)),
        ];
        FakeServer {
            base_url,
            udp_addr,
            stop,
            threads,
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn http_loop(listener: TcpListener, tx: Sender<Cmd>, token: Option<String>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => handle_http(stream, &tx, token.as_deref()),
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn handle_http(stream: TcpStream, tx: &Sender<Cmd>, token: Option<&str>) {
    stream.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut content_length = 0;
    let mut auth = None;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.trim().parse().unwrap(),
            "authorization" => auth = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).unwrap();
    let body = String::from_utf8(body).unwrap();

    let path = path.split('?').next().unwrap_or("").to_owned();
    let authorized = token.is_none_or(|t| auth.as_deref() == Some(&format!("Bearer {t}")));
    let (status, location, body) = if !authorized {
        (401, None, "unauthorized".to_owned())
    } else if method == "POST" && path == "/v1/sessions" {
        let (reply, rx) = mpsc::channel();
        tx.send(Cmd::Create { offer: body, reply }).unwrap();
        match rx.recv().unwrap() {
            Ok((id, answer)) => (201, Some(format!("/v1/sessions/{id}")), answer),
            Err((s, msg)) => (s, None, msg),
        }
    } else if let Some(id) = path.strip_prefix("/v1/sessions/") {
        let id = id.to_owned();
        if method == "PATCH" {
            let (reply, rx) = mpsc::channel();
            tx.send(Cmd::Update {
                id,
                offer: body,
                reply,
            })
            .unwrap();
            match rx.recv().unwrap() {
                Ok((_, answer)) => (200, None, answer),
                Err((s, msg)) => (s, None, msg),
            }
        } else if method == "DELETE" {
            let (reply, rx) = mpsc::channel();
            tx.send(Cmd::Delete { id, reply }).unwrap();
            if rx.recv().unwrap() {
                (204, None, String::new())
            } else {
                (404, None, "no such session".to_owned())
            }
        } else {
            (405, None, "method not allowed".to_owned())
        }
    } else {
        (404, None, "not found".to_owned())
    };

    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\nContent-Type: application/sdp\r\n",
        body.len()
    );
    if let Some(l) = location {
        out.push_str(&format!("Location: {l}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    let mut stream = stream;
    let _ = stream.write_all(out.as_bytes());
}

struct ServerSession {
    id: String,
    rtc: Rtc,
    channel: Option<ChannelId>,
}

fn media_loop(socket: UdpSocket, rx: Receiver<Cmd>, capacity: usize, stop: Arc<AtomicBool>) {
    let local = socket.local_addr().unwrap();
    let mut sessions: Vec<ServerSession> = Vec::new();
    let mut next_id = 0;
    let mut buf = vec![0u8; 2000];
    while !stop.load(Ordering::Relaxed) {
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Cmd::Create { offer, reply } => {
                    if sessions.len() >= capacity {
                        let _ = reply.send(Err((503, "no capacity".into())));
                        continue;
                    }
                    let Ok(offer) = SdpOffer::from_sdp_string(&offer) else {
                        let _ = reply.send(Err((400, "bad offer".into())));
                        continue;
                    };
                    let mut rtc = Rtc::builder()
                        .set_ice_lite(true)
                        .clear_codecs()
                        .enable_opus(true, false)
                        .build(Instant::now());
                    rtc.add_local_candidate(Candidate::host(local, "udp").unwrap());
                    let answer = rtc.sdp_api().accept_offer(offer).unwrap();
                    next_id += 1;
                    let id = format!("s{next_id}");
                    sessions.push(ServerSession {
                        id: id.clone(),
                        rtc,
                        channel: None,
                    });
                    let _ = reply.send(Ok((id, answer.to_sdp_string())));
                }
                Cmd::Update { id, offer, reply } => {
                    let Some(s) = sessions.iter_mut().find(|s| s.id == id) else {
                        let _ = reply.send(Err((404, "no such session".into())));
                        continue;
                    };
                    let offer = SdpOffer::from_sdp_string(&offer).unwrap();
                    let answer = s.rtc.sdp_api().accept_offer(offer).unwrap();
                    let _ = reply.send(Ok((id, answer.to_sdp_string())));
                }
                Cmd::Delete { id, reply } => {
                    let before = sessions.len();
                    sessions.retain(|s| s.id != id);
                    let _ = reply.send(sessions.len() < before);
                }
            }
        }

        let mut wake = Instant::now() + Duration::from_millis(20);
        for s in sessions.iter_mut() {
            wake = wake.min(drain(s, &socket));
        }
        let wait = wake
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        socket.set_read_timeout(Some(wait)).unwrap();
        if let Ok((n, source)) = socket.recv_from(&mut buf) {
            if let Ok(r) = Receive::new(Protocol::Udp, source, local, &buf[..n]) {
                let input = Input::Receive(Instant::now(), r);
                if let Some(s) = sessions.iter_mut().find(|s| s.rtc.accepts(&input)) {
                    let _ = s.rtc.handle_input(input);
                }
            }
        }
        let now = Instant::now();
        for s in sessions.iter_mut() {
            let _ = s.rtc.handle_input(Input::Timeout(now));
        }
    }
}

/// Drains one server session, echoing audio frames and data-channel text.
fn drain(s: &mut ServerSession, socket: &UdpSocket) -> Instant {
    loop {
        if !s.rtc.is_alive() {
            return Instant::now() + Duration::from_secs(1);
        }
        match s.rtc.poll_output() {
            Ok(Output::Timeout(t)) => return t,
            Ok(Output::Transmit(t)) => {
                let _ = socket.send_to(&t.contents, t.destination);
            }
            Ok(Output::Event(Event::MediaData(d))) => {
                if let Some(w) = s.rtc.writer(d.mid) {
                    if let Some(pt) = w.match_params(d.params) {
                        let _ = w.write(pt, d.network_time, d.time, d.data);
                    }
                }
            }
            Ok(Output::Event(Event::ChannelOpen(id, _))) => s.channel = Some(id),
            Ok(Output::Event(Event::ChannelData(d))) => {
                let echo = format!("echo:{}", String::from_utf8_lossy(&d.data));
                if let Some(mut ch) = s.channel.and_then(|id| s.rtc.channel(id)) {
                    let _ = ch.write(false, echo.as_bytes());
                }
            }
            Ok(Output::Event(_)) => {}
            Err(_) => s.rtc.disconnect(),
        }
    }
}

fn cfg(server: &FakeServer) -> SessionConfig {
    SessionConfig {
        base_url: server.base_url.clone(),
        tone_hz: 1000.0,
        send_for: Duration::MAX,
        ..SessionConfig::default()
    }
}

fn secs(s: u64) -> Instant {
    Instant::now() + Duration::from_secs(s)
}

#[test]
fn client_connects_and_hears_its_tone_echoed() {
    let server = FakeServer::start(None, 10);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(cfg(&server)).unwrap();
    assert!(fleet.run_until(secs(10), |f| f.session(i).is_connected()));
    assert!(
        fleet.run_until(secs(10), |f| f.session(i).received_pcm().len()
            >= SAMPLE_RATE as usize)
    );

    let pcm = fleet.session(i).received_pcm();
    let hz = signal::dominant_frequency(pcm, SAMPLE_RATE);
    assert!((hz - 1000.0).abs() <= 5.0, "echoed tone at {hz} Hz");
    assert!(signal::rms(pcm) > 2000.0);

    let r = fleet.report(i);
    assert_eq!(r.session_id, "s1");
    assert_eq!(r.location, "/v1/sessions/s1");
    assert!(!r.server_ufrag.is_empty());
    let t = |d: Option<Duration>| d.expect("timing recorded");
    assert!(t(r.t_answer) <= t(r.t_ice_connected));
    assert!(t(r.t_ice_connected) <= t(r.t_dtls_connected));
    assert!(t(r.t_dtls_connected) <= t(r.t_first_audio_sent));
    assert!(t(r.t_first_audio_sent) <= t(r.t_first_audio_received));
    assert!(r.audio_packets_sent >= 50);
    assert!(r.audio_packets_received >= 50);
    assert_eq!(r.audio_packets_dropped, 0);
    assert_eq!(r.send_errors, 0);

    // Only the server's one address ever talked to us, and we only talked to it.
    let seen: Vec<_> = fleet
        .session(i)
        .remote_addrs_seen()
        .iter()
        .copied()
        .collect();
    assert_eq!(seen, vec![server.udp_addr]);
    let sent: Vec<_> = fleet.session(i).destinations().iter().copied().collect();
    assert_eq!(sent, vec![server.udp_addr]);

    // Arrivals are paced at about 20 ms.
    let arrivals = fleet.session(i).arrival_times();
    let span = *arrivals.last().unwrap() - arrivals[0];
    let mean = span / (arrivals.len() as u32 - 1);
    assert!(
        mean > Duration::from_millis(15) && mean < Duration::from_millis(25),
        "mean inter-arrival {mean:?}"
    );

    fleet.delete(i).unwrap();
    assert!(fleet.report(i).closed);
    assert!(!fleet.session(i).is_connected());
}

#[test]
fn data_channel_round_trip() {
    let server = FakeServer::start(None, 10);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            send_for: Duration::ZERO,
            ..cfg(&server)
        })
        .unwrap();
    assert!(fleet.run_until(secs(10), |f| f.session(i).channel_open()));
    fleet.send_channel_text(i, "hello").unwrap();
    assert!(fleet.run_until(secs(5), |f| !f.session(i).channel_messages().is_empty()));
    assert_eq!(fleet.session(i).channel_messages(), ["echo:hello"]);
    assert_eq!(fleet.report(i).channel_messages_received, 1);
    assert_eq!(fleet.report(i).audio_packets_sent, 0);
}

#[test]
fn ice_restart_gets_a_new_server_ufrag_and_audio_continues() {
    let server = FakeServer::start(None, 10);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(cfg(&server)).unwrap();
    assert!(fleet.run_until(secs(10), |f| f.report(i).audio_packets_received > 10));
    let before = fleet.report(i);

    fleet.ice_restart(i).unwrap();
    let after = fleet.report(i);
    assert_ne!(after.server_ufrag, before.server_ufrag);
    assert_eq!(after.ice_restarts, 1);

    let received = after.audio_packets_received;
    assert!(
        fleet.run_until(secs(10), |f| f.report(i).audio_packets_received
            > received + 50)
    );
    assert!(fleet.session(i).is_connected());
}

#[test]
fn capacity_and_auth_errors_keep_status_and_body() {
    let server = FakeServer::start(Some("sekret"), 1);
    let mut fleet = Fleet::new().unwrap();

    let err = fleet.open(cfg(&server)).unwrap_err();
    assert_eq!(err.status(), Some(401), "{err}");

    let ok = SessionConfig {
        token: Some("sekret".into()),
        query: Some("model=test".into()),
        ..cfg(&server)
    };
    fleet.open(ok.clone()).unwrap();
    let err = fleet.open(ok).unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert!(err.to_string().contains("no capacity"), "{err}");
}

#[test]
fn uplink_loss_drops_about_half_of_the_audio_deterministically() {
    let server = FakeServer::start(None, 10);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            uplink_loss: 0.5,
            seed: 9,
            send_for: Duration::from_secs(2),
            ..cfg(&server)
        })
        .unwrap();
    assert!(fleet.run_until(secs(10), |f| f.session(i).is_connected()));
    assert!(fleet.run_until(secs(10), |f| !f.session(i).is_sending_audio()));
    // The stand-in is default str0m: it holds audio behind a gap for up to 1 s before release.
    fleet.run_for(Duration::from_millis(1500));

    let r = fleet.report(i);
    let offered = r.audio_packets_sent + r.audio_packets_dropped;
    assert!((95..=101).contains(&r.audio_frames_written), "{r:?}");
    assert_eq!(offered, r.audio_frames_written);
    let share = r.audio_packets_dropped as f64 / offered as f64;
    assert!((0.35..=0.65).contains(&share), "dropped share {share}");
    // The echo can only return what got through.
    assert!(r.audio_packets_received <= r.audio_packets_sent);
    assert!(
        r.audio_packets_received >= r.audio_packets_sent * 9 / 10,
        "{r:#?}"
    );
}

#[test]
fn many_sessions_share_one_thread() {
    let server = FakeServer::start(None, 100);
    let mut fleet = Fleet::new().unwrap();
    for k in 0..20 {
        fleet
            .open(SessionConfig {
                tone_hz: 300.0 + 50.0 * k as f32,
                precoded_uplink: true,
                data_channel: false,
                ..cfg(&server)
            })
            .unwrap();
    }
    assert!(fleet.run_until(secs(15), Fleet::all_connected));
    assert!(fleet.run_until(secs(10), |f| (0..f.len()).all(|i| f
        .session(i)
        .received_pcm()
        .len()
        >= SAMPLE_RATE as usize / 2)));
    for k in 0..20 {
        let hz = signal::dominant_frequency(fleet.session(k).received_pcm(), SAMPLE_RATE);
        let want = 300.0 + 50.0 * k as f32;
        assert!(
            (hz - want).abs() <= 5.0,
            "session {k}: {hz} Hz, want {want}"
        );
    }
    let ids: HashSet<_> = fleet.reports().into_iter().map(|r| r.session_id).collect();
    assert_eq!(ids.len(), 20);
}

#[test]
fn a_caller_whose_predicate_is_always_true_still_gets_its_sockets_read() {
    // A load generator calls `run_until` again for every session its signaling threads hand
    // over; at 100 arrivals/s its predicate is true on nearly every call. The fleet must still
    // read what arrived: it once returned before polling, and handshakes stalled for 200 ms.
    let server = FakeServer::start(None, 10);
    let mut fleet = Fleet::new().unwrap();
    fleet
        .open(SessionConfig {
            data_channel: false,
            ..cfg(&server)
        })
        .unwrap();
    let deadline = secs(15);
    while !fleet.all_connected() && Instant::now() < deadline {
        assert!(fleet.run_until(deadline, |_| true));
        thread::sleep(Duration::from_micros(200));
    }
    assert!(
        fleet.all_connected(),
        "never connected while the predicate held: {:?}",
        fleet.report(0)
    );
    assert!(fleet.report(0).datagrams_received > 0);
}
