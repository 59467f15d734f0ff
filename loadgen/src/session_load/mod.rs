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

//!
//! Files: [`config`] (what a run is asked), [`signaling`] (arrivals and signaling threads),
//! [`driver`] (the fleet thread through the phases), [`summary`] (what the run measured),
//! [`result`] (its JSON).

pub mod config;
pub mod driver;
pub mod result;
pub mod signaling;
pub mod summary;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use voxgate_testkit::{ClientSession, Fleet, SessionConfig, SessionReport};

use crate::backend::Backend;
use crate::janus::JanusClient;
use crate::proc_stat;

pub use config::{LoadConfig, Target, WindowHooks};
use driver::{Driver, Slot};
pub use result::{
    LoadResult, ProgressSample, ServerUsage, SetupLatency, SetupSamples, WindowDrops,
};
use signaling::Arrivals;
pub use signaling::{arrival_offsets, session_config};

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
    let grpc_nodelay = grpc_nodelay(cfg);
    let (fleet, doorbell) = fleet_with_doorbell(cfg)?;
    let arrivals = Arrivals::start(cfg, doorbell)?;
    let result = LoadResult {
        server_grpc_nodelay: grpc_nodelay,
        ..described(cfg)
    };
    let mut d = Driver::new(cfg, t0, fleet, backend, result, arrivals.ramp_start);
    d.run(&arrivals)?;
    if cfg.progress {
        eprintln!();
    }
    let ramp_start = arrivals.ramp_start;
    arrivals.finish(d.result.ramp_truncated);

    d.result.ramp_secs = d.ramp_end.duration_since(ramp_start).as_secs_f64();
    d.result.sessions_signaled = d.slots.len();
    let reports: Vec<SessionReport> = d
        .slots
        .iter()
        .map(|s| d.fleet.report(s.fleet_index))
        .collect();
    d.result.sessions_failed = reports.iter().filter(|r| r.last_error.is_some()).count();
    let snapshot = d.backend.as_ref().map(|b| b.snapshot()).unwrap_or_default();
    summary::sessions(&mut d.result, cfg, &d.slots, &reports, &snapshot);
    d.result.backend_errors = d.backend.as_ref().map_or(0, |b| b.errors());
    if let (Some(a), Some(b)) = (d.window_start, d.window_end) {
        summary::window(&mut d.result, cfg, &a, &b, rss_before);
    }

    if cfg.teardown {
        teardown(cfg, &mut d.fleet, &d.slots);
    }
    drop(d.backend);
    Ok(d.result)
}

/// The run's description in its result: target, sizes, seed, backend.
fn described(cfg: &LoadConfig) -> LoadResult {
    LoadResult {
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
        ..LoadResult::default()
    }
}

/// TCP_NODELAY of the server's accepted gRPC sockets, read from the server process once the
/// backend connected (empty without a backend or a server pid).
fn grpc_nodelay(cfg: &LoadConfig) -> Vec<bool> {
    match (&cfg.backend, cfg.server_pid) {
        (Some(b), Some(pid)) => b
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok())
            .map(|port| proc_stat::tcp_nodelay_on_port(pid, port))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A fleet holding only the doorbell: a session that never signals, whose socket wakes the
/// fleet's poll when a signaling thread has a session ready. Returns the doorbell's address.
fn fleet_with_doorbell(cfg: &LoadConfig) -> anyhow::Result<(Fleet, SocketAddr)> {
    let mut fleet = Fleet::new().context("fleet")?;
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
    Ok((fleet, bell_addr))
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
