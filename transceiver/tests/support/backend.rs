//! A real gRPC backend for tests: registers as a worker on the transceiver's `Bridge` service,
//! attaches every dispatched session, records everything it receives, and lets the test push
//! downlink messages. Runs on its own tokio runtime; dropping it (or `kill`) drops every
//! stream, as a crashed backend would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{
    downlink, session_event, uplink, worker_command, worker_message, Attach, AudioChunk, AudioMode,
    ChannelDownlink, Clear, Cleared, Downlink, MultiplexDownlink, OpusEncoder, PlaybackProgress,
    Register, TapRequest, WorkerMessage,
};

/// How the worker's sessions reach the transceiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A `Session` stream per session.
    Session,
    /// One `Multiplex` stream for all of them, a channel each.
    Multiplex,
}

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
    /// A `Multiplex` channel's `closed`: its code and message.
    pub closed: Option<(i32, String)>,
}

/// Where a session's downlink messages go.
#[derive(Clone)]
enum DownTx {
    Stream(mpsc::Sender<Downlink>),
    Channel {
        tx: mpsc::Sender<ChannelDownlink>,
        channel: u64,
    },
}

#[derive(Default)]
struct Shared {
    sessions: Mutex<HashMap<String, SessionLog>>,
    downlinks: Mutex<HashMap<String, DownTx>>,
    stalled: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Multiplex: the stream's sender, its channels' sessions, the next channel number, and
    /// whether its reader has stopped.
    mux: Mutex<Option<mpsc::Sender<ChannelDownlink>>>,
    channels: Mutex<HashMap<u64, String>>,
    next_channel: AtomicU64,
    mux_stalled: Arc<AtomicBool>,
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

/// The attach a worker sends for a dispatched session.
#[derive(Clone)]
struct AttachAs {
    worker_id: String,
    sample_rate: u32,
    mode: AudioMode,
    encoder: Option<OpusEncoder>,
}

impl AttachAs {
    fn attach(&self, session_id: &str) -> Attach {
        Attach {
            session_id: session_id.to_string(),
            worker_id: self.worker_id.clone(),
            sample_rate_hz: self.sample_rate,
            mode: self.mode as i32,
            progress_interval_ms: 100,
            encoder: self.encoder,
        }
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
        let attach = AttachAs {
            worker_id: worker_id.to_string(),
            sample_rate,
            mode,
            encoder: None,
        };
        Self::start_full(url, capacity, attach, transport)
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
        let attach = AttachAs {
            worker_id: worker_id.to_string(),
            sample_rate,
            mode,
            encoder,
        };
        Self::start_full(url, capacity, attach, Transport::Session)
    }

    fn start_full(url: &str, capacity: u32, attach: AttachAs, transport: Transport) -> TestWorker {
        let shared = Arc::new(Shared::default());
        let rt = runtime();
        let url = url.to_string();
        let worker_id = attach.worker_id.clone();
        let (registered_tx, registered_rx) = std::sync::mpsc::channel();
        {
            let shared = shared.clone();
            rt.spawn(async move {
                let mut client = connect(&url).await;
                if transport == Transport::Multiplex {
                    open_multiplex(&shared, &mut client).await;
                }
                let (tx, rx) = mpsc::channel(16);
                tx.send(WorkerMessage {
                    kind: Some(worker_message::Kind::Register(Register {
                        worker_id: attach.worker_id.clone(),
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
                        {
                            let mut logs = shared.sessions.lock().unwrap();
                            let log = logs.entry(d.session_id.clone()).or_default();
                            log.attempt = d.attempt;
                            log.metadata = d.metadata.clone();
                        }
                        let attach = attach.attach(&d.session_id);
                        match transport {
                            Transport::Session => {
                                let (shared, url) = (shared.clone(), url.clone());
                                tokio::spawn(async move {
                                    run_session(shared, &url, attach).await;
                                });
                            }
                            Transport::Multiplex => attach_channel(&shared, attach).await,
                        }
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

    fn downlink(&self, session: &str) -> DownTx {
        self.shared
            .downlinks
            .lock()
            .unwrap()
            .get(session)
            .cloned()
            .expect("session attached")
    }

    pub fn send(&self, session: &str, kind: downlink::Kind) {
        let msg = Downlink { kind: Some(kind) };
        // Waits for room like a real backend under gRPC flow control.
        match self.downlink(session) {
            DownTx::Stream(tx) => tx.blocking_send(msg).expect("session stream open"),
            DownTx::Channel { tx, channel } => tx
                .blocking_send(ChannelDownlink {
                    channel,
                    downlink: Some(msg),
                    release: false,
                })
                .expect("multiplex stream open"),
        }
    }

    /// Gives `session` up without ending it: closes its `Session` stream, or releases its
    /// channel.
    pub fn release(&self, session: &str) {
        let down = self.shared.downlinks.lock().unwrap().remove(session);
        if let Some(DownTx::Channel { tx, channel }) = down {
            tx.blocking_send(ChannelDownlink {
                channel,
                downlink: None,
                release: true,
            })
            .expect("multiplex stream open");
        }
    }

    /// Multiplex: attaches `attach.session_id` on a new channel without a dispatch (the log
    /// of that id shows the outcome, `closed` included).
    pub fn attach_channel(&self, attach: Attach) {
        let rt = self.runtime.as_ref().expect("worker running");
        rt.block_on(attach_channel(&self.shared, attach));
    }

    /// Multiplex: sends a raw message on the stream.
    pub fn send_raw(&self, m: ChannelDownlink) {
        let tx = self.shared.mux.lock().unwrap().clone().expect("multiplex");
        tx.blocking_send(m).expect("multiplex stream open");
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

/// Opens the worker's `Multiplex` stream and starts its reader, which files each channel's
/// messages under its session.
async fn open_multiplex(
    shared: &Arc<Shared>,
    client: &mut BridgeClient<tonic::transport::Channel>,
) {
    let (tx, rx) = mpsc::channel(64);
    let outbound = ReceiverStream::new(rx).map(|m| MultiplexDownlink { messages: vec![m] });
    let mut up = client
        .multiplex(outbound)
        .await
        .expect("Multiplex call")
        .into_inner();
    *shared.mux.lock().unwrap() = Some(tx);
    let shared = shared.clone();
    tokio::spawn(async move {
        loop {
            while shared.mux_stalled.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let batch = match up.message().await {
                Ok(Some(b)) => b,
                _ => break,
            };
            for m in batch.messages {
                let Some(id) = shared.channels.lock().unwrap().get(&m.channel).cloned() else {
                    continue;
                };
                if let Some(u) = m.uplink {
                    record(&shared, &id, u.kind);
                }
                if let Some(c) = m.closed {
                    let mut logs = shared.sessions.lock().unwrap();
                    let log = logs.entry(id).or_default();
                    log.closed = Some((c.code, c.message));
                    log.ended = true;
                }
            }
        }
        for log in shared.sessions.lock().unwrap().values_mut() {
            log.ended = true;
        }
    });
}

/// Attaches a session on a new channel of the worker's `Multiplex` stream.
async fn attach_channel(shared: &Arc<Shared>, attach: Attach) {
    let channel = shared.next_channel.fetch_add(1, Ordering::Relaxed) + 1;
    let id = attach.session_id.clone();
    let tx = shared
        .mux
        .lock()
        .unwrap()
        .clone()
        .expect("multiplex stream");
    shared.channels.lock().unwrap().insert(channel, id.clone());
    shared.downlinks.lock().unwrap().insert(
        id,
        DownTx::Channel {
            tx: tx.clone(),
            channel,
        },
    );
    let _ = tx
        .send(ChannelDownlink {
            channel,
            downlink: Some(Downlink {
                kind: Some(downlink::Kind::Attach(attach)),
            }),
            release: false,
        })
        .await;
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
        .insert(session_id.to_string(), DownTx::Stream(tx));
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
