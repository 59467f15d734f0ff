//! The load generator's own inference backend: a gRPC worker on the transceiver's `Bridge`
//! service that attaches every session dispatched to it and either echoes what it hears, plays
//! a downlink duty cycle (e.g. 1 s of audio every 2 s), or only listens.
//!
//! It is also where uplink media is measured: for each frame it notes the time it arrived
//! (the wall clock, same machine as the transceiver) against the frame's
//! `arrival_unix_micros` (when the packet reached the transceiver's socket), feeds the session's
//! [`UplinkTrack`] (loss), and remembers when the first frame came (setup latency).
//!
//! Runs on its own small tokio runtime. Its sessions either each get a `Session` stream (shared
//! among a few HTTP/2 connections), or all ride one `Multiplex` stream, a channel each
//! ([`BackendConfig::multiplex`]), as a backend process that owns many calls would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{
    downlink, session_event, uplink, worker_command, worker_message, Attach, AudioChunk, AudioMode,
    ChannelDownlink, Downlink, MultiplexDownlink, OpusPacket, Register, Uplink, WorkerMessage,
};

use crate::loss::UplinkTrack;

/// HTTP/2 connections shared by all session streams.
const CHANNELS: usize = 4;
/// Downlink messages buffered per session on our side.
const DOWNLINK_BUFFER: usize = 128;

/// What the backend does with each session's audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Send every uplink frame straight back (PCM chunk or Opus packet).
    Echo,
    /// Play `on` of a tone every `period`, starting at a per-session phase. With `random_gaps`
    /// each session's next turn comes after `on` plus a uniform draw of 0 to
    /// `2 × (period − on)` (its own seeded sequence): the same share of time talking, but
    /// sessions come and go independently, as conversations do, instead of in a fixed rota
    /// where the number talking at once hardly moves.
    Duty {
        on: Duration,
        period: Duration,
        random_gaps: bool,
    },
    /// Listen only.
    Listen,
}

/// How to run the backend.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// gRPC URL of the transceiver's bridge, e.g. `http://127.0.0.1:50051`.
    pub url: String,
    pub worker_id: String,
    pub capacity: u32,
    pub mode: AudioMode,
    pub behaviour: Behaviour,
    /// PCM sample rate asked for at attach.
    pub sample_rate: u32,
    /// Attach every session on one `Multiplex` stream instead of a `Session` stream each.
    pub multiplex: bool,
}

/// What one session's stream delivered.
#[derive(Debug, Clone)]
pub struct SessionStats {
    pub dispatched_at: Instant,
    pub first_frame_at: Option<Instant>,
    pub uplink: UplinkTrack,
    /// Transceiver socket arrival → received here, in microseconds (only while recording).
    pub latency_us: Vec<f64>,
    /// Downlink messages sent (audio chunks or Opus packets).
    pub downlink_sent: u64,
    /// Echo messages dropped because our send buffer was full.
    pub downlink_dropped: u64,
    /// Why the session ended, if it did.
    pub ended: Option<String>,
}

#[derive(Default)]
struct State {
    sessions: Mutex<HashMap<String, Arc<Mutex<SessionStats>>>>,
    recording: AtomicBool,
    frames: AtomicU64,
    dispatches: AtomicU64,
    errors: AtomicU64,
}

/// A running backend; dropping it drops every stream (as a crashed backend would).
pub struct Backend {
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Backend {
    /// Connects, registers as a worker, and returns once the transceiver accepted it.
    pub fn start(cfg: BackendConfig) -> anyhow::Result<Backend> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("backend")
            .enable_all()
            .build()
            .context("backend runtime")?;
        let state = Arc::new(State::default());
        let audio = Arc::new(DutyAudio::new(&cfg)?);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        {
            let state = state.clone();
            runtime.spawn(async move {
                let r = run_worker(cfg, state, audio, ready_tx.clone()).await;
                if let Err(e) = r {
                    let _ = ready_tx.send(Err(e));
                }
            });
        }
        match ready_rx.recv_timeout(Duration::from_secs(15)) {
            Ok(Ok(())) => Ok(Backend {
                state,
                runtime: Some(runtime),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => anyhow::bail!("backend did not register within 15 s"),
        }
    }

    /// Starts or stops collecting media-latency samples.
    pub fn set_recording(&self, on: bool) {
        self.state.recording.store(on, Ordering::Relaxed);
    }

    /// Uplink frames received so far (all sessions).
    pub fn frames(&self) -> u64 {
        self.state.frames.load(Ordering::Relaxed)
    }

    /// Sessions dispatched to this worker so far.
    pub fn dispatches(&self) -> u64 {
        self.state.dispatches.load(Ordering::Relaxed)
    }

    /// Streams that failed to open or broke.
    pub fn errors(&self) -> u64 {
        self.state.errors.load(Ordering::Relaxed)
    }

    /// A copy of every session's record, by session id.
    pub fn snapshot(&self) -> HashMap<String, SessionStats> {
        let sessions = lock(&self.state.sessions);
        sessions
            .iter()
            .map(|(id, s)| (id.clone(), lock(s).clone()))
            .collect()
    }

    /// Drops every stream now.
    pub fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pre-made downlink audio: one `on` period of a tone, as PCM and as Opus packets.
struct DutyAudio {
    pcm: Bytes,
    opus: Vec<Bytes>,
}

impl DutyAudio {
    fn new(cfg: &BackendConfig) -> anyhow::Result<DutyAudio> {
        let on = match cfg.behaviour {
            Behaviour::Duty { on, .. } => on,
            _ => {
                return Ok(DutyAudio {
                    pcm: Bytes::new(),
                    opus: Vec::new(),
                })
            }
        };
        let frames = (on.as_millis() / 20).max(1) as usize;
        let rate = if cfg.sample_rate == 0 {
            48_000
        } else {
            cfg.sample_rate
        };
        let mut tone = voxgate_testkit::SignalSource::sine(330.0, 0.25);
        let mut pcm48 = Vec::with_capacity(frames * 960);
        for _ in 0..frames {
            pcm48.extend_from_slice(&tone.next_frame());
        }
        // Decimate the 48 kHz tone for lower attach rates (a tone needs no filter here).
        let step = (48_000 / rate) as usize;
        let pcm: Vec<u8> = pcm48
            .iter()
            .step_by(step.max(1))
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let mut enc = voxgate_testkit::opus_codec::OpusFrameEncoder::new()?;
        let opus = pcm48
            .chunks_exact(960)
            .map(|f| enc.encode(f).map(Bytes::copy_from_slice))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DutyAudio {
            pcm: Bytes::from(pcm),
            opus,
        })
    }
}

async fn connect(url: &str) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(url.to_string())
        .context("bridge url")?
        .tcp_nodelay(true);
    let mut last = None;
    for _ in 0..100 {
        match endpoint.connect().await {
            Ok(ch) => return Ok(ch),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(anyhow::anyhow!(
        "cannot connect to the bridge at {url}: {last:?}"
    ))
}

async fn run_worker(
    cfg: BackendConfig,
    state: Arc<State>,
    audio: Arc<DutyAudio>,
    ready: std::sync::mpsc::Sender<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let mut channels = Vec::with_capacity(CHANNELS);
    for _ in 0..CHANNELS {
        channels.push(connect(&cfg.url).await?);
    }
    let mut client = BridgeClient::new(channels[0].clone());
    let (tx, rx) = mpsc::channel(16);
    tx.send(WorkerMessage {
        kind: Some(worker_message::Kind::Register(Register {
            worker_id: cfg.worker_id.clone(),
            capacity: cfg.capacity,
        })),
    })
    .await
    .context("register")?;
    let mut commands = client
        .work(ReceiverStream::new(rx))
        .await
        .context("Work call")?
        .into_inner();
    let mux = if cfg.multiplex {
        Some(open_multiplex(&mut client, state.clone()).await?)
    } else {
        None
    };
    let _ = ready.send(Ok(()));
    let _keep_open = tx;
    let cfg = Arc::new(cfg);
    let mut k: u64 = 0;
    while let Ok(Some(cmd)) = commands.message().await {
        let Some(worker_command::Kind::Dispatch(d)) = cmd.kind else {
            continue;
        };
        state.dispatches.fetch_add(1, Ordering::Relaxed);
        let stats = Arc::new(Mutex::new(SessionStats {
            dispatched_at: Instant::now(),
            first_frame_at: None,
            uplink: UplinkTrack::default(),
            latency_us: Vec::new(),
            downlink_sent: 0,
            downlink_dropped: 0,
            ended: None,
        }));
        lock(&state.sessions).insert(d.session_id.clone(), stats.clone());
        // Spread duty-cycle phases evenly and deterministically (golden-ratio sequence).
        let phase = (k as f64 * 0.618_033_988_75).fract();
        let attach = Attach {
            session_id: d.session_id.clone(),
            worker_id: cfg.worker_id.clone(),
            sample_rate_hz: cfg.sample_rate,
            mode: cfg.mode as i32,
            progress_interval_ms: 1000,
            encoder: None,
        };
        let call = Call {
            cfg: cfg.clone(),
            audio: audio.clone(),
            stats,
            phase,
            seed: k,
            duty_started: false,
        };
        if let Some(mux) = &mux {
            mux.attach(k + 1, attach, call).await;
        } else {
            let channel = channels[(k as usize) % channels.len()].clone();
            let state = state.clone();
            tokio::spawn(async move {
                if let Err(e) = run_session(&state, channel, attach, call).await {
                    state.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %e, "backend session failed");
                }
            });
        }
        k += 1;
    }
    Ok(())
}

fn unix_micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Where one session's downlink messages go.
#[derive(Clone)]
enum DownSink {
    Session(mpsc::Sender<Downlink>),
    Channel {
        tx: mpsc::Sender<ChannelDownlink>,
        channel: u64,
    },
}

impl DownSink {
    /// Waits for room (the stream's flow control).
    async fn send(&self, msg: Downlink) -> bool {
        match self {
            DownSink::Session(tx) => tx.send(msg).await.is_ok(),
            DownSink::Channel { tx, channel } => tx.send(on_channel(*channel, msg)).await.is_ok(),
        }
    }

    /// Queues without waiting; false when there is no room.
    fn try_send(&self, msg: Downlink) -> bool {
        match self {
            DownSink::Session(tx) => tx.try_send(msg).is_ok(),
            DownSink::Channel { tx, channel } => tx.try_send(on_channel(*channel, msg)).is_ok(),
        }
    }
}

fn on_channel(channel: u64, msg: Downlink) -> ChannelDownlink {
    ChannelDownlink {
        channel,
        downlink: Some(msg),
        release: false,
    }
}

/// One dispatched session: what it measures and plays, whichever stream carries it.
struct Call {
    cfg: Arc<BackendConfig>,
    audio: Arc<DutyAudio>,
    stats: Arc<Mutex<SessionStats>>,
    phase: f64,
    /// Seeds the session's random gaps between turns.
    seed: u64,
    duty_started: bool,
}

impl Call {
    /// Handles one uplink message; returns false once the session ended.
    fn on_uplink(&mut self, state: &State, down: &DownSink, msg: Uplink) -> bool {
        let now = Instant::now();
        let (arrival_us, ts, concealed, seq, echo) = match msg.kind {
            Some(uplink::Kind::Audio(f)) => {
                let echo = Downlink {
                    kind: Some(downlink::Kind::Audio(AudioChunk {
                        pcm: f.pcm,
                        item_id: String::new(),
                    })),
                };
                (
                    f.arrival_unix_micros,
                    f.rtp_timestamp,
                    f.concealed,
                    Some(f.sequence),
                    echo,
                )
            }
            Some(uplink::Kind::Opus(p)) => {
                let echo = Downlink {
                    kind: Some(downlink::Kind::Opus(OpusPacket {
                        data: p.data,
                        ..OpusPacket::default()
                    })),
                };
                (p.arrival_unix_micros, p.rtp_timestamp, false, None, echo)
            }
            Some(uplink::Kind::Event(e)) => {
                if e.kind == session_event::Kind::Ended as i32 {
                    lock(&self.stats).ended = Some(e.reason);
                    return false;
                }
                return true;
            }
            _ => return true,
        };
        state.frames.fetch_add(1, Ordering::Relaxed);
        let recording = state.recording.load(Ordering::Relaxed);
        let mut echo_result = None;
        if self.cfg.behaviour == Behaviour::Echo && !concealed {
            echo_result = Some(down.try_send(echo));
        }
        {
            let mut s = lock(&self.stats);
            s.first_frame_at.get_or_insert(now);
            s.uplink.on_frame(ts, concealed, seq);
            if recording && !concealed {
                s.latency_us.push((unix_micros_now() - arrival_us) as f64);
            }
            match echo_result {
                Some(true) => s.downlink_sent += 1,
                Some(false) => s.downlink_dropped += 1,
                None => {}
            }
        }
        if let (
            Behaviour::Duty {
                on,
                period,
                random_gaps,
            },
            false,
        ) = (self.cfg.behaviour, self.duty_started)
        {
            self.duty_started = true;
            let passthrough = self.cfg.mode == AudioMode::OpusPassthrough;
            let (down, audio, stats) = (down.clone(), self.audio.clone(), self.stats.clone());
            let offset = period.mul_f64(self.phase);
            let gaps = Gaps::new(on, period, random_gaps.then_some(self.seed));
            tokio::spawn(play_duty(down, audio, stats, offset, gaps, passthrough));
        }
        true
    }

    /// The stream ended with an error before the session did.
    fn broke(&self, code: String) {
        lock(&self.stats).ended.get_or_insert(code);
    }
}

async fn run_session(
    state: &State,
    channel: Channel,
    attach: Attach,
    mut call: Call,
) -> anyhow::Result<()> {
    let mut client = BridgeClient::new(channel);
    let (tx, rx) = mpsc::channel(DOWNLINK_BUFFER);
    tx.send(Downlink {
        kind: Some(downlink::Kind::Attach(attach)),
    })
    .await
    .context("attach")?;
    let mut up = client
        .session(ReceiverStream::new(rx))
        .await
        .context("Session call")?
        .into_inner();
    let down = DownSink::Session(tx);
    loop {
        match up.message().await {
            Ok(Some(m)) => {
                if !call.on_uplink(state, &down, m) {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                call.broke(e.code().to_string());
                break;
            }
        }
    }
    Ok(())
}

/// The backend's `Multiplex` stream: attaches sessions on channels; one reader task hands
/// each channel's messages to its [`Call`].
struct Multiplex {
    tx: mpsc::Sender<ChannelDownlink>,
    calls: Arc<Mutex<HashMap<u64, Call>>>,
}

/// Downlink messages waiting to go out on the `Multiplex` stream (all sessions together).
const MUX_DOWNLINK_BUFFER: usize = 4096;
/// Most channel messages per `MultiplexDownlink`.
const MUX_BATCH: usize = 256;
/// Most audio bytes per `MultiplexDownlink`: the transceiver refuses a gRPC message over
/// 256 KiB and ends the stream with every channel on it (a burst of 100 ms PCM chunks at
/// 48 kHz, 9.6 KB each, for 30 sessions is past that).
const MUX_BATCH_BYTES: usize = 192 * 1024;

async fn open_multiplex(
    client: &mut BridgeClient<Channel>,
    state: Arc<State>,
) -> anyhow::Result<Multiplex> {
    let (tx, rx) = mpsc::channel::<ChannelDownlink>(MUX_DOWNLINK_BUFFER);
    // Everything queued when the stream is polled leaves as one message.
    let outbound = Batches::new(rx);
    let mut up = client
        .multiplex(outbound)
        .await
        .context("Multiplex call")?
        .into_inner();
    let calls: Arc<Mutex<HashMap<u64, Call>>> = Arc::default();
    let (reader_calls, down_tx) = (calls.clone(), tx.clone());
    tokio::spawn(async move {
        loop {
            let batch = match up.message().await {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    for call in lock(&reader_calls).values() {
                        call.broke(e.code().to_string());
                    }
                    state.errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            };
            let mut calls = lock(&reader_calls);
            for m in batch.messages {
                let Some(call) = calls.get_mut(&m.channel) else {
                    continue;
                };
                let down = DownSink::Channel {
                    tx: down_tx.clone(),
                    channel: m.channel,
                };
                let live = m.uplink.is_none_or(|u| call.on_uplink(&state, &down, u));
                if let Some(c) = m.closed {
                    if c.code != 0 {
                        call.broke(format!("closed {}: {}", c.code, c.message));
                        state.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    calls.remove(&m.channel);
                } else if !live {
                    calls.remove(&m.channel);
                }
            }
        }
    });
    Ok(Multiplex { tx, calls })
}

impl Multiplex {
    async fn attach(&self, channel: u64, attach: Attach, call: Call) {
        lock(&self.calls).insert(channel, call);
        let msg = Downlink {
            kind: Some(downlink::Kind::Attach(attach)),
        };
        let _ = self.tx.send(on_channel(channel, msg)).await;
    }
}

/// A stream of `MultiplexDownlink`s, each carrying the messages queued on its receiver when it
/// is polled, up to [`MUX_BATCH`] of them and [`MUX_BATCH_BYTES`] of audio.
struct Batches {
    rx: mpsc::Receiver<ChannelDownlink>,
    /// A message taken that did not fit the last batch: the next one starts with it.
    carried: Option<ChannelDownlink>,
}

impl Batches {
    fn new(rx: mpsc::Receiver<ChannelDownlink>) -> Self {
        Batches { rx, carried: None }
    }
}

fn audio_bytes(m: &ChannelDownlink) -> usize {
    match m.downlink.as_ref().and_then(|d| d.kind.as_ref()) {
        Some(downlink::Kind::Audio(a)) => a.pcm.len(),
        Some(downlink::Kind::Opus(p)) => p.data.len(),
        _ => 0,
    }
}

impl tokio_stream::Stream for Batches {
    type Item = MultiplexDownlink;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<MultiplexDownlink>> {
        use std::task::Poll;
        let this = self.get_mut();
        let mut messages = Vec::new();
        let mut bytes = 0;
        if let Some(m) = this.carried.take() {
            bytes += audio_bytes(&m);
            messages.push(m);
        }
        while messages.len() < MUX_BATCH {
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some(m)) => {
                    let n = audio_bytes(&m);
                    if !messages.is_empty() && bytes + n > MUX_BATCH_BYTES {
                        this.carried = Some(m);
                        break;
                    }
                    bytes += n;
                    messages.push(m);
                }
                Poll::Ready(None) if messages.is_empty() => return Poll::Ready(None),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if messages.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(Some(MultiplexDownlink { messages }))
        }
    }
}

/// The time from one turn's start to the next: a fixed period, or `on` plus a seeded uniform
/// draw with the period as its mean.
struct Gaps {
    on: Duration,
    period: Duration,
    rng: Option<rand::rngs::StdRng>,
}

impl Gaps {
    fn new(on: Duration, period: Duration, seed: Option<u64>) -> Self {
        use rand::SeedableRng;
        Gaps {
            on,
            period,
            rng: seed.map(rand::rngs::StdRng::seed_from_u64),
        }
    }

    fn next(&mut self) -> Duration {
        use rand::Rng;
        let Some(rng) = &mut self.rng else {
            return self.period;
        };
        let spread = self.period.saturating_sub(self.on) * 2;
        self.on + spread.mul_f64(rng.random::<f64>())
    }
}

/// Plays `on` of audio at each turn, the first after `offset`, until the stream closes.
async fn play_duty(
    tx: DownSink,
    audio: Arc<DutyAudio>,
    stats: Arc<Mutex<SessionStats>>,
    offset: Duration,
    mut gaps: Gaps,
    passthrough: bool,
) {
    let mut turn = tokio::time::Instant::now() + offset;
    loop {
        // A late turn moves the ones after it (no catching up in a burst).
        tokio::time::sleep_until(turn).await;
        turn = turn.max(tokio::time::Instant::now()) + gaps.next();
        if passthrough {
            for p in &audio.opus {
                let msg = Downlink {
                    kind: Some(downlink::Kind::Opus(OpusPacket {
                        data: p.clone(),
                        ..OpusPacket::default()
                    })),
                };
                if !tx.send(msg).await {
                    return;
                }
            }
            lock(&stats).downlink_sent += audio.opus.len() as u64;
        } else {
            // 100 ms chunks, as a streaming TTS backend (and the example echo bot) sends them;
            // the transceiver queues and paces them.
            let chunk = (audio.pcm.len() / 10).max(2) & !1;
            let mut sent = 0;
            for start in (0..audio.pcm.len()).step_by(chunk) {
                let msg = Downlink {
                    kind: Some(downlink::Kind::Audio(AudioChunk {
                        pcm: audio.pcm.slice(start..(start + chunk).min(audio.pcm.len())),
                        item_id: String::new(),
                    })),
                };
                if !tx.send(msg).await {
                    return;
                }
                sent += 1;
            }
            lock(&stats).downlink_sent += sent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    #[test]
    fn random_gaps_keep_the_period_as_their_mean_and_differ_between_sessions() {
        let (on, period) = (Duration::from_secs(1), Duration::from_secs(2));
        let mut fixed = Gaps::new(on, period, None);
        assert_eq!(fixed.next(), period);
        let draws = |seed| {
            let mut g = Gaps::new(on, period, Some(seed));
            (0..2000).map(|_| g.next()).collect::<Vec<_>>()
        };
        let a = draws(1);
        assert!(a.iter().all(|d| *d >= on && *d <= Duration::from_secs(3)));
        let mean = a.iter().sum::<Duration>().as_secs_f64() / a.len() as f64;
        assert!((mean - 2.0).abs() < 0.05, "{mean}");
        assert_ne!(a[..10], draws(2)[..10], "each session has its own sequence");
        assert_eq!(a, draws(1), "and the same seed the same one");
    }

    fn chunk(channel: u64, bytes: usize) -> ChannelDownlink {
        on_channel(
            channel,
            Downlink {
                kind: Some(downlink::Kind::Audio(AudioChunk {
                    pcm: Bytes::from(vec![0u8; bytes]),
                    item_id: String::new(),
                })),
            },
        )
    }

    #[tokio::test]
    async fn a_burst_of_audio_leaves_in_batches_the_transceiver_takes_and_in_order() {
        let (tx, rx) = mpsc::channel(MUX_DOWNLINK_BUFFER);
        // 124 sessions' 100 ms chunks of 48 kHz PCM at once: 1.2 MB.
        for k in 0..124 {
            tx.send(chunk(k, 9_600)).await.unwrap();
        }
        drop(tx);
        let mut batches = Batches::new(rx);
        let mut seen = Vec::new();
        while let Some(b) = batches.next().await {
            let bytes: usize = b.messages.iter().map(audio_bytes).sum();
            assert!(bytes <= MUX_BATCH_BYTES, "{bytes} bytes in one message");
            seen.extend(b.messages.iter().map(|m| m.channel));
        }
        assert_eq!(seen, (0..124).collect::<Vec<_>>());
    }
}
