//! A real gRPC backend for tests: registers as a worker on the transceiver's `Bridge` service,
//! attaches every dispatched session, records everything it receives, and lets the test push
//! downlink messages. Runs on its own tokio runtime; dropping it (or `kill`) drops every
//! stream, as a crashed backend would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{
    downlink, session_event, uplink, worker_command, worker_message, Attach, AudioChunk, AudioMode,
    Clear, Cleared, Downlink, OpusEncoder, PlaybackProgress, Register, TapRequest, WorkerMessage,
};

/// What one session's stream delivered.
#[derive(Debug, Default, Clone)]
pub struct SessionLog {
    pub attempt: u32,
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
    pub ended: bool,
}

#[derive(Default)]
struct Shared {
    sessions: Mutex<HashMap<String, SessionLog>>,
    downlinks: Mutex<HashMap<String, mpsc::Sender<Downlink>>>,
    stalled: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

pub struct TestWorker {
    pub worker_id: String,
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

async fn connect(url: &str) -> BridgeClient<tonic::transport::Channel> {
    // HTTP/2's default windows (the client's, for what the server sends) let megabytes queue
    // up in the transport; small windows make a stuck reader visible to the server quickly.
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .expect("bridge url")
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(1 << 20);
    for _ in 0..50 {
        if let Ok(ch) = endpoint.connect().await {
            return BridgeClient::new(ch);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cannot connect to the bridge at {url}");
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

    /// As [`TestWorker::start_with_mode`], asking for its own downlink `encoder`.
    pub fn start_with_attach(
        url: &str,
        worker_id: &str,
        capacity: u32,
        sample_rate: u32,
        mode: AudioMode,
        encoder: Option<OpusEncoder>,
    ) -> TestWorker {
        let shared = Arc::new(Shared::default());
        let rt = runtime();
        let url = url.to_string();
        let (registered_tx, registered_rx) = std::sync::mpsc::channel();
        {
            let shared = shared.clone();
            let worker_id = worker_id.to_string();
            rt.spawn(async move {
                let mut client = connect(&url).await;
                let (tx, rx) = mpsc::channel(16);
                tx.send(WorkerMessage {
                    kind: Some(worker_message::Kind::Register(Register {
                        worker_id: worker_id.clone(),
                        capacity,
                    })),
                })
                .await
                .unwrap();
                let mut commands = client
                    .work(ReceiverStream::new(rx))
                    .await
                    .expect("Work call")
                    .into_inner();
                let _ = registered_tx.send(());
                let _keep_open = tx;
                while let Ok(Some(cmd)) = commands.message().await {
                    if let Some(worker_command::Kind::Dispatch(d)) = cmd.kind {
                        let shared = shared.clone();
                        let url = url.clone();
                        let worker_id = worker_id.clone();
                        tokio::spawn(async move {
                            shared
                                .sessions
                                .lock()
                                .unwrap()
                                .entry(d.session_id.clone())
                                .or_default()
                                .attempt = d.attempt;
                            shared
                                .sessions
                                .lock()
                                .unwrap()
                                .get_mut(&d.session_id)
                                .unwrap()
                                .metadata = d.metadata.clone();
                            let attach = Attach {
                                session_id: d.session_id.clone(),
                                worker_id,
                                sample_rate_hz: sample_rate,
                                mode: mode as i32,
                                progress_interval_ms: 100,
                                encoder,
                            };
                            run_session(shared, &url, attach).await;
                        });
                    }
                }
            });
        }
        registered_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("worker registered");
        TestWorker {
            worker_id: worker_id.to_string(),
            shared,
            runtime: Some(rt),
        }
    }

    pub fn sessions(&self) -> HashMap<String, SessionLog> {
        self.shared.sessions.lock().unwrap().clone()
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
    /// one second, as a real backend streams it: the transceiver refuses gRPC messages over
    /// 256 KiB (20 s of 48 kHz PCM in one message would end the stream). Chunks of one item
    /// are one item to the transceiver.
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

    pub fn send(&self, session: &str, kind: downlink::Kind) {
        let tx = self
            .shared
            .downlinks
            .lock()
            .unwrap()
            .get(session)
            .cloned()
            .expect("session attached");
        // Waits for room like a real backend under gRPC flow control.
        tx.blocking_send(Downlink { kind: Some(kind) })
            .expect("session stream open");
    }

    /// Stops reading `session`'s uplink stream (a stuck backend).
    pub fn stall(&self, session: &str) {
        if let Some(f) = self.shared.stalled.lock().unwrap().get(session) {
            f.store(true, Ordering::Relaxed);
        }
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

async fn run_session(shared: Arc<Shared>, url: &str, attach: Attach) {
    let session_id = attach.session_id.clone();
    let session_id = session_id.as_str();
    let mut client = connect(url).await;
    let (tx, rx) = mpsc::channel(64);
    tx.send(Downlink {
        kind: Some(downlink::Kind::Attach(attach)),
    })
    .await
    .unwrap();
    let stalled = Arc::new(AtomicBool::new(false));
    shared
        .stalled
        .lock()
        .unwrap()
        .insert(session_id.to_string(), stalled.clone());
    shared
        .downlinks
        .lock()
        .unwrap()
        .insert(session_id.to_string(), tx);
    let Ok(resp) = client.session(ReceiverStream::new(rx)).await else {
        return;
    };
    let mut up = resp.into_inner();
    loop {
        while stalled.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let msg = match up.message().await {
            Ok(Some(m)) => m,
            _ => break,
        };
        record(&shared, session_id, msg.kind);
    }
    if let Some(l) = shared.sessions.lock().unwrap().get_mut(session_id) {
        l.ended = true;
    }
}

fn record(shared: &Shared, session_id: &str, kind: Option<uplink::Kind>) {
    let now = Instant::now();
    let mut logs = shared.sessions.lock().unwrap();
    let log = logs.entry(session_id.to_string()).or_default();
    match kind {
        Some(uplink::Kind::Audio(f)) => {
            log.frames.push((f.sequence, f.concealed, now));
            log.pcm.extend(
                f.pcm
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
        }
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
                let mut client = connect(&url).await;
                let mut up = client
                    .tap(TapRequest {
                        session_id,
                        sample_rate_hz: 0,
                    })
                    .await
                    .expect("Tap call")
                    .into_inner();
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
