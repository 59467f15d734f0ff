//! N simulated WebRTC voice sessions arriving at a given rate, held for a measurement window,
//! then torn down; with the server's CPU and memory read from the OS around the window.
//!
//! ```text
//!  scheduler thread ── arrival times (seeded Poisson) ──► job queue
//!  signaling threads (K): bind socket, build offer, POST (voxgate) or create/attach/message
//!                         (Janus), accept answer ──► ready queue + doorbell datagram
//!  fleet thread (the caller): one testkit Fleet (mio) driving every session; adds ready
//!                         sessions when the doorbell rings; runs the phases; prints progress
//!  backend (optional): tokio gRPC worker that attaches each session, echoes or plays a duty
//!                         cycle, and measures uplink loss and media latency
//! ```
//!
//! Phases: ramp (arrivals) → connect (wait for stragglers) → settle → window (CPU, RSS,
//! packet counters and latency samples are taken at both ends) → drain (uplink stops, packets
//! in flight land) → teardown (DELETE / destroy).

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use crossbeam_channel::{Receiver, Sender};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use voxgate_testkit::{
    ClientSession, Fleet, SessionConfig, SessionReport, SessionResource, SignalingClient,
};

use crate::backend::{Backend, BackendConfig};
use crate::janus::{JanusClient, JanusHandle};
use crate::loss::{LossSummary, SessionLoss};
use crate::proc_stat;
use crate::prom_hist;
use crate::stats::{cdf_points, Summary};

/// Where sessions are signaled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Target {
    /// voxgate's WHIP-shaped signaling at this base URL.
    Voxgate { url: String, token: Option<String> },
    /// Janus's HTTP API root (e.g. `http://127.0.0.1:8088/janus`), echotest plugin.
    Janus { url: String },
}

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    pub sessions: usize,
    /// New sessions per second (mean of a Poisson process).
    pub rate: f64,
    /// Length of the measurement window.
    pub hold: Duration,
    /// Pause between "all connected" and the window.
    pub settle: Duration,
    /// How long after the last arrival stragglers may take to connect.
    pub connect_timeout: Duration,
    /// Send uplink audio (50 Opus packets/s per session).
    pub audio: bool,
    pub data_channel: bool,
    /// Fraction of uplink RTP dropped before the socket (to exercise loss accounting).
    pub uplink_loss: f64,
    pub seed: u64,
    pub signaling_threads: usize,
    /// Server process whose CPU and RSS are read.
    pub server_pid: Option<u32>,
    pub backend: Option<BackendConfig>,
    pub progress: bool,
    pub bind_ip: IpAddr,
    /// Tear sessions down through signaling at the end (DELETE / destroy).
    pub teardown: bool,
    /// The server's Prometheus `/metrics` URL: when set, the transceiver's uplink hand-off
    /// histogram is scraped at both ends of the window (see [`crate::prom_hist`]).
    pub metrics_url: Option<String>,
}

/// Setup latencies, in milliseconds from the start of signaling.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupLatency {
    pub answer: Summary,
    pub ice_connected: Summary,
    pub dtls_connected: Summary,
    /// First uplink PCM (or Opus) frame received by the backend.
    pub first_frame: Summary,
    /// Raw samples, for CDF plots.
    pub samples: SetupSamples,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupSamples {
    pub answer: Vec<f64>,
    pub ice_connected: Vec<f64>,
    pub dtls_connected: Vec<f64>,
    pub first_frame: Vec<f64>,
}

/// What the OS charged the server for, around the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerUsage {
    pub pid: u32,
    pub cpu_secs: f64,
    /// CPU seconds per session-second (sessions connected through the window).
    pub cpu_per_session_sec: f64,
    /// Server CPU per datagram the clients sent or received in the window, in µs.
    pub us_per_packet: f64,
    /// Share of one core the server used during the window.
    pub cores: f64,
    pub rss_before_kib: u64,
    pub rss_window_start_kib: u64,
    pub rss_window_end_kib: u64,
    /// (RSS at window end − RSS before the first session) / connected sessions.
    pub rss_per_session_kib: f64,
}

/// One line of the progress log.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProgressSample {
    pub t: f64,
    pub up: usize,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub backend_fps: f64,
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadResult {
    pub target: String,
    pub sessions_requested: usize,
    pub arrival_rate: f64,
    pub seed: u64,
    pub audio_mode: String,
    pub backend_behaviour: String,
    pub sessions_signaled: usize,
    pub signaling_errors: usize,
    pub first_signaling_error: Option<String>,
    pub sessions_connected_window_start: usize,
    pub sessions_connected_window_end: usize,
    pub sessions_failed: usize,
    /// The ramp hit its deadline (server overloaded): the window measured fewer sessions.
    pub ramp_truncated: bool,
    /// Sessions whose signaling finished after the ramp was cut (not measured).
    pub sessions_abandoned: usize,
    pub ramp_secs: f64,
    pub window_secs: f64,
    pub setup: SetupLatency,
    pub media_latency_us: Summary,
    pub media_latency_cdf: Vec<(f64, f64)>,
    /// Fraction of media-latency samples below zero (the transceiver's arrival stamp ran
    /// ahead of the backend's clock: a stamp error, not time travel).
    pub media_latency_negative_fraction: f64,
    /// Each sample minus its session's fastest sample, in µs: the delay a frame picked up
    /// above the best case of its own session. Immune to a per-session clock offset.
    pub media_delay_variation_us: Summary,
    pub server: Option<ServerUsage>,
    /// Datagrams the clients handed to their sockets / received, in the window.
    pub window_datagrams_sent: u64,
    pub window_datagrams_received: u64,
    /// Uplink RTP packets sent and downlink RTP packets received by clients in the window.
    pub window_audio_sent: u64,
    pub window_audio_received: u64,
    pub loss: LossSummary,
    /// The uplink was measured at a backend (false for Janus: no backend sees it).
    pub uplink_loss_measured: bool,
    pub backend_errors: u64,
    /// TCP_NODELAY of each of the server's accepted gRPC sockets, as read from the server
    /// process once the backend connected (empty when not inspected).
    pub server_grpc_nodelay: Vec<bool>,
    pub backend_downlink_sent: u64,
    pub backend_downlink_dropped: u64,
    /// Uplink frames the load generator skipped because it woke late (it was overloaded).
    pub loadgen_frames_skipped: u64,
    pub loadgen_send_errors: u64,
    pub loadgen_cpu_secs_window: f64,
    /// Cores the server and the load generator used during the ramp (setup under load).
    pub server_cores_ramp: f64,
    pub loadgen_cores_ramp: f64,
    pub progress: Vec<ProgressSample>,
    /// Socket arrival → PCM frame handed to the gRPC stream, measured inside the transceiver
    /// (its `voxgate_bridge_uplink_handoff_seconds` histogram, window deltas; bucket
    /// estimates). `None` when no metrics URL was given or the metric was missing.
    pub transceiver_handoff: Option<crate::prom_hist::HandoffLatency>,
}

struct Job {
    index: usize,
}

struct Ready {
    index: usize,
    session: ClientSession,
    socket: UdpSocket,
    resource: Option<SessionResource>,
    janus: Option<JanusHandle>,
    /// From the session's clock origin to the start of signaling.
    offer_time: Duration,
    post_started: Instant,
}

enum Outcome {
    Ready(Box<Ready>),
    Failed { error: String },
}

/// Per-session bookkeeping on the fleet thread.
struct Slot {
    fleet_index: usize,
    janus: Option<JanusHandle>,
    offer_time: Duration,
    post_started: Instant,
}

/// The configuration of client session `index`: a per-session tone and loss seed derived from
/// the run seed, cheap media (pre-encoded uplink, downlink counted not decoded).
pub fn session_config(cfg: &LoadConfig, index: usize) -> SessionConfig {
    let mut rng =
        StdRng::seed_from_u64(cfg.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let (base_url, token) = match &cfg.target {
        Target::Voxgate { url, token } => (url.clone(), token.clone()),
        Target::Janus { url } => (url.clone(), None),
    };
    SessionConfig {
        base_url,
        token,
        query: Some(format!("loadgen_index={index}")),
        bind_ip: cfg.bind_ip,
        // Integer frequencies loop the one-second pre-encoded uplink without a phase jump.
        tone_hz: f32::from(rng.random_range(200u16..=900)),
        amplitude: 0.3,
        send_for: if cfg.audio {
            Duration::MAX
        } else {
            Duration::ZERO
        },
        data_channel: cfg.data_channel,
        uplink_loss: cfg.uplink_loss,
        seed: rng.random(),
        precoded_uplink: true,
        decode_downlink: false,
        keep_pcm: Duration::ZERO,
        keep_arrivals: 0,
        keep_messages: 0,
    }
}

/// Arrival offsets of `n` sessions at `rate` per second: a Poisson process from `seed`.
pub fn arrival_offsets(n: usize, rate: f64, seed: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0f64;
    (0..n)
        .map(|_| {
            let at = t;
            // Exponential inter-arrival: -ln(U)/rate, U in (0, 1].
            let u: f64 = 1.0 - rng.random::<f64>();
            t += -u.ln() / rate.max(1e-9);
            Duration::from_secs_f64(at)
        })
        .collect()
}

fn signaling_thread(
    cfg: LoadConfig,
    jobs: Receiver<Job>,
    out: Sender<Outcome>,
    pending: Arc<AtomicUsize>,
    doorbell: SocketAddr,
) {
    let bell = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, 0)).ok();
    let voxgate = SignalingClient::new().ok();
    let mut janus = match &cfg.target {
        Target::Janus { url } => JanusClient::new(url).ok(),
        Target::Voxgate { .. } => None,
    };
    for job in jobs.iter() {
        let outcome = match open_one(&cfg, job.index, voxgate.as_ref(), janus.as_mut()) {
            Ok(r) => Outcome::Ready(Box::new(r)),
            Err(e) => Outcome::Failed {
                error: format!("{e:#}"),
            },
        };
        if out.send(outcome).is_err() {
            return;
        }
        pending.fetch_add(1, Ordering::Release);
        if let Some(b) = &bell {
            let _ = b.send_to(&[0], doorbell);
        }
    }
}

fn open_one(
    cfg: &LoadConfig,
    index: usize,
    voxgate: Option<&SignalingClient>,
    janus: Option<&mut JanusClient>,
) -> anyhow::Result<Ready> {
    let scfg = session_config(cfg, index);
    let started = Instant::now();
    let socket = UdpSocket::bind(SocketAddr::new(scfg.bind_ip, 0)).context("bind")?;
    let local = socket.local_addr()?;
    let (mut session, offer) = ClientSession::new(&scfg, local, started)?;
    let post_started = Instant::now();
    let offer_time = post_started - started;
    match &cfg.target {
        Target::Voxgate { .. } => {
            let http = voxgate.context("no signaling client")?;
            let created = http.create_session(
                &scfg.base_url,
                scfg.token.as_deref(),
                scfg.query.as_deref(),
                &offer,
            )?;
            session.accept_created(Instant::now(), &created)?;
            Ok(Ready {
                index,
                session,
                socket,
                resource: Some(SessionResource {
                    url: created.resource_url,
                    token: scfg.token,
                }),
                janus: None,
                offer_time,
                post_started,
            })
        }
        Target::Janus { .. } => {
            let j = janus.context("no janus client")?;
            let (handle, answer) = j.negotiate(&offer, cfg.connect_timeout)?;
            session.accept_answer(Instant::now(), &answer)?;
            Ok(Ready {
                index,
                session,
                socket,
                resource: None,
                janus: Some(handle),
                offer_time,
                post_started,
            })
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Ramp,
    Connect,
    Settle,
    Window,
    Drain,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    up: usize,
    sent: u64,
    received: u64,
    audio_sent: u64,
    audio_received: u64,
    audio_lost: u64,
    skipped: u64,
    send_errors: u64,
}

fn totals(fleet: &Fleet, slots: &[Slot]) -> Totals {
    let mut t = Totals::default();
    for s in slots {
        let c = fleet.session(s.fleet_index);
        let r = c.report();
        t.up += usize::from(r.connected);
        t.sent += r.datagrams_sent - r.send_errors;
        t.received += r.datagrams_received;
        t.audio_sent += r.audio_packets_sent;
        t.audio_received += r.audio_packets_received;
        t.audio_lost += r.audio_packets_lost;
        t.skipped += c.uplink_frames_skipped();
        t.send_errors += r.send_errors;
    }
    t
}

/// Runs one load and returns what it measured.
pub fn run(cfg: &LoadConfig) -> anyhow::Result<LoadResult> {
    proc_stat::raise_nofile_limit().context("raising RLIMIT_NOFILE")?;
    let t0 = Instant::now();
    let rss_before = cfg
        .server_pid
        .and_then(|p| proc_stat::rss_kib(p).ok())
        .unwrap_or(0);

    let backend = match &cfg.backend {
        Some(b) => Some(Backend::start(b.clone()).context("starting the backend")?),
        None => None,
    };

    let grpc_nodelay = match (&cfg.backend, cfg.server_pid) {
        (Some(b), Some(pid)) => b
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok())
            .map(|port| proc_stat::tcp_nodelay_on_port(pid, port))
            .unwrap_or_default(),
        _ => Vec::new(),
    };

    let mut fleet = Fleet::new().context("fleet")?;
    // The doorbell: a session that never signals, whose socket wakes the fleet's poll when a
    // signaling thread has a session ready.
    let bell_socket = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, 0))?;
    let bell_addr = bell_socket.local_addr()?;
    let bell_cfg = SessionConfig {
        send_for: Duration::ZERO,
        data_channel: false,
        precoded_uplink: true,
        decode_downlink: false,
        bind_ip: cfg.bind_ip,
        ..SessionConfig::default()
    };
    let (bell_session, _) = ClientSession::new(&bell_cfg, bell_addr, Instant::now())?;
    fleet.add(bell_session, bell_socket, None)?;

    let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outcome>();
    let pending = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for i in 0..cfg.signaling_threads.max(1) {
        let (cfg, jobs, out, pending) =
            (cfg.clone(), job_rx.clone(), out_tx.clone(), pending.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("signal-{i}"))
                .spawn(move || signaling_thread(cfg, jobs, out, pending, bell_addr))?,
        );
    }
    drop(out_tx);
    drop(job_rx);
    let offsets = arrival_offsets(cfg.sessions, cfg.rate, cfg.seed);
    let ramp_start = Instant::now();
    // An overloaded server answers slowly or not at all; the ramp gives up at this deadline
    // and the run measures the sessions it has (the result says so).
    let ramp_deadline = ramp_start
        + offsets.last().copied().unwrap_or_default().mul_f64(1.5)
        + Duration::from_secs(10);
    let stop_arrivals = Arc::new(AtomicBool::new(false));
    let scheduler = {
        let stop = stop_arrivals.clone();
        std::thread::Builder::new()
            .name("arrivals".into())
            .spawn(move || {
                for (index, off) in offsets.into_iter().enumerate() {
                    let at = ramp_start + off;
                    let now = Instant::now();
                    if at > now {
                        std::thread::sleep(at - now);
                    }
                    if stop.load(Ordering::Relaxed) || job_tx.send(Job { index }).is_err() {
                        return;
                    }
                }
            })?
    };
    let mut accepting = true;

    let mut slots: Vec<Slot> = Vec::with_capacity(cfg.sessions);
    let mut by_index: HashMap<usize, usize> = HashMap::new();
    let mut result = LoadResult {
        target: match cfg.target {
            Target::Voxgate { .. } => "voxgate".into(),
            Target::Janus { .. } => "janus".into(),
        },
        sessions_requested: cfg.sessions,
        arrival_rate: cfg.rate,
        seed: cfg.seed,
        audio_mode: cfg
            .backend
            .as_ref()
            .map_or("none".into(), |b| format!("{:?}", b.mode)),
        backend_behaviour: cfg
            .backend
            .as_ref()
            .map_or("none".into(), |b| format!("{:?}", b.behaviour)),
        uplink_loss_measured: cfg.backend.is_some(),
        server_grpc_nodelay: grpc_nodelay,
        ..LoadResult::default()
    };
    let mut outcomes = 0usize;
    let mut phase = Phase::Ramp;
    let mut phase_end: Option<Instant> = None;
    let mut ramp_end = ramp_start;
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut last = (Instant::now(), Totals::default(), 0u64);
    let mut window_start: Option<(Instant, Totals, Option<Duration>, u64, Duration)> = None;
    let mut window_end: Option<(Instant, Totals, Option<Duration>, u64, Duration)> = None;
    let own_pid = std::process::id();
    let metrics = cfg
        .metrics_url
        .as_deref()
        .and_then(|url| Some((prom_hist::client()?, url)));
    let scrape_handoff = || {
        metrics
            .as_ref()
            .and_then(|(http, url)| prom_hist::scrape(http, url, prom_hist::HANDOFF_METRIC))
    };
    let mut handoff_start: Option<prom_hist::Histogram> = None;
    let ramp_cpu0 = (
        cfg.server_pid.and_then(|p| proc_stat::cpu_time(p).ok()),
        proc_stat::cpu_time(own_pid).ok(),
    );

    loop {
        let mut wake = match phase_end {
            Some(e) => e.min(next_tick),
            None => next_tick,
        };
        if phase == Phase::Connect {
            // Notice the last session connecting within 100 ms, not at the next tick.
            wake = wake.min(Instant::now() + Duration::from_millis(100));
        }
        fleet.run_until(wake, |_| pending.load(Ordering::Acquire) > 0);
        while let Ok(o) = out_rx.try_recv() {
            pending.fetch_sub(1, Ordering::AcqRel);
            outcomes += 1;
            match o {
                // Too late: the ramp was cut; the server times the session out by itself.
                Outcome::Ready(_) if !accepting => result.sessions_abandoned += 1,
                Outcome::Ready(r) => {
                    let r = *r;
                    let fi = fleet.add(r.session, r.socket, r.resource)?;
                    by_index.insert(r.index, slots.len());
                    slots.push(Slot {
                        fleet_index: fi,
                        janus: r.janus,
                        offer_time: r.offer_time,
                        post_started: r.post_started,
                    });
                }
                Outcome::Failed { error } => {
                    result.signaling_errors += 1;
                    result.first_signaling_error.get_or_insert(error);
                }
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            next_tick += Duration::from_secs(1);
            let t = totals(&fleet, &slots);
            let frames = backend.as_ref().map_or(0, |b| b.frames());
            let dt = now.duration_since(last.0).as_secs_f64().max(1e-6);
            let sample = ProgressSample {
                t: now.duration_since(t0).as_secs_f64(),
                up: t.up,
                tx_pps: (t.sent - last.1.sent) as f64 / dt,
                rx_pps: (t.received - last.1.received) as f64 / dt,
                backend_fps: (frames - last.2) as f64 / dt,
            };
            result.progress.push(sample);
            if cfg.progress {
                let down_loss = if t.audio_received + t.audio_lost > 0 {
                    100.0 * t.audio_lost as f64 / (t.audio_received + t.audio_lost) as f64
                } else {
                    0.0
                };
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r[{:6.1}s] {:<7} up {:>4}/{:<4} tx {:>7.0} pps  rx {:>7.0} pps  backend {:>7.0} fps  down-loss {:.2}%  errors {}   ",
                    sample.t,
                    format!("{phase:?}").to_lowercase(),
                    t.up,
                    cfg.sessions,
                    sample.tx_pps,
                    sample.rx_pps,
                    sample.backend_fps,
                    down_loss,
                    result.signaling_errors + backend.as_ref().map_or(0, |b| b.errors() as usize),
                );
                let _ = err.flush();
            }
            last = (now, t, frames);
        }

        let all_in = outcomes >= cfg.sessions;
        if phase == Phase::Ramp && !all_in && now >= ramp_deadline {
            stop_arrivals.store(true, Ordering::Relaxed);
            accepting = false;
            result.ramp_truncated = true;
            tracing::warn!(
                signaled = slots.len(),
                requested = cfg.sessions,
                "ramp deadline passed: measuring the sessions that are up"
            );
        }
        match phase {
            Phase::Ramp if all_in || !accepting => {
                ramp_end = now;
                let secs = now.duration_since(ramp_start).as_secs_f64().max(1e-3);
                let server = cfg.server_pid.and_then(|p| proc_stat::cpu_time(p).ok());
                if let (Some(a), Some(b)) = (ramp_cpu0.0, server) {
                    result.server_cores_ramp = b.saturating_sub(a).as_secs_f64() / secs;
                }
                if let (Some(a), Ok(b)) = (ramp_cpu0.1, proc_stat::cpu_time(own_pid)) {
                    result.loadgen_cores_ramp = b.saturating_sub(a).as_secs_f64() / secs;
                }
                phase = Phase::Connect;
                phase_end = Some(now + cfg.connect_timeout);
            }
            Phase::Connect => {
                let settled = slots.iter().all(|s| {
                    let c = fleet.session(s.fleet_index);
                    c.is_connected() || c.is_closed()
                });
                if settled || phase_end.is_some_and(|e| now >= e) {
                    phase = Phase::Settle;
                    phase_end = Some(now + cfg.settle);
                }
            }
            Phase::Settle if phase_end.is_some_and(|e| now >= e) => {
                if let Some(b) = &backend {
                    b.set_recording(true);
                }
                let cpu = cfg.server_pid.and_then(|p| proc_stat::cpu_time(p).ok());
                let rss = cfg
                    .server_pid
                    .and_then(|p| proc_stat::rss_kib(p).ok())
                    .unwrap_or(0);
                let own = proc_stat::cpu_time(own_pid).unwrap_or_default();
                handoff_start = scrape_handoff();
                window_start = Some((Instant::now(), totals(&fleet, &slots), cpu, rss, own));
                phase = Phase::Window;
                phase_end = Some(now + cfg.hold);
            }
            Phase::Window if phase_end.is_some_and(|e| now >= e) => {
                let cpu = cfg.server_pid.and_then(|p| proc_stat::cpu_time(p).ok());
                let rss = cfg
                    .server_pid
                    .and_then(|p| proc_stat::rss_kib(p).ok())
                    .unwrap_or(0);
                let own = proc_stat::cpu_time(own_pid).unwrap_or_default();
                window_end = Some((Instant::now(), totals(&fleet, &slots), cpu, rss, own));
                if let (Some(a), Some(b)) = (&handoff_start, scrape_handoff()) {
                    result.transceiver_handoff = Some(prom_hist::HandoffLatency::of(&b.since(a)));
                }
                if let Some(b) = &backend {
                    b.set_recording(false);
                }
                for s in &slots {
                    fleet.session_mut(s.fleet_index).stop_audio();
                }
                phase = Phase::Drain;
                phase_end = Some(now + Duration::from_millis(500));
            }
            Phase::Drain if phase_end.is_some_and(|e| now >= e) => break,
            _ => {}
        }
    }
    if cfg.progress {
        eprintln!();
    }
    stop_arrivals.store(true, Ordering::Relaxed);
    let _ = scheduler.join();
    // Signaling threads stuck on an overloaded server are left to finish on their own (their
    // results are discarded); the others are done.
    drop(out_rx);
    if !result.ramp_truncated {
        for t in threads {
            let _ = t.join();
        }
    }

    result.ramp_secs = ramp_end.duration_since(ramp_start).as_secs_f64();
    result.sessions_signaled = slots.len();
    let reports: Vec<SessionReport> = slots.iter().map(|s| fleet.report(s.fleet_index)).collect();
    result.sessions_failed = reports.iter().filter(|r| r.last_error.is_some()).count();
    let snapshot = backend.as_ref().map(|b| b.snapshot()).unwrap_or_default();

    // Setup latency, from the start of signaling.
    let ms = |d: Option<Duration>, s: &Slot| {
        d.map(|d| d.saturating_sub(s.offer_time).as_secs_f64() * 1e3)
    };
    let mut samples = SetupSamples::default();
    let mut latency = Vec::new();
    let mut variation = Vec::new();
    let mut losses = Vec::new();
    for (s, r) in slots.iter().zip(&reports) {
        samples.answer.extend(ms(r.t_answer, s));
        samples.ice_connected.extend(ms(r.t_ice_connected, s));
        samples.dtls_connected.extend(ms(r.t_dtls_connected, s));
        let b = snapshot.get(&r.session_id);
        if let Some(first) = b.and_then(|b| b.first_frame_at) {
            samples.first_frame.push(
                first
                    .saturating_duration_since(s.post_started)
                    .as_secs_f64()
                    * 1e3,
            );
        }
        if let Some(b) = b {
            latency.extend_from_slice(&b.latency_us);
            if let Some(min) = b.latency_us.iter().copied().reduce(f64::min) {
                variation.extend(b.latency_us.iter().map(|x| x - min));
            }
            result.backend_downlink_sent += b.downlink_sent;
            result.backend_downlink_dropped += b.downlink_dropped;
        }
        if r.t_dtls_connected.is_some() {
            let up = if cfg.backend.is_some() {
                SessionLoss::from_parts(b.map(|b| &b.uplink), r.audio_packets_sent, 0, 0)
            } else {
                SessionLoss::default()
            };
            losses.push(SessionLoss {
                downlink_expected: r.audio_packets_received + r.audio_packets_lost,
                downlink_lost: r.audio_packets_lost,
                ..up
            });
        }
    }
    result.setup = SetupLatency {
        answer: Summary::of(&samples.answer),
        ice_connected: Summary::of(&samples.ice_connected),
        dtls_connected: Summary::of(&samples.dtls_connected),
        first_frame: Summary::of(&samples.first_frame),
        samples,
    };
    result.media_latency_us = Summary::of(&latency);
    result.media_latency_cdf = cdf_points(&latency, 300);
    result.media_latency_negative_fraction = if latency.is_empty() {
        0.0
    } else {
        latency.iter().filter(|&&x| x < 0.0).count() as f64 / latency.len() as f64
    };
    result.media_delay_variation_us = Summary::of(&variation);
    result.loss = LossSummary::of(&losses);
    result.backend_errors = backend.as_ref().map_or(0, |b| b.errors());

    if let (Some(a), Some(b)) = (window_start, window_end) {
        let secs = b.0.duration_since(a.0).as_secs_f64();
        result.window_secs = secs;
        result.sessions_connected_window_start = a.1.up;
        result.sessions_connected_window_end = b.1.up;
        result.window_datagrams_sent = b.1.sent - a.1.sent;
        result.window_datagrams_received = b.1.received - a.1.received;
        result.window_audio_sent = b.1.audio_sent - a.1.audio_sent;
        result.window_audio_received = b.1.audio_received - a.1.audio_received;
        result.loadgen_frames_skipped = b.1.skipped;
        result.loadgen_send_errors = b.1.send_errors;
        result.loadgen_cpu_secs_window = (b.4.saturating_sub(a.4)).as_secs_f64();
        if let (Some(pid), Some(c0), Some(c1)) = (cfg.server_pid, a.2, b.2) {
            let cpu = c1.saturating_sub(c0).as_secs_f64();
            let sessions = a.1.up.min(b.1.up).max(1) as f64;
            let packets = (result.window_datagrams_sent + result.window_datagrams_received).max(1);
            result.server = Some(ServerUsage {
                pid,
                cpu_secs: cpu,
                cpu_per_session_sec: cpu / (sessions * secs),
                us_per_packet: cpu * 1e6 / packets as f64,
                cores: cpu / secs,
                rss_before_kib: rss_before,
                rss_window_start_kib: a.3,
                rss_window_end_kib: b.3,
                rss_per_session_kib: (b.3.saturating_sub(rss_before)) as f64 / sessions,
            });
        }
    }

    if cfg.teardown {
        teardown(cfg, &mut fleet, &slots);
    }
    drop(backend);
    Ok(result)
}

fn teardown(cfg: &LoadConfig, fleet: &mut Fleet, slots: &[Slot]) {
    let mut janus = match &cfg.target {
        Target::Janus { url } => JanusClient::new(url).ok(),
        Target::Voxgate { .. } => None,
    };
    for s in slots {
        match (&mut janus, s.janus) {
            (Some(j), Some(h)) => {
                let _ = j.destroy(h);
                fleet.close(s.fleet_index);
            }
            _ => {
                if fleet.resource(s.fleet_index).is_some() {
                    let _ = fleet.delete(s.fleet_index);
                } else {
                    fleet.close(s.fleet_index);
                }
            }
        }
    }
    fleet.run_for(Duration::from_millis(100));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LoadConfig {
        LoadConfig {
            target: Target::Voxgate {
                url: "http://127.0.0.1:1".into(),
                token: None,
            },
            sessions: 10,
            rate: 50.0,
            hold: Duration::from_secs(1),
            settle: Duration::ZERO,
            connect_timeout: Duration::from_secs(1),
            audio: true,
            data_channel: false,
            uplink_loss: 0.0,
            seed: 42,
            signaling_threads: 1,
            server_pid: None,
            backend: None,
            progress: false,
            bind_ip: "127.0.0.1".parse().unwrap(),
            teardown: false,
            metrics_url: None,
        }
    }

    #[test]
    fn arrivals_are_deterministic_and_at_the_asked_rate() {
        let a = arrival_offsets(2000, 100.0, 7);
        assert_eq!(a, arrival_offsets(2000, 100.0, 7));
        assert_ne!(a, arrival_offsets(2000, 100.0, 8));
        assert_eq!(a[0], Duration::ZERO);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let span = a.last().unwrap().as_secs_f64();
        // 1999 gaps of mean 10 ms: within a few percent of 20 s.
        assert!((span - 19.99).abs() < 1.5, "span {span}");
    }

    #[test]
    fn session_configs_follow_the_seed() {
        let c = cfg();
        let (a, b) = (session_config(&c, 3), session_config(&c, 3));
        assert_eq!((a.tone_hz, a.seed), (b.tone_hz, b.seed));
        assert_ne!(session_config(&c, 4).seed, a.seed);
        assert!(a.precoded_uplink && !a.decode_downlink);
        assert_eq!(a.tone_hz.fract(), 0.0);
    }
}
