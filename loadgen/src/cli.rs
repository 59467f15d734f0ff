//! Command-line parsing and dispatch of the `loadgen` binary.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;
use voxgate_proto::bridge::AudioMode;

use crate::backend::{BackendConfig, Behaviour};
use crate::json_out::write_json;
use crate::session_load::{self, LoadConfig, Target, WindowHooks};

/// voxgate load generator and benchmark suite.
#[derive(Parser)]
#[command(name = "loadgen", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Open N WebRTC sessions at an arrival rate, hold them, report JSON.
    Sessions(SessionsArgs),
    /// A minimal batched UDP forwarder (recvmmsg/sendmmsg, no parsing, no table): the
    /// ceiling the relay is compared against.
    Forwarder(crate::forwarder::ForwarderArgs),
    /// Drive UDP flows through a relay, the bare forwarder or coturn to a sink; report JSON.
    Flows(crate::relay_load::FlowsArgs),
    /// Measure the libopus floor: decode + encode cost of the frames a session carries.
    CodecFloor(crate::codec_floor::CodecFloorArgs),
    /// Measure encoder cost and quality (log-spectral distance) on spoken sentences, for each
    /// application and complexity of the matrix at 16, 24 and 48 kHz.
    CodecQuality(crate::codec_quality::CodecQualityArgs),
    /// Run the whole benchmark suite (what scripts/bench calls).
    Suite(crate::suite::SuiteArgs),
    /// Render docs/BENCHMARKS.md and the SVG plots from a suite's results JSON.
    Report(crate::report::ReportArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// No backend (sessions wait for dispatch; media is not measured at a backend).
    None,
    /// Echo each uplink frame back.
    Echo,
    /// Play a downlink duty cycle (--duty-on-ms every --duty-period-ms).
    Duty,
    /// Attach and listen only.
    Listen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Pcm,
    Passthrough,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SessionsArgs {
    /// voxgate signaling base URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        conflicts_with = "janus"
    )]
    pub url: String,
    /// Signal against Janus instead (its HTTP API root, e.g. http://127.0.0.1:8088/janus),
    /// attaching the echotest plugin.
    #[arg(long)]
    pub janus: Option<String>,
    /// Bearer token for voxgate signaling.
    #[arg(long, env = "VOXGATE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Sessions to open.
    #[arg(long, short = 'n', default_value_t = 10)]
    pub sessions: usize,
    /// New sessions per second (Poisson arrivals).
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Measurement window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub hold: f64,
    /// Pause between all-connected and the window, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub settle: f64,
    /// Seconds after the last arrival that stragglers may take to connect.
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Send no uplink audio (idle sessions).
    #[arg(long)]
    pub no_audio: bool,
    /// Offer the oai-events data channel.
    #[arg(long)]
    pub data_channel: bool,
    /// Fraction of uplink RTP to drop before the socket (exercises the loss accounting).
    #[arg(long, default_value_t = 0.0)]
    pub uplink_loss: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Concurrent signaling requests.
    #[arg(long, default_value_t = 4)]
    pub signaling_threads: usize,
    /// PID of the server to charge CPU and RSS to (read from /proc).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Built-in gRPC backend behaviour.
    #[arg(long, value_enum, default_value_t = BackendKind::None)]
    pub backend: BackendKind,
    /// The transceiver's gRPC bridge.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub grpc: String,
    /// Audio mode the backend attaches with.
    #[arg(long, value_enum, default_value_t = Mode::Pcm)]
    pub mode: Mode,
    #[arg(long, default_value_t = 1000)]
    pub duty_on_ms: u64,
    #[arg(long, default_value_t = 2000)]
    pub duty_period_ms: u64,
    /// Each session waits a random time between its turns (uniform, mean --duty-period-ms,
    /// seeded per session): talkers come and go independently instead of in a fixed rota.
    #[arg(long)]
    pub duty_random_gaps: bool,
    /// PCM sample rate the backend asks for.
    #[arg(long, default_value_t = 48_000)]
    pub sample_rate: u32,
    /// The backend attaches every session on one `Multiplex` stream (a channel each) instead
    /// of a `Session` stream each.
    #[arg(long)]
    pub multiplex: bool,
    /// Local IP the client sockets bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_ip: IpAddr,
    /// Pin the session thread to this core.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Do not DELETE / destroy sessions at the end.
    #[arg(long)]
    pub no_teardown: bool,
    /// No live progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Write the JSON result here (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Shell command run (and waited for) just after the measurement window opens.
    #[arg(long)]
    pub on_window_open: Option<String>,
    /// Shell command run (and waited for) just after the measurement window closes.
    #[arg(long)]
    pub on_window_close: Option<String>,
}

impl SessionsArgs {
    pub fn load_config(&self) -> LoadConfig {
        let target = match &self.janus {
            Some(url) => Target::Janus { url: url.clone() },
            None => Target::Voxgate {
                url: self.url.clone(),
                token: self.token.clone(),
            },
        };
        let behaviour = match self.backend {
            BackendKind::None => None,
            BackendKind::Echo => Some(Behaviour::Echo),
            BackendKind::Listen => Some(Behaviour::Listen),
            BackendKind::Duty => Some(Behaviour::Duty {
                on: Duration::from_millis(self.duty_on_ms),
                period: Duration::from_millis(self.duty_period_ms.max(1)),
                random_gaps: self.duty_random_gaps,
            }),
        };
        let backend = behaviour
            .filter(|_| self.janus.is_none())
            .map(|behaviour| BackendConfig {
                url: self.grpc.clone(),
                worker_id: format!("loadgen-{}-{}", std::process::id(), self.seed),
                capacity: (self.sessions as u32).saturating_mul(2).max(1),
                mode: match self.mode {
                    Mode::Pcm => AudioMode::Pcm,
                    Mode::Passthrough => AudioMode::OpusPassthrough,
                },
                behaviour,
                sample_rate: self.sample_rate,
                multiplex: self.multiplex,
            });
        LoadConfig {
            target,
            sessions: self.sessions,
            rate: self.rate,
            hold: Duration::from_secs_f64(self.hold),
            settle: Duration::from_secs_f64(self.settle),
            connect_timeout: Duration::from_secs_f64(self.connect_timeout),
            audio: !self.no_audio,
            data_channel: self.data_channel,
            uplink_loss: self.uplink_loss,
            seed: self.seed,
            signaling_threads: self.signaling_threads,
            server_pid: self.server_pid,
            backend,
            progress: !self.quiet,
            bind_ip: self.bind_ip,
            teardown: !self.no_teardown,
            // A transceiver serves /metrics beside signaling: the report's hand-off, wakeup
            // and server answer-time figures come from it.
            metrics_url: self
                .janus
                .is_none()
                .then(|| format!("{}/metrics", self.url.trim_end_matches('/'))),
            window_hooks: WindowHooks {
                open: self.on_window_open.clone(),
                close: self.on_window_close.clone(),
            },
        }
    }
}

pub fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Sessions(a) => {
            if let Some(core) = a.cpu {
                crate::proc_stat::pin_current_thread(core);
            }
            let r = session_load::run(&a.load_config())?;
            write_json(&r, a.out.as_ref())
        }
        Command::Forwarder(a) => crate::forwarder::run(&a),
        Command::Flows(a) => crate::relay_load::run_cli(&a),
        Command::CodecFloor(a) => {
            let r = crate::codec_floor::run(&a)?;
            write_json(&r, a.out.as_ref())
        }
        Command::CodecQuality(a) => {
            let r = crate::codec_quality::matrix(a.bitrate, a.repeats)?;
            write_json(&r, a.out.as_ref())
        }
        Command::Suite(a) => crate::suite::run(&a),
        Command::Report(a) => crate::report::run(&a),
    }
}
