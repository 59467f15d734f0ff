//! The media path's flags: the loops and their threads, each loop's ICE-TCP listener, and the
//! downlink encoder.

use std::net::SocketAddr;
use std::time::Duration;

use voxgate_proto::source_caps::SourceLimits;

use super::error::ConfigError;
use crate::media::audio_bridge::{CoarseTicks, EncoderSettings, OpusApplication};
use crate::media::loop_settings::LoopSettings;
use crate::media::tcp_server::TcpLimits;
use crate::media::thread_priority::LoopPriority;

/// The media loops (one thread and UDP socket each) and the control runtime beside them.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Media loops")]
pub struct MediaLoopFlags {
    /// Number of media loops (threads, each with its own UDP socket). Default: one per core.
    #[arg(long, env = "VOXGATE_LOOPS")]
    pub loops: Option<usize>,

    /// Worker threads of the control runtime (gRPC to the backends, dispatch, admission).
    /// Default: one per two media loops, at least one.
    #[arg(long, env = "VOXGATE_CONTROL_THREADS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub control_threads: Option<u16>,

    /// Do not pin media loops to CPU cores.
    #[arg(long, env = "VOXGATE_NO_PIN", default_value_t = false)]
    pub no_pin: bool,

    /// Scheduling priority of the media loop threads: `rt` (SCHED_RR 10), `high` (nice -10) or
    /// `normal`. A loop is a real-time thread: raised, it keeps pacing every session's downlink
    /// while a flood or a neighbour keeps its core busy. Needs CAP_SYS_NICE; without it a loop
    /// falls back (rt, then high, then normal) and logs one warning.
    #[arg(long, env = "VOXGATE_LOOP_PRIORITY", value_enum, default_value_t = LoopPriority::Rt)]
    pub loop_priority: LoopPriority,

    /// Under steady traffic a media loop reads its socket at most once per this many
    /// microseconds, instead of being woken for each datagram: fewer wakeups (for the loop and
    /// for the gRPC side it hands frames to) for at most this much uplink delay, paid only
    /// while datagrams come faster than the window. 0 (the default) reads every datagram as it
    /// arrives: short windows saved no CPU and added delay; a window of a millisecond saves
    /// some CPU under heavy passthrough load for a longer uplink hand-off. See
    /// docs/SESSION_COST.md, "No read window by default".
    #[arg(long, env = "VOXGATE_READ_WINDOW_US", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=20_000))]
    pub read_window_us: u64,

    /// A passthrough session attached on a media loop holding at most this many sessions ticks
    /// on only --coarse-tick-grids of the ten 20 ms tick grids: fewer loop wakeups (less CPU)
    /// for a longer uplink hand-off, as each tick pass walks more sessions. 0 turns coarse
    /// grids off (every session on all ten, as PCM sessions are). See
    /// docs/SESSION_COST.md, "Passthrough ticks on two grids".
    #[arg(long, env = "VOXGATE_COARSE_TICKS_UP_TO", value_name = "N",
          default_value_t = CoarseTicks::default().up_to)]
    pub coarse_ticks_up_to: usize,

    /// How many of the ten 20 ms tick grids the sessions of --coarse-ticks-up-to share: 1, 2
    /// or 5 (evenly spaced, 20, 10 or 4 ms apart). Fewer grids, fewer wakeups, longer passes.
    #[arg(long, env = "VOXGATE_COARSE_TICK_GRIDS", value_name = "K",
          default_value_t = CoarseTicks::default().grids,
          value_parser = parse_coarse_tick_grids)]
    pub coarse_tick_grids: u32,

    /// Most listen-only taps (gRPC `Tap`) a session may have; more are refused with
    /// RESOURCE_EXHAUSTED. Each tap costs a copy of every uplink frame on the media loop.
    #[arg(long, env = "VOXGATE_MAX_TAPS", default_value_t = 4)]
    pub max_taps: usize,
}

/// Each media loop's own ICE-TCP listener, and whether answers offer TCP at all.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "ICE over TCP")]
pub struct IceTcpFlags {
    /// Each media loop's own ICE-TCP listener (passive candidates, RFC 4571 framing) for
    /// clients whose networks block UDP: `same` (the loop's UDP IP:port), `off`, or an
    /// IP:PORT for loop 0 (loop i binds PORT+i).
    #[arg(long, env = "VOXGATE_TCP_LISTEN", default_value = "same", value_parser = parse_tcp_listen)]
    pub tcp_listen: TcpListen,

    /// Advertise no TCP candidates at all (the loops' listeners still run unless
    /// --tcp-listen off).
    #[arg(long, env = "VOXGATE_NO_ADVERTISE_TCP", default_value_t = false)]
    pub no_advertise_tcp: bool,

    /// ICE-TCP connections open at once on one media loop; more are closed at accept.
    #[arg(long, env = "VOXGATE_TCP_MAX_CONNS", default_value_t = 4096)]
    pub tcp_max_conns: usize,

    /// ICE-TCP connections open at once from one client IP (an IPv6 /64) on one media loop.
    #[arg(long, env = "VOXGATE_TCP_MAX_CONNS_PER_IP", default_value_t = 16)]
    pub tcp_max_conns_per_ip: usize,

    /// ICE-TCP connections open at once from one IPv6 /56 (the usual delegation to a home:
    /// 256 /64s) on one media loop, so that one customer cannot spread over its /64s what
    /// --tcp-max-conns-per-ip stops on one.
    #[arg(long, env = "VOXGATE_TCP_MAX_CONNS_PER_56", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_max_conns_per_56: u32,

    /// ICE-TCP connections open at once from one IPv6 /48 (the usual delegation to a site) on
    /// one media loop: a sixteenth of the default --tcp-max-conns.
    #[arg(long, env = "VOXGATE_TCP_MAX_CONNS_PER_48", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_max_conns_per_48: u32,

    /// ICE-TCP connections on one media loop still waiting for str0m to answer their first
    /// check (tentative); past it a new connection closes the oldest tentative one. Keep it
    /// well below --tcp-max-conns: the rest stays for connections that authenticated.
    #[arg(long, env = "VOXGATE_TCP_MAX_TENTATIVE", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_max_tentative: u32,

    /// ICE-TCP connections one session may hold on its media loop; a newer one closes the
    /// session's oldest. A browser opens one per local interface and remote TCP candidate.
    #[arg(long, env = "VOXGATE_TCP_MAX_CONNS_PER_SESSION", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_max_conns_per_session: u32,

    /// Seconds a new ICE-TCP connection has to deliver its first frame (an authenticated STUN
    /// binding request) before it is closed.
    #[arg(
        long,
        env = "VOXGATE_TCP_FIRST_FRAME_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tcp_first_frame_timeout_secs: u64,

    /// Seconds an ICE-TCP connection may go without a check that str0m answers before it is
    /// closed (above the 5 s ICE consent interval). Other frames do not count: anyone can send
    /// a frame of junk, while a live pair is checked every few seconds.
    #[arg(long, env = "VOXGATE_TCP_IDLE_TIMEOUT_SECS", default_value_t = 30)]
    pub tcp_idle_timeout_secs: u64,
}

/// The downlink Opus encoder a session gets unless its backend chooses.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Audio encoder")]
pub struct EncoderFlags {
    /// Downlink Opus bitrate in bits/s.
    #[arg(long, env = "VOXGATE_OPUS_BITRATE", default_value_t = 32_000)]
    pub opus_bitrate: i32,

    /// Downlink Opus encoder complexity, 0 (cheapest) to 10.
    #[arg(long, env = "VOXGATE_OPUS_COMPLEXITY", default_value_t = 5,
          value_parser = clap::value_parser!(i32).range(0..=10))]
    pub opus_complexity: i32,

    /// Downlink Opus application: `voip` (SILK for speech), `audio`, or `lowdelay` (CELT
    /// only, the cheapest encoder; meant for synthetic speech).
    #[arg(long, env = "VOXGATE_OPUS_APPLICATION", value_enum, default_value_t = OpusApplication::Voip)]
    pub opus_application: OpusApplication,
}

/// Where the media loops' own ICE-TCP listeners bind (`--tcp-listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpListen {
    /// The same IP:port as each loop's UDP socket.
    Same,
    Off,
    /// Loop 0's address; loop i binds PORT+i.
    At(SocketAddr),
}

fn parse_tcp_listen(s: &str) -> Result<TcpListen, String> {
    match s {
        "same" => Ok(TcpListen::Same),
        "off" => Ok(TcpListen::Off),
        _ => s
            .parse()
            .map(TcpListen::At)
            .map_err(|_| format!("{s:?} is not `same`, `off` or an IP:PORT")),
    }
}

/// A coarse grid count: one that spaces the coarse grids evenly over the ten (see
/// [`CoarseTicks::GRID_CHOICES`]).
fn parse_coarse_tick_grids(s: &str) -> Result<u32, String> {
    let choices = "1, 2 or 5 (divisors of the 10 tick grids; to turn coarse grids off, \
                   use --coarse-ticks-up-to 0)";
    match s.parse::<u32>() {
        Ok(k) if CoarseTicks::allows_grids(k) => Ok(k),
        _ => Err(format!("must be {choices}")),
    }
}

impl MediaLoopFlags {
    /// How many loops to run (default: one per core), if their ports from `media_listen`
    /// (`--media-listen`) on fit.
    pub fn loop_count(&self, media_listen: SocketAddr) -> Result<usize, ConfigError> {
        let n = self.loops.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        if n == 0 || n > 256 {
            return Err(ConfigError::BadLoopCount);
        }
        if usize::from(media_listen.port()) + n > usize::from(u16::MAX) + 1 {
            return Err(ConfigError::PortOverflow(media_listen.port(), n));
        }
        Ok(n)
    }

    /// Worker threads of the control runtime for `loops` media loops.
    ///
    /// One per two loops, not tokio's one per core: a 1-loop transceiver on two cores with
    /// two workers had them wake each other for every uplink batch, and one worker cost less
    /// CPU per packet there and no more elsewhere (docs/SESSION_COST.md, "One control worker
    /// per two loops"). A loop at its PCM capacity gives its control side a fraction of a core
    /// of gRPC work, so two loops' worth fits one worker.
    pub fn control_threads(&self, loops: usize) -> usize {
        self.control_threads
            .map_or(loops.div_ceil(2), usize::from)
            .max(1)
    }

    /// The cores the loops are pinned to, in turn; none with `--no-pin`.
    pub fn pin_cores(&self) -> Vec<core_affinity::CoreId> {
        if self.no_pin {
            Vec::new()
        } else {
            core_affinity::get_core_ids().unwrap_or_default()
        }
    }

    /// How long a loop under steady traffic waits between reads (`--read-window-us`).
    pub fn read_window(&self) -> Duration {
        Duration::from_micros(self.read_window_us)
    }

    /// Which passthrough owners each media loop puts on coarse tick grids.
    pub fn coarse_ticks(&self) -> CoarseTicks {
        CoarseTicks {
            up_to: self.coarse_ticks_up_to,
            grids: self.coarse_tick_grids,
        }
    }

    /// What every media loop shares, given the relay networks (`--relays`) and the limits of
    /// the loops' ICE-TCP listeners.
    pub fn loop_settings(&self, relays: Vec<ipnet::IpNet>, tcp_limits: TcpLimits) -> LoopSettings {
        LoopSettings {
            priority: self.loop_priority,
            relays,
            max_taps: self.max_taps,
            coarse_ticks: self.coarse_ticks(),
            tcp_limits,
            read_window: self.read_window(),
        }
    }
}

impl IceTcpFlags {
    /// Where media loop `i`'s ICE-TCP listener binds, given the address its UDP socket got.
    pub fn loop_tcp_listen(&self, i: usize, udp: SocketAddr) -> Option<SocketAddr> {
        match self.tcp_listen {
            TcpListen::Off => None,
            TcpListen::Same => Some(udp),
            TcpListen::At(mut addr) => {
                if addr.port() != 0 {
                    addr.set_port(addr.port() + i as u16);
                }
                Some(addr)
            }
        }
    }

    /// Limits of the loops' ICE-TCP listeners.
    pub fn tcp_limits(&self) -> TcpLimits {
        TcpLimits {
            max_conns: self.tcp_max_conns,
            max_tentative: self.tcp_max_tentative as usize,
            per_source: SourceLimits {
                per_source: u32::try_from(self.tcp_max_conns_per_ip).unwrap_or(u32::MAX),
                per_56: self.tcp_max_conns_per_56,
                per_48: self.tcp_max_conns_per_48,
            },
            max_conns_per_session: self.tcp_max_conns_per_session as usize,
            first_frame_timeout: Duration::from_secs(self.tcp_first_frame_timeout_secs),
            idle_timeout: Duration::from_secs(self.tcp_idle_timeout_secs),
            ..Default::default()
        }
    }

    /// Whether answers carry passive TCP candidates at all (`--no-advertise-tcp` turns them
    /// off).
    pub fn advertise_tcp_candidates(&self) -> bool {
        !self.no_advertise_tcp
    }
}

impl EncoderFlags {
    /// The downlink encoder settings every session starts with.
    pub fn settings(&self) -> EncoderSettings {
        EncoderSettings {
            bitrate: self.opus_bitrate,
            complexity: self.opus_complexity,
            application: self.opus_application,
        }
    }
}
