//! A real gRPC backend for tests: registers as a worker on the transceiver's `Bridge` service,
//! attaches every dispatched session, records everything it receives, and lets the test push
//! downlink messages. Runs on its own tokio runtime; dropping it (or `kill`) drops every
//! stream, as a crashed backend would. Every call carries the gRPC credential the server was
//! started with (`support::grpc_credential`), as a configured backend's do.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use voxgate_backend_kit::{
    attach_session, AttachSettings, Bridge, CallEvent, CallHandler, CallSender, MultiplexClient,
    Registration, WorkStream,
};
use voxgate_proto::bridge::{
    downlink, session_event, uplink, Attach, AudioChunk, AudioMode, ChannelDownlink, Clear,
    Cleared, OpusEncoder, PlaybackProgress, ResumeOffer, TurnLatency,
};

/// How the worker's sessions reach the transceiver: a `Session` stream each, or one
/// `Multiplex` stream for all of them, a channel each.
pub use voxgate_backend_kit::Transport;

/// Messages a session (or the `Multiplex` stream, for all of them) may have waiting to go out.
const DOWNLINK_QUEUE: usize = 64;

/// `secs` of a sine at `hz`, sampled at `rate`, about -11 dBFS: what a backend plays.
pub fn tone(hz: f32, secs: f32, rate: u32) -> Vec<i16> {
    let n = (secs * rate as f32) as usize;
    (0..n)
        .map(|i| ((i as f32 / rate as f32 * hz * std::f32::consts::TAU).sin() * 9000.0) as i16)
        .collect()
}

/// What one session's stream delivered.
#[derive(Debug, Default, Clone)]
pub struct SessionLog {
    pub attempt: u32,
    /// `Dispatch.call_id`, and `Dispatch.resume` when the session resumed a call.
    pub call_id: String,
    pub resume: Option<ResumeOffer>,
    pub metadata: HashMap<String, String>,
    /// (sequence, concealed, received at)
    pub frames: Vec<(u64, bool, Instant)>,
    pub pcm: Vec<i16>,
    pub events: Vec<(i32, String)>,
    pub progress: Vec<PlaybackProgress>,
    pub cleared: Vec<(Cleared, Instant)>,
    pub data: Vec<String>,
    /// Passthrough mode: the raw Opus packets, in order.
    pub opus: Vec<Vec<u8>>,
    /// Turns the caller's browser reported, as the transceiver split them.
    pub turns: Vec<TurnLatency>,
    /// PCM frames at -50 dBFS RMS or louder, and when the last one arrived: the caller's
    /// speech as a backend's voice activity detector would see it.
    pub loud_frames: u64,
    pub last_loud_at: Option<Instant>,
    pub ended: bool,
    /// The transceiver's `closed` for the call: a `Multiplex` channel's (its code and message),
    /// or the status a `Session` stream failed to open with.
    pub closed: Option<(i32, String)>,
}

#[derive(Default)]
struct Shared {
    sessions: Mutex<HashMap<String, SessionLog>>,
    downlinks: Mutex<HashMap<String, CallSender>>,
    stalled: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// The worker's `Multiplex` stream, and whether its reader stops (all its calls at once).
    mux: Mutex<Option<Arc<MultiplexClient<Recorder>>>>,
    mux_stalled: Arc<AtomicBool>,
    /// The calls this worker serves, by call id, at the generation it serves each at: a
    /// resume is taken at that generation only ("resume_stale" below it, "resume_unknown"
    /// for a call it never served), as the Python SDK decides.
    calls: Mutex<HashMap<String, u32>>,
    /// Resume offers declined, with the reason.
    pub declined: Mutex<Vec<(String, String)>>,
}

/// What a worker that serves calls does with an offer: attach it (`None`), or decline it with
/// a reason (a resume of a call it does not serve at that generation).
fn resume_decision(shared: &Shared, dispatch: &voxgate_proto::bridge::Dispatch) -> Option<String> {
    let call_id = if dispatch.call_id.is_empty() {
        dispatch.session_id.clone()
    } else {
        dispatch.call_id.clone()
    };
    let mut calls = shared.calls.lock().unwrap();
    match &dispatch.resume {
        None => {
            calls.entry(call_id).or_insert(1);
            None
        }
        Some(r) => match calls.get_mut(&r.call_id) {
            None => Some("resume_unknown".into()),
            Some(g) if *g != r.generation => Some("resume_stale".into()),
            Some(g) => {
                *g = r.generation + 1;
                None
            }
        },
    }
}

/// One session's handler: files what arrives under the session's id.
struct Recorder {
    shared: Arc<Shared>,
    session_id: String,
    /// While set, the reader holds (a stuck backend).
    stalled: Arc<AtomicBool>,
    /// Whether the call's downlink is filed for the test's sends. Its attach files it once
    /// queued; the first event files it too, before anything that event tells a test is
    /// recorded, in case the answer beat the attach's caller to it.
    filed: bool,
}

impl CallHandler for Recorder {
    async fn handle(&mut self, event: CallEvent, call: &CallSender) {
        while self.stalled.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !self.filed {
            self.filed = true;
            file_downlink(&self.shared, &self.session_id, call);
        }
        match event {
            CallEvent::Uplink(m) => record(&self.shared, &self.session_id, m.kind),
            CallEvent::Closed(status) => {
                let mut logs = self.shared.sessions.lock().unwrap();
                let log = logs.entry(self.session_id.clone()).or_default();
                log.closed = Some((status.code() as i32, status.message().to_string()));
                log.ended = true;
            }
            CallEvent::StreamGone(_) => {
                let mut logs = self.shared.sessions.lock().unwrap();
                if let Some(log) = logs.get_mut(&self.session_id) {
                    log.ended = true;
                }
            }
        }
    }
}

/// Files `call` as `session_id`'s downlink unless one is filed (the attach files it for good).
fn file_downlink(shared: &Shared, session_id: &str, call: &CallSender) {
    let mut downlinks = shared.downlinks.lock().unwrap();
    downlinks
        .entry(session_id.to_string())
        .or_insert_with(|| call.clone());
}

/// Files a new attach's downlink: the latest call of a session is the one a test talks to.
fn file_attached(shared: &Shared, session_id: String, call: CallSender) {
    shared.downlinks.lock().unwrap().insert(session_id, call);
}

pub struct TestWorker {
    pub worker_id: String,
    pub transport: Transport,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn connect(url: &str) -> Bridge {
    // HTTP/2's default windows (the client's, for what the server sends) let megabytes queue
    // up in the transport; small windows make a stuck reader visible to the server quickly.
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .expect("bridge url")
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(1 << 20);
    let pause = Duration::from_millis(100);
    let authorization = super::grpc_credential(url)
        .map(|token| voxgate_backend_kit::bearer(&token).expect("a token fit for a header"));
    match Bridge::connect_retrying(&endpoint, authorization, 50, pause).await {
        Ok(bridge) => bridge,
        Err(e) => panic!("{e}"),
    }
}

/// The attach a worker sends for a dispatched session.
fn attach_settings(
    worker_id: &str,
    sample_rate: u32,
    mode: AudioMode,
    encoder: Option<OpusEncoder>,
) -> AttachSettings {
    AttachSettings {
        worker_id: worker_id.to_string(),
        sample_rate_hz: sample_rate,
        mode,
        progress_interval_ms: 100,
        encoder,
    }
}

impl TestWorker {
    /// Registers `worker_id` with `capacity` and attaches every dispatched session at
    /// `sample_rate`.
    pub fn start(url: &str, worker_id: &str, capacity: u32, sample_rate: u32) -> TestWorker {
        Self::start_with_mode(url, worker_id, capacity, sample_rate, AudioMode::Pcm)
    }

    /// As [`TestWorker::start`], attaching in `mode` (PCM or Opus passthrough).
    pub fn start_with_mode(
        url: &str,
        worker_id: &str,
        capacity: u32,
        sample_rate: u32,
        mode: AudioMode,
    ) -> TestWorker {
        Self::start_with_attach(url, worker_id, capacity, sample_rate, mode, None)
    }

    /// As [`TestWorker::start_with_mode`], over `transport`.
    pub fn start_over(
        url: &str,
        worker_id: &str,
        capacity: u32,
        sample_rate: u32,
        mode: AudioMode,
        transport: Transport,
    ) -> TestWorker {
        let settings = attach_settings(worker_id, sample_rate, mode, None);
        Self::start_full(url, capacity, settings, transport)
    }

    /// As [`TestWorker::start_with_mode`], asking for its own downlink `encoder`.
    pub fn start_with_attach(
        url: &str,
        worker_id: &str,
        capacity: u32,
        sample_rate: u32,
        mode: AudioMode,
        encoder: Option<OpusEncoder>,
    ) -> TestWorker {
        let settings = attach_settings(worker_id, sample_rate, mode, encoder);
        Self::start_full(url, capacity, settings, Transport::Session)
    }

    /// The same worker (its id and the calls it serves) subscribed to another transceiver too,
    /// as a backend process subscribes to every transceiver of a fleet: a call it serves on
    /// one may resume on the other. Calls ride a `Session` stream each.
    pub fn start_beside(
        url: &str,
        other: &TestWorker,
        capacity: u32,
        sample_rate: u32,
    ) -> TestWorker {
        let settings = attach_settings(&other.worker_id, sample_rate, AudioMode::Pcm, None);
        Self::start_sharing(
            url,
            capacity,
            settings,
            Transport::Session,
            other.shared.clone(),
        )
    }

    /// Resume offers this worker declined: (session id, reason).
    pub fn declined(&self) -> Vec<(String, String)> {
        self.shared.declined.lock().unwrap().clone()
    }

    fn start_full(
        url: &str,
        capacity: u32,
        settings: AttachSettings,
        transport: Transport,
    ) -> TestWorker {
        Self::start_sharing(
            url,
            capacity,
            settings,
            transport,
            Arc::new(Shared::default()),
        )
    }

    fn start_sharing(
        url: &str,
        capacity: u32,
        settings: AttachSettings,
        transport: Transport,
        shared: Arc<Shared>,
    ) -> TestWorker {
        let rt = runtime();
        let url = url.to_string();
        let worker_id = settings.worker_id.clone();
        let (registered_tx, registered_rx) = std::sync::mpsc::channel();
        {
            let shared = shared.clone();
            rt.spawn(async move {
                let bridge = connect(&url).await;
                if transport == Transport::Multiplex {
                    let mux = MultiplexClient::open(&bridge, DOWNLINK_QUEUE)
                        .await
                        .expect("Multiplex call");
                    *shared.mux.lock().unwrap() = Some(Arc::new(mux));
                }
                let registration = Registration {
                    worker_id: settings.worker_id.clone(),
                    capacity,
                    active: 0,
                };
                let mut work = WorkStream::open(&bridge, &registration)
                    .await
                    .expect("Work call");
                let _ = registered_tx.send(());
                while let Ok(Some(offer)) = work.next_offer().await {
                    {
                        let mut logs = shared.sessions.lock().unwrap();
                        let log = logs.entry(offer.session_id().to_string()).or_default();
                        log.attempt = offer.attempt();
                        log.metadata = offer.metadata().clone();
                        log.call_id = offer.dispatch().call_id.clone();
                        log.resume = offer.dispatch().resume.clone();
                    }
                    if let Some(reason) = resume_decision(&shared, offer.dispatch()) {
                        shared
                            .declined
                            .lock()
                            .unwrap()
                            .push((offer.session_id().to_string(), reason.clone()));
                        work.sender().reject(offer.decline(reason)).await;
                        continue;
                    }
                    let attach = offer.attach(&settings);
                    match transport {
                        Transport::Session => attach_over_session(&shared, &url, attach),
                        Transport::Multiplex => attach_over_mux(&shared, attach).await,
                    }
                }
            });
        }
        registered_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("worker registered");
        TestWorker {
            worker_id,
            transport,
            shared,
            runtime: Some(rt),
        }
    }

    pub fn sessions(&self) -> HashMap<String, SessionLog> {
        self.shared.sessions.lock().unwrap().clone()
    }

    /// The caller's speech so far (`SessionLog::loud_frames`, `last_loud_at`) and the turns
    /// reported, without copying the session's audio.
    pub fn speech(&self, id: &str) -> (u64, Option<Instant>, Vec<TurnLatency>) {
        let logs = self.shared.sessions.lock().unwrap();
        logs.get(id).map_or((0, None, Vec::new()), |l| {
            (l.loud_frames, l.last_loud_at, l.turns.clone())
        })
    }

    pub fn session(&self, id: &str) -> Option<SessionLog> {
        self.shared.sessions.lock().unwrap().get(id).cloned()
    }

    pub fn attached(&self) -> Vec<String> {
        let logs = self.shared.sessions.lock().unwrap();
        logs.iter()
            .filter(|(_, l)| {
                l.events
                    .iter()
                    .any(|(k, _)| *k == session_event::Kind::Attached as i32)
                    && !l.ended
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Queues downlink PCM (48 kHz or the attach rate) for `session`, in chunks of at most
    /// one second, as a real backend streams it: the transceiver drops a backend message over
    /// 256 KiB (20 s of 48 kHz PCM in one message would never play). Chunks of one item are
    /// one item to the transceiver.
    pub fn play(&self, session: &str, pcm: &[i16], item_id: &str) {
        for chunk in pcm.chunks(48_000) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
            self.send(
                session,
                downlink::Kind::Audio(AudioChunk {
                    pcm: bytes.into(),
                    item_id: item_id.to_string(),
                }),
            );
        }
    }

    pub fn clear(&self, session: &str) -> Instant {
        let t = Instant::now();
        self.send(session, downlink::Kind::Clear(Clear {}));
        t
    }

    fn downlink(&self, session: &str) -> CallSender {
        self.shared
            .downlinks
            .lock()
            .unwrap()
            .get(session)
            .cloned()
            .expect("session attached")
    }

    pub fn send(&self, session: &str, kind: downlink::Kind) {
        // Waits for room like a real backend under gRPC flow control.
        let sent = self.downlink(session).blocking_send(kind);
        if let Err(e) = sent {
            panic!("{session}: {e}");
        }
    }

    /// Gives `session` up without ending it: closes its `Session` stream, or releases its
    /// channel.
    pub fn release(&self, session: &str) {
        let down = self.shared.downlinks.lock().unwrap().remove(session);
        if let Some(call) = down {
            call.blocking_release();
        }
    }

    /// Multiplex: attaches `attach.session_id` on a new channel without a dispatch (the log
    /// of that id shows the outcome, `closed` included).
    pub fn attach_channel(&self, attach: Attach) {
        let rt = self.runtime.as_ref().expect("worker running");
        rt.block_on(attach_over_mux(&self.shared, attach));
    }

    /// Multiplex: sends a raw message on the stream, as it is (past the transceiver's limits
    /// too).
    pub fn send_raw(&self, m: ChannelDownlink) {
        let mux = self.shared.mux.lock().unwrap().clone().expect("multiplex");
        let rt = self.runtime.as_ref().expect("worker running");
        rt.block_on(mux.send_unchecked(m))
            .expect("multiplex stream open");
    }

    /// Multiplex: the channel `session` rides on the worker's stream.
    pub fn channel_of(&self, session: &str) -> u64 {
        self.downlink(session)
            .channel_number()
            .expect("a Multiplex channel")
    }

    /// Multiplex: sends `kind` on `session`'s channel as it is, unweighed (past the
    /// transceiver's limit on one message too), as a backend that does not size its messages.
    pub fn send_unweighed(&self, session: &str, kind: downlink::Kind) {
        self.send_raw(ChannelDownlink {
            channel: self.channel_of(session),
            downlink: Some(voxgate_proto::bridge::Downlink { kind: Some(kind) }),
            release: false,
        });
    }

    /// Stops reading `session`'s uplink stream (a stuck backend): on a `Multiplex` stream, the
    /// whole stream.
    pub fn stall(&self, session: &str) {
        if self.transport == Transport::Multiplex {
            self.shared.mux_stalled.store(true, Ordering::Relaxed);
        } else if let Some(f) = self.shared.stalled.lock().unwrap().get(session) {
            f.store(true, Ordering::Relaxed);
        }
    }

    /// Reads again after [`TestWorker::stall`] (a `Multiplex` stream).
    pub fn resume(&self) {
        self.shared.mux_stalled.store(false, Ordering::Relaxed);
    }

    /// Drops every stream at once, as a crashed process would.
    pub fn kill(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for TestWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Attaches a session on a new channel of the worker's `Multiplex` stream.
async fn attach_over_mux(shared: &Arc<Shared>, attach: Attach) {
    let mux = shared
        .mux
        .lock()
        .unwrap()
        .clone()
        .expect("multiplex stream");
    let session_id = attach.session_id.clone();
    let recorder = Recorder {
        shared: shared.clone(),
        session_id: session_id.clone(),
        stalled: shared.mux_stalled.clone(),
        filed: false,
    };
    let call = mux.attach(attach, recorder).await;
    file_attached(shared, session_id, call);
}

/// Attaches a session on a `Session` stream of its own, on a connection of its own.
fn attach_over_session(shared: &Arc<Shared>, url: &str, attach: Attach) {
    let session_id = attach.session_id.clone();
    let stalled = Arc::new(AtomicBool::new(false));
    shared
        .stalled
        .lock()
        .unwrap()
        .insert(session_id.clone(), stalled.clone());
    let (shared, url) = (shared.clone(), url.to_string());
    tokio::spawn(async move {
        let bridge = connect(&url).await;
        let recorder = Recorder {
            shared: shared.clone(),
            session_id: session_id.clone(),
            stalled,
            filed: false,
        };
        let call = attach_session(&bridge, attach, recorder, DOWNLINK_QUEUE);
        file_attached(&shared, session_id, call);
    });
}

fn record(shared: &Shared, session_id: &str, kind: Option<uplink::Kind>) {
    let now = Instant::now();
    let mut logs = shared.sessions.lock().unwrap();
    let log = logs.entry(session_id.to_string()).or_default();
    match kind {
        Some(uplink::Kind::Audio(f)) => {
            log.frames.push((f.sequence, f.concealed, now));
            let start = log.pcm.len();
            log.pcm.extend(
                f.pcm
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
            let frame = &log.pcm[start..];
            let power = frame.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>()
                / frame.len().max(1) as f64;
            // -50 dBFS RMS, the transceiver's and the web client's threshold.
            if !f.concealed && power >= (32768.0 * 10f64.powf(-2.5)).powi(2) {
                log.loud_frames += 1;
                log.last_loud_at = Some(now);
            }
        }
        Some(uplink::Kind::Turn(t)) => log.turns.push(t),
        Some(uplink::Kind::Opus(p)) => log.opus.push(p.data.to_vec()),
        Some(uplink::Kind::Event(e)) => log.events.push((e.kind, e.reason)),
        Some(uplink::Kind::Progress(p)) => log.progress.push(p),
        Some(uplink::Kind::Cleared(c)) => log.cleared.push((c, now)),
        Some(uplink::Kind::Data(d)) => {
            if let Some(voxgate_proto::bridge::data_message::Payload::Text(t)) = d.payload {
                log.data.push(t);
            }
        }
        _ => {}
    }
}

/// A listen-only tap on a session, recording its frames.
pub struct TestTap {
    pub log: Arc<Mutex<SessionLog>>,
    _runtime: tokio::runtime::Runtime,
}

impl TestTap {
    pub fn start(url: &str, session_id: &str) -> TestTap {
        let rt = runtime();
        let log = Arc::new(Mutex::new(SessionLog::default()));
        let (ok_tx, ok_rx) = std::sync::mpsc::channel();
        {
            let log = log.clone();
            let url = url.to_string();
            let session_id = session_id.to_string();
            rt.spawn(async move {
                let bridge = connect(&url).await;
                let mut up = bridge.tap(&session_id, false).await.expect("Tap call");
                let _ = ok_tx.send(());
                while let Ok(Some(m)) = up.message().await {
                    if let Some(uplink::Kind::Audio(f)) = m.kind {
                        let mut l = log.lock().unwrap();
                        l.frames.push((f.sequence, f.concealed, Instant::now()));
                        l.pcm.extend(
                            f.pcm
                                .chunks_exact(2)
                                .map(|b| i16::from_le_bytes([b[0], b[1]])),
                        );
                    }
                }
            });
        }
        ok_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("tap attached");
        TestTap { log, _runtime: rt }
    }
}
