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
//! ([`BackendConfig::multiplex`]), as a backend process that owns many calls would. The Bridge
//! protocol (the `Work` stream, attaches, the `Multiplex` batching and routing) is the backend
//! kit's (`voxgate-backend-kit`); what is here is what the backend does with each message, on
//! the reader of its stream ([`Call`] is the kit's `CallHandler`), so timing it adds no hop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use tonic::transport::Endpoint;
use tonic::Code;
use voxgate_backend_kit::{
    attach_session, AttachSettings, Bridge, CallEvent, CallHandler, CallSender, MultiplexClient,
    Registration, WorkStream,
};
use voxgate_proto::bridge::{
    downlink, session_event, uplink, AudioChunk, AudioMode, OpusPacket, Uplink,
};

use crate::loss::UplinkTrack;

/// HTTP/2 connections shared by all session streams.
const CHANNELS: usize = 4;
/// Downlink messages buffered per session on our side.
const DOWNLINK_BUFFER: usize = 128;
/// Downlink messages waiting to go out on the `Multiplex` stream (all sessions together).
const MUX_DOWNLINK_BUFFER: usize = 4096;
/// Tries (100 ms apart) to reach a transceiver that is still starting.
const CONNECT_TRIES: u32 = 100;

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

async fn run_worker(
    cfg: BackendConfig,
    state: Arc<State>,
    audio: Arc<DutyAudio>,
    ready: std::sync::mpsc::Sender<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let endpoint = Endpoint::from_shared(cfg.url.clone())
        .context("bridge url")?
        .tcp_nodelay(true);
    let mut bridges = Vec::with_capacity(CHANNELS);
    for _ in 0..CHANNELS {
        let pause = Duration::from_millis(100);
        bridges.push(Bridge::connect_retrying(&endpoint, None, CONNECT_TRIES, pause).await?);
    }
    let registration = Registration {
        worker_id: cfg.worker_id.clone(),
        capacity: cfg.capacity,
        active: 0,
    };
    let mut work = WorkStream::open(&bridges[0], &registration)
        .await
        .context("Work call")?;
    let mux = if cfg.multiplex {
        Some(open_multiplex(&bridges[0], &state).await?)
    } else {
        None
    };
    let _ = ready.send(Ok(()));
    let settings = AttachSettings {
        worker_id: cfg.worker_id.clone(),
        sample_rate_hz: cfg.sample_rate,
        mode: cfg.mode,
        progress_interval_ms: 1000,
        encoder: None,
    };
    let cfg = Arc::new(cfg);
    let mut k: u64 = 0;
    while let Ok(Some(offer)) = work.next_offer().await {
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
        lock(&state.sessions).insert(offer.session_id().to_owned(), stats.clone());
        // Spread duty-cycle phases evenly and deterministically (golden-ratio sequence).
        let phase = (k as f64 * 0.618_033_988_75).fract();
        let call = Call {
            cfg: cfg.clone(),
            state: state.clone(),
            audio: audio.clone(),
            stats,
            phase,
            seed: k,
            duty_started: false,
            live: true,
        };
        let attach = offer.attach(&settings);
        match &mux {
            Some(mux) => {
                mux.attach(attach, call).await;
            }
            None => {
                let bridge = &bridges[(k as usize) % bridges.len()];
                attach_session(bridge, attach, call, DOWNLINK_BUFFER);
            }
        }
        k += 1;
    }
    Ok(())
}

/// The backend's `Multiplex` stream; a stream that breaks counts as one error.
async fn open_multiplex(
    bridge: &Bridge,
    state: &Arc<State>,
) -> anyhow::Result<Arc<MultiplexClient<Call>>> {
    let mux = MultiplexClient::open(bridge, MUX_DOWNLINK_BUFFER)
        .await
        .context("Multiplex call")?;
    let mux = Arc::new(mux);
    let (watched, state) = (mux.clone(), state.clone());
    tokio::spawn(async move {
        if watched.ended().await.is_some() {
            state.errors.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok(mux)
}

fn unix_micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// One dispatched session: what it measures and plays, whichever stream carries it.
struct Call {
    cfg: Arc<BackendConfig>,
    state: Arc<State>,
    audio: Arc<DutyAudio>,
    stats: Arc<Mutex<SessionStats>>,
    phase: f64,
    /// Seeds the session's random gaps between turns.
    seed: u64,
    duty_started: bool,
    /// Until the session's ENDED: what comes after it is not measured.
    live: bool,
}

impl CallHandler for Call {
    async fn handle(&mut self, event: CallEvent, down: &CallSender) {
        if !self.live {
            return;
        }
        match event {
            CallEvent::Uplink(m) => self.live = self.on_uplink(down, m),
            CallEvent::Closed(status) if !self.cfg.multiplex => {
                // A `Session` stream that did not open.
                self.state.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %status, "backend session failed");
            }
            CallEvent::Closed(status) => {
                if status.code() != Code::Ok {
                    let code = status.code() as i32;
                    self.broke(format!("closed {code}: {}", status.message()));
                    self.state.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            CallEvent::StreamGone(Some(status)) => self.broke(status.code().to_string()),
            CallEvent::StreamGone(None) => {}
        }
    }
}

impl Call {
    /// Handles one uplink message; returns false once the session ended.
    fn on_uplink(&mut self, down: &CallSender, msg: Uplink) -> bool {
        let state = &*self.state;
        let now = Instant::now();
        let (arrival_us, ts, concealed, seq, echo) = match msg.kind {
            Some(uplink::Kind::Audio(f)) => {
                let echo = downlink::Kind::Audio(AudioChunk {
                    pcm: f.pcm,
                    item_id: String::new(),
                });
                (
                    f.arrival_unix_micros,
                    f.rtp_timestamp,
                    f.concealed,
                    Some(f.sequence),
                    echo,
                )
            }
            Some(uplink::Kind::Opus(p)) => {
                let echo = downlink::Kind::Opus(OpusPacket {
                    data: p.data,
                    ..OpusPacket::default()
                });
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
            echo_result = Some(down.try_send(echo).is_ok());
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
    tx: CallSender,
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
                let msg = downlink::Kind::Opus(OpusPacket {
                    data: p.clone(),
                    ..OpusPacket::default()
                });
                if tx.send(msg).await.is_err() {
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
                let msg = downlink::Kind::Audio(AudioChunk {
                    pcm: audio.pcm.slice(start..(start + chunk).min(audio.pcm.len())),
                    item_id: String::new(),
                });
                if tx.send(msg).await.is_err() {
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
}
