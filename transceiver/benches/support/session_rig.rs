//! An in-memory call for the `session` benchmark: one real transceiver [`Session`], accepted
//! the way the control plane accepts it and driven the way a media loop drives it, talking to a
//! real str0m client (`voxgate_testkit::ClientSession`, live Opus) through datagrams handed
//! across in memory, on a clock the rig advances itself. No sockets, no threads: what is timed
//! is the session's own work, nothing of the kernel's.
//!
//! Shared (by `#[path]`) between `benches/session.rs`, which times [`Call::feed_uplink`] and
//! [`Call::run_until`], and `tests/session_bench_rig.rs`, which checks that the rig still does
//! what the benchmark claims (connected, 50 SRTP packets a second, 50 frames at the bridge).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::config::DtlsCert;
use str0m::net::Transmit;
use tokio::sync::mpsc;
use voxgate_proto::bridge::{downlink, uplink, AudioMode, Downlink, OpusPacket, Uplink};
use voxgate_proto::stun_username::{looks_like_stun, server_ufrag};
use voxgate_testkit::loss_injector::is_rtp;
use voxgate_testkit::uplink_audio::UplinkAudio;
use voxgate_testkit::{ClientSession, SessionConfig, SignalSource};
use voxgate_transceiver::backend::bridge_service::{DOWNLINK_QUEUE, UPLINK_QUEUE};
use voxgate_transceiver::control::offer::validate_offer;
use voxgate_transceiver::media::audio_bridge::{
    CoarseTicks, EncoderSettings, OpusApplication, OwnerEndpoints, OwnerUplink, QueuedDownlink,
    TickGrid, FRAME,
};
use voxgate_transceiver::media::session::{
    is_binding_success, Candidates, ClientPath, LoopTicks, Session, SessionId, SessionParams,
    SessionState,
};

/// The client's (fake) address. Nothing is bound: datagrams never touch a socket.
pub const CLIENT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(LOOPBACK), 40_000);
/// The session's advertised candidate (the loop socket it would arrive on).
pub const SERVER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(LOOPBACK), 50_000);
const LOOPBACK: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;
/// One second of 20 ms Opus packets.
pub const PACKETS_PER_SECOND: usize = 50;
/// Longest the in-memory ICE + DTLS + SCTP handshake may take on the rig's clock.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);
/// The transceiver's defaults (`--opus-bitrate`, `--opus-complexity`, `--opus-application`).
pub const ENCODER: EncoderSettings = EncoderSettings {
    bitrate: 32_000,
    complexity: 5,
    application: OpusApplication::Voip,
};

/// The process-wide DTLS certificate, as the control plane makes it once for all sessions.
pub fn server_cert() -> DtlsCert {
    str0m::crypto::from_feature_flags()
        .dtls_provider
        .generate_certificate()
        .expect("DTLS certificate")
}

/// The test client's voice: a 440 Hz tone at 30 % of full scale.
fn tone() -> SignalSource {
    SignalSource::sine(440.0, 0.3)
}

/// One second of the client's voice as 20 ms Opus packets, encoded as the client encodes them.
pub fn opus_second() -> Vec<Vec<u8>> {
    let mut opus = UplinkAudio::live(tone()).expect("Opus encoder");
    (0..PACKETS_PER_SECOND)
        .map(|_| opus.next_packet().expect("encodes").to_vec())
        .collect()
}

/// One second of the same voice as 48 kHz PCM.
pub fn pcm_second() -> Vec<i16> {
    tone().take_samples(48_000)
}

/// A datagram the client sent, with the instant it left and whether the loop would route it
/// as a binding request (by its USERNAME) rather than by the client's address.
pub struct Datagram {
    pub at: Instant,
    pub bytes: Vec<u8>,
    pub binding_request: bool,
}

/// One second of the client's uplink, as it would arrive at the loop.
pub struct RecordedSecond {
    pub start: Instant,
    pub datagrams: Vec<Datagram>,
}

impl RecordedSecond {
    /// How many of the datagrams are SRTP (audio), not SRTCP or STUN.
    pub fn srtp_packets(&self) -> usize {
        self.datagrams.iter().filter(|d| is_rtp(&d.bytes)).count()
    }
}

/// The backend's ends of an owner's queues, sized like the gRPC bridge's.
pub struct Backend {
    pub uplink: mpsc::Receiver<Uplink>,
    pub downlink: mpsc::Sender<QueuedDownlink>,
}

impl Backend {
    /// An owner in `mode` at 48 kHz, and the backend's ends of its queues.
    pub fn endpoints(mode: AudioMode) -> (OwnerEndpoints, Backend) {
        let (up_tx, up_rx) = mpsc::channel(UPLINK_QUEUE);
        let (down_tx, down_rx) = mpsc::channel(DOWNLINK_QUEUE);
        let endpoints = OwnerEndpoints {
            uplink: OwnerUplink::Stream(up_tx),
            downlink: down_rx,
            sample_rate: 48_000,
            mode,
            progress_interval: Duration::from_millis(200),
            stall_after: Duration::from_secs(5),
            owner_id: 1,
            encoder: Default::default(),
            clears: Default::default(),
        };
        let backend = Backend {
            uplink: up_rx,
            downlink: down_tx,
        };
        (endpoints, backend)
    }

    /// Takes what the bridge queued for the backend; returns the audio frames (PCM frames or
    /// passthrough Opus packets) among it.
    pub fn take_audio(&mut self) -> usize {
        std::iter::from_fn(|| self.uplink.try_recv().ok())
            .filter(|m| {
                matches!(
                    m.kind,
                    Some(uplink::Kind::Audio(_)) | Some(uplink::Kind::Opus(_))
                )
            })
            .count()
    }

    /// Queues passthrough Opus packets, as a backend's stream would.
    pub fn send_opus(&self, packets: &[Vec<u8>]) {
        for (i, p) in packets.iter().enumerate() {
            let msg = Downlink {
                kind: Some(downlink::Kind::Opus(OpusPacket {
                    data: p.clone().into(),
                    rtp_sequence: i as u32,
                    ..OpusPacket::default()
                })),
            };
            self.downlink
                .try_send(msg.into())
                .expect("downlink queue has room");
        }
    }

    /// Queues 48 kHz PCM in 100 ms chunks (what the built-in backend sends).
    pub fn send_pcm(&self, pcm: &[i16]) {
        for chunk in pcm.chunks(4_800) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
            let msg = Downlink {
                kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                    pcm: bytes.into(),
                    item_id: "bench".into(),
                })),
            };
            self.downlink
                .try_send(msg.into())
                .expect("downlink queue has room");
        }
    }
}

/// A connected call: the session under test, its client, and its backend's queues.
pub struct Call {
    pub session: Session,
    pub client: ClientSession,
    pub backend: Option<Backend>,
    /// The client's offer and the session's answer, as SDP (read by the rig's tests, not by
    /// the benchmark).
    #[allow(dead_code)]
    pub offer: String,
    #[allow(dead_code)]
    pub answer: String,
    /// The rig's clock: the session has been driven up to here.
    pub now: Instant,
    /// The session's next deadline (what the loop keeps in its timer heap).
    deadline: Option<Instant>,
    path: ClientPath,
}

/// What the control plane does with a POSTed offer, without the I/O: validate it, then let
/// str0m accept it into a new `Session` (the `accept` stage of `voxgate_offer_seconds`).
pub fn accept(cert: &DtlsCert, id: SessionId, now: Instant, offer_sdp: &[u8]) -> (Session, String) {
    let (offer, summary) = validate_offer(offer_sdp).expect("valid offer");
    let params = SessionParams {
        id,
        ufrag: "benchUfrag".into(),
        pass: "benchPasswordBenchPassword".into(),
        cert: cert.clone(),
        candidates: Candidates {
            udp: vec![SERVER],
            tcp: Vec::new(),
        },
        connect_timeout: HANDSHAKE_LIMIT,
        max_duration: None,
        audio_mid: summary.audio_mid,
        encoder: ENCODER,
        metadata: Default::default(),
        call_id: id,
        generation: 1,
    };
    Session::accept(now, 1, params, offer).expect("accepted")
}

/// A testkit client's offer, as a browser would POST it.
pub fn client_offer() -> String {
    let (_, offer) = ClientSession::new(&SessionConfig::default(), CLIENT, Instant::now())
        .expect("client offer");
    offer.to_string()
}

impl Call {
    /// A client offers, the session accepts (as `ControlPlane` does), an owner in `mode`
    /// attaches (or none), and ICE, DTLS and the data channel come up over in-memory
    /// datagrams. Panics if the handshake does not finish within 10 s of the rig's clock.
    pub fn connect(cert: &DtlsCert, mode: Option<AudioMode>) -> Call {
        // The rig's clock starts on its session's 20 ms downlink grid, so a second of it
        // always holds the same 50 ticks (from any other phase, a window can start just
        // before or just after a tick).
        let id = SessionId::random();
        let now = TickGrid::for_session(&id.to_string()).first_after(Instant::now());
        let cfg = SessionConfig {
            send_for: Duration::MAX,
            decode_downlink: false,
            keep_pcm: Duration::ZERO,
            keep_arrivals: 0,
            keep_messages: 0,
            ..SessionConfig::default()
        };
        let (mut client, offer_sdp) = ClientSession::new(&cfg, CLIENT, now).expect("client offer");
        let offer_text = offer_sdp.to_string();
        let (mut session, answer) = accept(cert, id, now, offer_text.as_bytes());
        client.accept_answer(now, &answer).expect("answer");
        let answer_text = answer.clone();
        let backend = mode.map(|mode| {
            let (endpoints, backend) = Backend::endpoints(mode);
            // Coarse ticks off: the owner ticks on the session's own grid, which the rig's
            // clock starts on (see above).
            let ticks = LoopTicks {
                sessions: 1,
                coarse: CoarseTicks::OFF,
            };
            session
                .attach_owner(now, endpoints, ticks)
                .expect("owner attaches");
            backend
        });
        let mut call = Call {
            session,
            client,
            backend,
            offer: offer_text,
            answer: answer_text,
            now,
            deadline: None,
            path: ClientPath::direct_udp(CLIENT),
        };
        call.deadline = call.session.poll(now, &mut |_, _| {});
        call.handshake();
        // What arrived during the handshake is the backend's, read as it came.
        if let Some(b) = call.backend.as_mut() {
            b.take_audio();
        }
        call
    }

    /// Passes datagrams both ways and advances both clocks until the call is up.
    fn handshake(&mut self) {
        let limit = self.now + HANDSHAKE_LIMIT;
        let mut to_client: Vec<Vec<u8>> = Vec::new();
        while !(self.client.is_connected()
            && self.client.channel_open()
            && self.session.state() == SessionState::Connected)
        {
            assert!(self.now < limit, "in-memory handshake did not finish");
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                self.deliver(self.now, &t.contents, &mut to_client);
                moved = true;
            }
            for bytes in to_client.drain(..) {
                self.client
                    .handle_datagram(self.now, SERVER, CLIENT, &bytes);
                moved = true;
            }
            if moved {
                continue;
            }
            let client_at = self.client.poll_timeout().expect("client alive");
            let next = self.deadline.map_or(client_at, |d| d.min(client_at));
            self.now = self.now.max(next);
            if client_at <= self.now {
                self.client.handle_timeout(self.now);
            }
            self.run_timers(self.now, &mut |t| to_client.push(t.contents.to_vec()));
        }
    }

    /// Hands one client datagram to the session and drains its output, as the loop's
    /// `deliver` + `drive` do (a check str0m answers authenticates the client's path).
    fn deliver(&mut self, now: Instant, bytes: &[u8], to_client: &mut Vec<Vec<u8>>) {
        let binding_request = looks_like_stun(bytes) && server_ufrag(bytes).is_ok();
        self.session
            .handle_datagram(now, now, self.path, bytes, binding_request);
        let mut answered = false;
        self.deadline = self.session.poll(now, &mut |t, _route| {
            answered |= binding_request && is_binding_success(&t.contents);
            to_client.push(t.contents.to_vec());
        });
        if answered {
            self.session.add_client_addr(self.path);
        }
    }

    /// Records one second of the client's uplink (50 SRTP audio packets and whatever SRTCP or
    /// consent STUN the client sends in that second). The session sees none of it yet.
    pub fn record_uplink_second(&mut self) -> RecordedSecond {
        let start = self.now;
        let mut datagrams = Vec::new();
        let mut srtp = 0;
        let mut at = start;
        while srtp < PACKETS_PER_SECOND {
            at = at.max(self.client.poll_timeout().expect("client alive"));
            self.client.handle_timeout(at);
            while let Some(t) = self.client.poll_transmit() {
                srtp += usize::from(is_rtp(&t.contents));
                datagrams.push(Datagram {
                    at,
                    binding_request: looks_like_stun(&t.contents)
                        && server_ufrag(&t.contents).is_ok(),
                    bytes: t.contents.to_vec(),
                });
            }
        }
        RecordedSecond { start, datagrams }
    }

    /// Feeds a recorded second to the session the way the loop would: timers due before each
    /// datagram first, then the datagram and a drain of the session's output; then the timers
    /// up to the end of the second. This is what the uplink benchmarks time. Returns the
    /// number of datagrams the session sent meanwhile (counted, not copied: the loop's copy
    /// into its `sendmmsg` batch is the kernel side's cost).
    pub fn feed_uplink(&mut self, second: &RecordedSecond) -> usize {
        let mut sent = 0;
        for d in &second.datagrams {
            sent += self.run_until(d.at);
            self.session
                .handle_datagram(d.at, d.at, self.path, &d.bytes, d.binding_request);
            self.deadline = self.session.poll(d.at, &mut |_, _| sent += 1);
            self.now = d.at;
        }
        sent + self.run_until(second.start + FRAME * PACKETS_PER_SECOND as u32)
    }

    /// Runs the session's timers up to `until` (its 20 ms downlink ticks among them). Returns
    /// the number of SRTP (audio) packets it sent. With backend audio queued, this is what
    /// the downlink benchmarks time.
    pub fn run_until(&mut self, until: Instant) -> usize {
        let mut srtp = 0;
        self.run_timers(until, &mut |t| srtp += usize::from(is_rtp(&t.contents)));
        self.now = self.now.max(until);
        srtp
    }

    /// Runs the session's timers due by `until`, as the loop's `run_timers` does.
    fn run_timers(&mut self, until: Instant, on_transmit: &mut dyn FnMut(&Transmit)) {
        while let Some(at) = self.deadline.filter(|d| *d <= until) {
            self.session.handle_timeout(at);
            self.deadline = self.session.poll(at, &mut |t, _route| on_transmit(t));
        }
    }
}
