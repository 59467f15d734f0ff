//! `echo-bot`: an example voxgate backend that listens to each caller and, when they stop
//! talking, plays what they said back to them; talking over the reply cuts it (barge-in).
//!
//! How data flows:
//!
//! ```text
//!  transceiver ──Work: Dispatch──► worker link ──(slot free?)──► session task
//!              ◄─Work: Register, Load, Reject─┘                     │
//!  transceiver ──Session: AudioFrame (20 ms PCM16)─► Utterances (energy VAD, Sans-IO)
//!              ◄─Session: AudioChunk "utt-N" (100 ms chunks) ◄── PlayUtterance
//!              ◄─Session: Clear ◄── Clear (caller speaks while the reply still plays)
//!              ──Session: DataMessage text ─► ◄── {"type":"echo","text":...}
//! ```
//!
//! `main.rs` parses flags and signals, `session.rs` serves one call (uplink frames into the
//! library's `utterance.rs`, which makes every decision about audio, and its actions out), and
//! the backend kit (`voxgate-backend-kit`'s `Worker`) does the Bridge protocol: one worker
//! subscription per transceiver, reconnecting with backoff, the sessions of each on one
//! `Multiplex` stream. The capacity is shared by all transceivers, and each is told the
//! process-wide load. On SIGTERM or Ctrl-C the bot reports itself full, then lets go of its
//! sessions without hanging up (so the transceiver hands those callers to other workers), then
//! closes its worker streams and exits.

mod session;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tonic::transport::Endpoint;
use tracing::{info, warn};
use voxgate_backend_kit::{bearer, AttachSettings, Slots, Transport, Worker};
use voxgate_echo_bot::VadConfig;
use voxgate_proto::bridge::AudioMode;

/// PlaybackProgress period asked for at attach (finer than the default 200 ms, for barge-in).
const PROGRESS_INTERVAL_MS: u32 = 100;

/// Example voxgate backend: plays each caller utterance back, with barge-in.
#[derive(Debug, Parser)]
#[command(name = "echo-bot", version)]
struct Args {
    /// Transceiver gRPC address(es), comma-separated; the bot subscribes to each.
    #[arg(
        long,
        env = "VOXGATE_ECHO_TRANSCEIVER",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:50051"
    )]
    transceiver: Vec<String>,
    /// Bearer token for the transceiver's gRPC API (sent as `authorization: Bearer ...`).
    #[arg(long, env = "VOXGATE_ECHO_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Worker id to register with (default: <hostname>-<pid>).
    #[arg(long, env = "VOXGATE_ECHO_WORKER_ID")]
    worker_id: Option<String>,
    /// Sessions owned at once, across all transceivers.
    #[arg(long, env = "VOXGATE_ECHO_CAPACITY", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    capacity: u32,
    /// PCM sample rate asked for at attach: 16000, 24000 or 48000.
    #[arg(long, env = "VOXGATE_ECHO_SAMPLE_RATE", default_value_t = 48_000,
          value_parser = parse_rate)]
    sample_rate: u32,
    /// A 20 ms frame at or above this RMS level (dBFS) is speech.
    #[arg(long, env = "VOXGATE_ECHO_SPEECH_DB", default_value_t = -45.0,
          allow_negative_numbers = true)]
    speech_db: f32,
    /// Silence (ms) that ends an utterance.
    #[arg(long, env = "VOXGATE_ECHO_SILENCE_MS", default_value_t = 600)]
    silence_ms: u64,
    /// Longest utterance (seconds); longer speech is cut and played as it stands.
    #[arg(long, env = "VOXGATE_ECHO_MAX_UTTERANCE_SECS", default_value_t = 15)]
    max_utterance_secs: u64,
    /// Speech longer than --max-utterance-secs comes back in pieces of that length, one after
    /// another, for as long as the caller talks (a delay line), instead of only its first piece.
    #[arg(long, env = "VOXGATE_ECHO_CONTINUOUS")]
    continuous: bool,
}

fn parse_rate(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(rate @ (16_000 | 24_000 | 48_000)) => Ok(rate),
        _ => Err(format!("{s}: must be 16000, 24000 or 48000")),
    }
}

/// An endpoint for `addr`, which may omit the `http://` scheme.
fn endpoint(addr: &str) -> anyhow::Result<Endpoint> {
    let addr = addr.trim();
    let url = if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    };
    let endpoint = Endpoint::from_shared(url).with_context(|| format!("--transceiver {addr}"))?;
    Ok(endpoint
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(15))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true))
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "echo-bot".to_owned());
    format!("{host}-{}", std::process::id())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let args = Args::parse();

    let endpoints = args
        .transceiver
        .iter()
        .filter(|a| !a.trim().is_empty())
        .map(|a| endpoint(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if endpoints.is_empty() {
        bail!("--transceiver: no address given");
    }
    let authorization = match args.token.as_deref().filter(|t| !t.is_empty()) {
        // The error must not echo the token.
        Some(token) => Some(bearer(token).map_err(|e| anyhow::anyhow!("--token: {e}"))?),
        None => None,
    };
    let vad = VadConfig {
        sample_rate_hz: args.sample_rate,
        speech_db: args.speech_db,
        silence: Duration::from_millis(args.silence_ms),
        max_utterance: Duration::from_secs(args.max_utterance_secs),
        continuous: args.continuous,
        ..VadConfig::default()
    };
    let worker = Arc::new(Worker {
        settings: AttachSettings {
            worker_id: args.worker_id.unwrap_or_else(default_worker_id),
            sample_rate_hz: args.sample_rate,
            mode: AudioMode::Pcm,
            progress_interval_ms: PROGRESS_INTERVAL_MS,
            encoder: None,
        },
        authorization,
        transport: Transport::Multiplex,
        slots: Arc::new(Slots::new(args.capacity)),
    });
    info!(
        worker_id = %worker.settings.worker_id,
        transceivers = ?args.transceiver,
        capacity = args.capacity,
        sample_rate = args.sample_rate,
        "echo-bot starting"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut workers = tokio::task::JoinSet::new();
    for (endpoint, addr) in endpoints.into_iter().zip(&args.transceiver) {
        let span = tracing::info_span!("transceiver", addr = %addr.trim());
        let vad = vad.clone();
        let serve = move |call| session::serve(call, vad.clone());
        let worker = Arc::clone(&worker).serve(endpoint, stop_rx.clone(), serve);
        workers.spawn(tracing::Instrument::instrument(worker, span));
    }

    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("interrupted: shutting down"),
        _ = term.recv() => info!("SIGTERM: shutting down"),
    }
    stop_tx.send_replace(true);
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!("shutdown: workers still busy after 5 s; exiting anyway");
    }
    Ok(())
}
