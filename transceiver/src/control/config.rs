//! Command-line and environment configuration of the transceiver.
//!
//! Every flag has an environment twin (`--signal-listen` ↔ `VOXGATE_SIGNAL_LISTEN`), so a
//! container is configured through env vars and mounted secret files alone.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use voxgate_proto::hint::FleetKey;

use crate::control::client_origin::ProxyTrust;
use crate::control::ingress::{self, IngressError, IngressSelector, IngressSpec};
use crate::media::audio_bridge::{CoarseTicks, OpusApplication};
use crate::media::thread_priority::LoopPriority;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// voxgate transceiver: terminates WebRTC (ICE-lite, DTLS-SRTP, Opus, data channels) for many
/// sessions on one UDP socket per media loop, with WHIP-style HTTP signaling.
#[derive(Debug, Clone, Parser)]
#[command(name = "transceiver", version, about, long_about = None)]
pub struct Config {
    /// HTTP signaling address (POST /v1/sessions, /healthz, /readyz, /metrics, the demo page at /).
    #[arg(long, env = "VOXGATE_SIGNAL_LISTEN", default_value = "127.0.0.1:8080")]
    pub signal_listen: SocketAddr,

    /// UDP address of media loop 0; loop i binds the same IP on PORT+i.
    #[arg(long, env = "VOXGATE_MEDIA_LISTEN", default_value = "127.0.0.1:40000")]
    pub media_listen: SocketAddr,

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
    /// arrives: windows of 250-750 µs saved no CPU measurably and added delay; 1000 saves
    /// about a tenth under load (400-1,000 passthrough sessions) for a hand-off p99 of
    /// 1.2-1.8 ms
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

    /// Addresses put in the answer's ICE candidates, comma separated, used as-is for every loop
    /// (typically the relay's public address). Default: each loop's own socket address.
    #[arg(long, env = "VOXGATE_ADVERTISE", value_delimiter = ',')]
    pub advertise: Vec<SocketAddr>,

    /// IP at which relays reach the media loops, written (encrypted) into every routing hint.
    /// Default: the --media-listen IP, which must then be a specific address (not 0.0.0.0/::).
    #[arg(long, env = "VOXGATE_INTERNAL_IP")]
    pub internal_ip: Option<IpAddr>,

    /// Absolute base URL of this instance (e.g. `https://tx-3.voice.example.com`). When set,
    /// `Location` is absolute, so PATCH/GET/DELETE reach the instance that owns the session
    /// even behind a load balancer. Default: a relative `Location`.
    #[arg(long, env = "VOXGATE_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Maximum concurrent sessions; beyond it POST answers 503 with Retry-After.
    #[arg(long, env = "VOXGATE_MAX_SESSIONS", default_value_t = 1000)]
    pub max_sessions: usize,

    /// Refuse new sessions (503 + Retry-After) on a media loop that spent more than this share
    /// of the last 0.5 s working; when every loop is past it, POST answers 503. A loop past
    /// saturation delays every call it carries, so this keeps admitted calls whole. 1 turns the
    /// check off.
    #[arg(long, env = "VOXGATE_MAX_LOOP_BUSY", default_value_t = 0.85,
          value_parser = parse_busy_ratio)]
    pub max_loop_busy: f64,

    /// Refuse new sessions (503 + Retry-After) while the whole process (media loops, gRPC,
    /// signaling) used more than this share of its usable cores over the last second. Usable
    /// cores are its CPU affinity capped by a cgroup CPU quota. A loop within its own limit can
    /// still leave the gRPC side that feeds the backends short of CPU; this keeps their audio on
    /// time. 1 turns the check off.
    #[arg(long, env = "VOXGATE_MAX_PROCESS_CPU", default_value_t = 0.85,
          value_parser = parse_busy_ratio)]
    pub max_process_cpu: f64,

    /// Bearer token required on /v1/* when set.
    #[arg(long, env = "VOXGATE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Fleet key shared with relays (64 hex chars). Random per process when absent and no file.
    #[arg(
        long,
        env = "VOXGATE_FLEET_KEY",
        hide_env_values = true,
        conflicts_with = "fleet_key_file"
    )]
    pub fleet_key: Option<String>,

    /// File holding the fleet key as 64 hex chars (e.g. a mounted secret).
    #[arg(long, env = "VOXGATE_FLEET_KEY_FILE")]
    pub fleet_key_file: Option<PathBuf>,

    /// Key id of the fleet key, carried in clear in every hint so relays can rotate keys.
    #[arg(long, env = "VOXGATE_FLEET_KEY_ID", default_value_t = 1)]
    pub fleet_key_id: u8,

    /// Cluster id written into routing hints (relays forward other clusters' hints onward).
    #[arg(long, env = "VOXGATE_CLUSTER_ID", default_value_t = 0)]
    pub cluster_id: u32,

    /// Seconds a new session may take to connect (ICE + DTLS) before it is ended.
    #[arg(long, env = "VOXGATE_CONNECT_TIMEOUT_SECS", default_value_t = 20)]
    pub connect_timeout_secs: u64,

    /// gRPC address of the audio bridge (backends subscribe here; see proto/grpc/voxgate.proto).
    #[arg(long, env = "VOXGATE_GRPC_LISTEN", default_value = "127.0.0.1:50051")]
    pub grpc_listen: SocketAddr,

    /// Bearer token required on every gRPC call when set.
    #[arg(long, env = "VOXGATE_GRPC_TOKEN", hide_env_values = true)]
    pub grpc_token: Option<String>,

    /// Seconds a session may wait for a backend with room before it ends (0 = wait forever).
    #[arg(long, env = "VOXGATE_DISPATCH_TIMEOUT_SECS", default_value_t = 0)]
    pub dispatch_timeout_secs: u64,

    /// Seconds a worker has to attach a dispatched session before it goes to another worker.
    #[arg(long, env = "VOXGATE_ATTACH_TIMEOUT_SECS", default_value_t = 5)]
    pub attach_timeout_secs: u64,

    /// Dispatches per session (after declines or lost backends) before it ends with no_backend.
    #[arg(long, env = "VOXGATE_MAX_DISPATCH_ATTEMPTS", default_value_t = 3)]
    pub max_dispatch_attempts: u32,

    /// Refuse new sessions (503 + Retry-After) while no backend worker has room.
    #[arg(long, env = "VOXGATE_REQUIRE_BACKEND", default_value_t = false)]
    pub require_backend: bool,

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

    /// On SIGTERM/SIGINT, keep serving existing sessions (while refusing new ones) for up to
    /// this many seconds before ending the rest; a second signal ends them at once.
    #[arg(long, env = "VOXGATE_DRAIN_TIMEOUT_SECS", default_value_t = 0)]
    pub drain_timeout_secs: u64,

    /// Largest accepted signaling request body, in bytes.
    #[arg(long, env = "VOXGATE_MAX_BODY_BYTES", default_value_t = 64 * 1024)]
    pub max_body_bytes: usize,

    /// Networks of the relays in front of this transceiver, as CIDRs (e.g. `10.0.0.0/8`). Only
    /// datagrams from these carry a relay header that is believed; from anywhere else a
    /// relay-framed datagram is dropped (counted as `relay_not_allowed`). Default: none (direct
    /// clients only).
    #[arg(long, env = "VOXGATE_RELAYS", value_delimiter = ',', value_parser = parse_net)]
    pub relays: Vec<ipnet::IpNet>,

    /// Most listen-only taps (gRPC `Tap`) a session may have; more are refused with
    /// RESOURCE_EXHAUSTED. Each tap costs a copy of every uplink frame on the media loop.
    #[arg(long, env = "VOXGATE_MAX_TAPS", default_value_t = 4)]
    pub max_taps: usize,

    /// Log format.
    #[arg(long, env = "VOXGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    // ---- Hardening of the control plane, auth and gRPC (issue 11) ----
    /// Start without any token even though signaling or gRPC listens on a non-loopback
    /// address (by default such a transceiver refuses to start). For trusted networks only.
    #[arg(long, env = "VOXGATE_INSECURE_NO_AUTH", default_value_t = false)]
    pub insecure_no_auth: bool,

    /// File holding the key (at least 32 bytes, surrounding whitespace ignored) that signs
    /// short-lived per-call tokens minted by the application (`v1.<payload>.<mac>`, see the
    /// README); accepted on /v1/* beside --token.
    #[arg(long, env = "VOXGATE_TOKEN_KEY_FILE")]
    pub token_key_file: Option<PathBuf>,

    /// Session-creating POSTs a client IP (an IPv6 /64) may make per second, sustained; beyond
    /// it POST answers 429 with Retry-After. 0 turns the limit off.
    #[arg(long, env = "VOXGATE_POST_RATE_PER_IP", default_value_t = 20.0)]
    pub post_rate_per_ip: f64,

    /// POSTs a client IP may make at once before --post-rate-per-ip applies.
    #[arg(long, env = "VOXGATE_POST_BURST_PER_IP", default_value_t = 100)]
    pub post_burst_per_ip: u32,

    /// Concurrent sessions (plus POSTs in flight) per client IP (an IPv6 /64); beyond it POST
    /// answers 429. 0 turns the cap off.
    #[arg(long, env = "VOXGATE_MAX_SESSIONS_PER_IP", default_value_t = 100)]
    pub max_sessions_per_ip: usize,

    /// Longest a session may last; it then ends with reason `max_duration` (told to the
    /// client on the data channel and to the backend). 0 = no limit.
    #[arg(long, env = "VOXGATE_MAX_SESSION_SECS", default_value_t = 4 * 3600)]
    pub max_session_secs: u64,

    /// A backend whose uplink queue for a session stays full this long is treated as lost:
    /// its stream is dropped and the session is dispatched again.
    #[arg(long, env = "VOXGATE_BACKEND_STALL_SECS", default_value_t = 5)]
    pub backend_stall_secs: u64,

    /// Coalesce a runtime tick's gRPC frames into one system call per connection instead of
    /// one per frame (see `backend::write_coalescing`). Off by default: a CPU A/B showed no
    /// saving, and it doubled the setup p99 at 100 arrivals/s in an earlier A/B
    /// (docs/SESSION_COST.md).
    #[arg(long, env = "VOXGATE_GRPC_WRITE_COALESCING")]
    pub grpc_write_coalescing: bool,

    /// Seconds between HTTP/2 PINGs (and TCP keepalive probes) on gRPC connections.
    #[arg(long, env = "VOXGATE_GRPC_KEEPALIVE_SECS", default_value_t = 10)]
    pub grpc_keepalive_secs: u64,

    /// Seconds a gRPC connection may leave a PING unanswered before it is closed and its
    /// backend's sessions are dispatched again.
    #[arg(
        long,
        env = "VOXGATE_GRPC_KEEPALIVE_TIMEOUT_SECS",
        default_value_t = 10
    )]
    pub grpc_keepalive_timeout_secs: u64,

    /// Seconds a signaling connection has to send complete request headers before it is
    /// closed.
    #[arg(long, env = "VOXGATE_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// Seconds a signaling request has to deliver its whole body (408 after that).
    #[arg(long, env = "VOXGATE_BODY_TIMEOUT_SECS", default_value_t = 10)]
    pub body_timeout_secs: u64,

    // ---- Request-steered relay ingress and trusted proxies (issue 13) ----
    /// A named relay ingress, NAME=ADDR[,ADDR...] (IPv4 and/or IPv6 relay public addresses,
    /// e.g. `eu=198.51.100.10:3478,[2001:db8::10]:3478`). Repeatable; each new session's answer
    /// advertises the addresses of one ingress, chosen per request (see --ingress-header,
    /// --ingress-cidr, --ingress-default). In VOXGATE_INGRESS, separate entries with `;`.
    /// Cannot be combined with --advertise (which is the single ingress `default`).
    #[arg(long = "ingress", env = "VOXGATE_INGRESS", value_delimiter = ';',
          value_parser = ingress::parse_named_addrs)]
    pub ingresses: Vec<(String, Vec<SocketAddr>)>,

    /// Where an ingress's relays accept ICE over TCP, NAME=ADDR[,ADDR...], when not at its UDP
    /// addresses (the default, as a relay's --tcp-listen defaults to its UDP address), e.g.
    /// `eu=198.51.100.10:443`. Repeatable; `;` between entries in VOXGATE_INGRESS_TCP.
    #[arg(long = "ingress-tcp", env = "VOXGATE_INGRESS_TCP", value_delimiter = ';',
          value_parser = ingress::parse_named_addrs)]
    pub ingress_tcp: Vec<(String, Vec<SocketAddr>)>,

    /// Request header that steers the ingress, set by a trusted proxy in front of signaling
    /// (e.g. `CF-IPCountry`). Read only from --trusted-proxies peers; from anyone else it is
    /// ignored and counted (voxgate_untrusted_header_total).
    #[arg(long, env = "VOXGATE_INGRESS_HEADER")]
    pub ingress_header: Option<String>,

    /// How the --ingress-header value is read: `country` (an ISO country code looked up in
    /// --ingress-country; the default) or `name` (the name of an ingress).
    #[arg(long, env = "VOXGATE_INGRESS_HEADER_MODE", value_enum)]
    pub ingress_header_mode: Option<ingress::HeaderMode>,

    /// Country → ingress for --ingress-header in country mode, CC=NAME (e.g. `DE=eu`).
    /// Repeatable or comma separated. A code not in the table falls through to the CIDR rules.
    #[arg(long = "ingress-country", env = "VOXGATE_INGRESS_COUNTRY", value_delimiter = ',',
          value_parser = ingress::parse_country_rule)]
    pub ingress_countries: Vec<(String, String)>,

    /// Client network → ingress, CIDR=NAME (e.g. `203.0.113.0/24=us`, `2001:db8::/32=eu`),
    /// applied when the header chose nothing. Longest prefix wins. Repeatable or comma
    /// separated. The client IP is the peer's, or X-Forwarded-For's from a trusted proxy.
    #[arg(long = "ingress-cidr", env = "VOXGATE_INGRESS_CIDR", value_delimiter = ',',
          value_parser = ingress::parse_cidr_rule)]
    pub ingress_cidrs: Vec<(ipnet::IpNet, String)>,

    /// Ingress for requests no rule matched. Default: the first --ingress.
    #[arg(long, env = "VOXGATE_INGRESS_DEFAULT")]
    pub ingress_default: Option<String>,

    /// Networks (CIDRs, comma separated) of the proxies / load balancers in front of
    /// signaling. Only requests from these may set the client IP (X-Forwarded-For, rightmost
    /// hop not in this list) and the --ingress-header. Default: none (every peer is a client).
    #[arg(long, env = "VOXGATE_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_net)]
    pub trusted_proxies: Vec<ipnet::IpNet>,

    // ---- ICE over TCP (issue 13) ----
    /// Each media loop's own ICE-TCP listener (passive candidates, RFC 4571 framing) for
    /// clients whose networks block UDP: `same` (the loop's UDP IP:port), `off`, or an
    /// IP:PORT for loop 0 (loop i binds PORT+i).
    #[arg(long, env = "VOXGATE_TCP_LISTEN", default_value = "same", value_parser = parse_tcp_listen)]
    pub tcp_listen: TcpListen,

    /// With --advertise: the relays' public TCP addresses for the answer's passive TCP
    /// candidates, comma separated (default: the --advertise addresses, as a relay's TCP
    /// listener defaults to its UDP IP:port). With --ingress use --ingress-tcp instead.
    #[arg(long, env = "VOXGATE_ADVERTISE_TCP", value_delimiter = ',')]
    pub advertise_tcp: Vec<SocketAddr>,

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

    /// Seconds a new ICE-TCP connection has to deliver its first frame (an authenticated STUN
    /// binding request) before it is closed.
    #[arg(
        long,
        env = "VOXGATE_TCP_FIRST_FRAME_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tcp_first_frame_timeout_secs: u64,

    /// Seconds an ICE-TCP connection may go without a frame before it is closed (above the
    /// 5 s ICE consent interval).
    #[arg(long, env = "VOXGATE_TCP_IDLE_TIMEOUT_SECS", default_value_t = 30)]
    pub tcp_idle_timeout_secs: u64,
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

/// A CIDR, or a bare IP for just that address.
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{s:?} is neither a CIDR (10.0.0.0/8) nor an IP"))
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

fn parse_busy_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not in (0, 1]"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--loops must be between 1 and 256")]
    BadLoopCount,
    #[error("media port range {0}..{0}+{1} overflows")]
    PortOverflow(u16, usize),
    #[error("cannot read fleet key file {path}: {source}")]
    KeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--media-listen {0} is a wildcard address: set --internal-ip to the IP relays reach")]
    NoInternalIp(IpAddr),
    #[error("invalid fleet key: {0}")]
    Key(#[from] voxgate_proto::hint::KeyError),
    #[error(
        "{0} is set but empty: give it a token, or unset it (an empty token is not \"no auth\")"
    )]
    EmptyToken(&'static str),
    #[error(
        "{what} listens on {addr}, which is not loopback, and no token is configured: set {need}, \
         or pass --insecure-no-auth to serve it unauthenticated"
    )]
    PublicWithoutToken {
        what: &'static str,
        addr: SocketAddr,
        need: &'static str,
    },
    #[error("cannot read token key file {path}: {source}")]
    TokenKeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token key file {path}: {source}")]
    TokenKey {
        path: PathBuf,
        source: crate::auth::call_token::KeyTooShort,
    },
    #[error("--post-rate-per-ip must be a finite number >= 0")]
    BadPostRate,
    #[error("{0}")]
    Ingress(#[from] IngressError),
}

/// Where the fleet key came from: relays can only decode hints of a shared key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Flag,
    File,
    RandomPerProcess,
}

impl Config {
    pub fn loop_count(&self) -> Result<usize, ConfigError> {
        let n = self.loops.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        if n == 0 || n > 256 {
            return Err(ConfigError::BadLoopCount);
        }
        if usize::from(self.media_listen.port()) + n > usize::from(u16::MAX) + 1 {
            return Err(ConfigError::PortOverflow(self.media_listen.port(), n));
        }
        Ok(n)
    }

    /// Worker threads of the control runtime for `loops` media loops.
    ///
    /// One per two loops, not tokio's one per core: a 1-loop transceiver on two cores ran two
    /// workers that woke each other for the uplink batches (1,130 context switches a second
    /// each at 100 passthrough sessions). One worker: CPU per packet 35.1 -> 31.9 us there
    /// (0.91 x, medians of 11 interleaved pairs), no change at 550 passthrough or 100 PCM
    /// sessions (docs/SESSION_COST.md). A loop at its PCM capacity gives its control side
    /// about a fifth of a core of gRPC work, so two loops' worth fits one worker.
    pub fn control_threads(&self, loops: usize) -> usize {
        self.control_threads
            .map_or(loops.div_ceil(2), usize::from)
            .max(1)
    }

    /// The socket address media loop `i` binds.
    pub fn loop_listen(&self, i: usize) -> SocketAddr {
        let mut addr = self.media_listen;
        if addr.port() != 0 {
            addr.set_port(addr.port() + i as u16);
        }
        addr
    }

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

    /// Limits of the loops' ICE-TCP listeners.
    pub fn tcp_limits(&self) -> crate::media::tcp_server::TcpLimits {
        crate::media::tcp_server::TcpLimits {
            max_conns: self.tcp_max_conns,
            max_conns_per_ip: self.tcp_max_conns_per_ip,
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

    /// The IP written into routing hints.
    pub fn internal_ip(&self) -> Result<IpAddr, ConfigError> {
        match self.internal_ip {
            Some(ip) => Ok(ip),
            None if self.media_listen.ip().is_unspecified() => {
                Err(ConfigError::NoInternalIp(self.media_listen.ip()))
            }
            None => Ok(self.media_listen.ip()),
        }
    }

    pub fn dispatch_config(&self) -> crate::backend::dispatch::DispatchConfig {
        crate::backend::dispatch::DispatchConfig {
            attach_timeout: Duration::from_secs(self.attach_timeout_secs.max(1)),
            dispatch_timeout: (self.dispatch_timeout_secs > 0)
                .then(|| Duration::from_secs(self.dispatch_timeout_secs)),
            max_attempts: self.max_dispatch_attempts.max(1),
        }
    }

    /// Checks the authentication settings and fails closed: an empty token is a mistake (a
    /// template that forgot to fill it), not "no auth"; and a listener on a non-loopback
    /// address needs a token unless `--insecure-no-auth` says otherwise.
    pub fn check_auth(&self) -> Result<(), ConfigError> {
        if self.token.as_deref() == Some("") {
            return Err(ConfigError::EmptyToken("--token / VOXGATE_TOKEN"));
        }
        if self.grpc_token.as_deref() == Some("") {
            return Err(ConfigError::EmptyToken("--grpc-token / VOXGATE_GRPC_TOKEN"));
        }
        if !(self.post_rate_per_ip.is_finite() && self.post_rate_per_ip >= 0.0) {
            return Err(ConfigError::BadPostRate);
        }
        if self.insecure_no_auth {
            return Ok(());
        }
        if self.token.is_none()
            && self.token_key_file.is_none()
            && !self.signal_listen.ip().is_loopback()
        {
            return Err(ConfigError::PublicWithoutToken {
                what: "signaling (--signal-listen)",
                addr: self.signal_listen,
                need: "--token or --token-key-file",
            });
        }
        if self.grpc_token.is_none() && !self.grpc_listen.ip().is_loopback() {
            return Err(ConfigError::PublicWithoutToken {
                what: "the gRPC bridge (--grpc-listen)",
                addr: self.grpc_listen,
                need: "--grpc-token",
            });
        }
        Ok(())
    }

    /// The signaling authenticator: the static token and the per-call token key, if any.
    pub fn authenticator(&self) -> Result<crate::auth::Authenticator, ConfigError> {
        let call_key = match &self.token_key_file {
            None => None,
            Some(path) => {
                let bytes = std::fs::read(path).map_err(|source| ConfigError::TokenKeyFile {
                    path: path.clone(),
                    source,
                })?;
                Some(
                    crate::auth::CallTokenKey::from_file_contents(&bytes).map_err(|source| {
                        ConfigError::TokenKey {
                            path: path.clone(),
                            source,
                        }
                    })?,
                )
            }
        };
        Ok(crate::auth::Authenticator {
            static_token: self.token.clone(),
            call_key,
        })
    }

    pub fn rate_limit(&self) -> crate::control::rate_limit::RateLimitConfig {
        crate::control::rate_limit::RateLimitConfig {
            rate: self.post_rate_per_ip,
            burst: self.post_burst_per_ip,
            max_clients: 65_536,
        }
    }

    /// `None` when sessions may last forever.
    pub fn max_session_duration(&self) -> Option<Duration> {
        (self.max_session_secs > 0).then(|| Duration::from_secs(self.max_session_secs))
    }

    pub fn backend_stall(&self) -> Duration {
        Duration::from_secs(self.backend_stall_secs.max(1))
    }

    pub fn grpc_keepalive(&self) -> (Duration, Duration) {
        (
            Duration::from_secs(self.grpc_keepalive_secs.max(1)),
            Duration::from_secs(self.grpc_keepalive_timeout_secs.max(1)),
        )
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.max(1))
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs.max(1))
    }

    /// The validated ingress map and its rules; `None` in direct mode (each loop advertises
    /// its own socket). `--advertise` is the single ingress `default`.
    pub fn ingress_selector(&self) -> Result<Option<IngressSelector>, ConfigError> {
        let ingresses = match (self.advertise.is_empty(), self.ingresses.is_empty()) {
            (false, false) => return Err(IngressError::AdvertiseAndIngress.into()),
            (false, true) => vec![("default".to_string(), self.advertise.clone())],
            (true, _) => self.ingresses.clone(),
        };
        // `--advertise-tcp` is `--ingress-tcp` for the ingress `--advertise` makes.
        let mut tcp_overrides = self.ingress_tcp.clone();
        if !self.advertise_tcp.is_empty() {
            if self.advertise.is_empty() {
                return Err(IngressError::NoIngressMap("--advertise-tcp").into());
            }
            tcp_overrides.push(("default".to_string(), self.advertise_tcp.clone()));
        }
        let spec = IngressSpec {
            ingresses,
            tcp_overrides,
            header: self.ingress_header.clone(),
            header_mode: self.ingress_header_mode,
            countries: self.ingress_countries.clone(),
            cidrs: self.ingress_cidrs.clone(),
            default: self.ingress_default.clone(),
        };
        Ok(IngressSelector::from_spec(&spec)?)
    }

    /// Which signaling peers are proxies whose X-Forwarded-For and ingress header count.
    pub fn proxy_trust(&self, selector: Option<&IngressSelector>) -> ProxyTrust {
        ProxyTrust::new(
            self.trusted_proxies.clone(),
            selector.and_then(|s| s.header().cloned()),
        )
    }

    pub fn fleet_key(&self) -> Result<(FleetKey, KeySource), ConfigError> {
        if let Some(hex) = &self.fleet_key {
            return Ok((FleetKey::from_hex(self.fleet_key_id, hex)?, KeySource::Flag));
        }
        if let Some(path) = &self.fleet_key_file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::KeyFile {
                path: path.clone(),
                source,
            })?;
            return Ok((
                FleetKey::from_hex(self.fleet_key_id, &text)?,
                KeySource::File,
            ));
        }
        let key: [u8; 32] = rand::random();
        Ok((
            FleetKey::new(self.fleet_key_id, key),
            KeySource::RandomPerProcess,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        let mut v = vec!["transceiver"];
        v.extend_from_slice(args);
        Config::try_parse_from(v).expect("valid args")
    }

    #[test]
    fn loops_bind_consecutive_ports() {
        let c = parse(&["--media-listen", "127.0.0.1:5000", "--loops", "3"]);
        assert_eq!(c.loop_count().unwrap(), 3);
        assert_eq!(c.loop_listen(2), "127.0.0.1:5002".parse().unwrap());
    }

    #[test]
    fn control_threads_default_to_one_per_two_loops() {
        assert_eq!(parse(&[]).control_threads(1), 1);
        assert_eq!(parse(&[]).control_threads(2), 1);
        assert_eq!(parse(&[]).control_threads(16), 8);
        assert_eq!(parse(&["--control-threads", "3"]).control_threads(1), 3);
        assert!(Config::try_parse_from(["transceiver", "--control-threads", "0"]).is_err());
    }

    #[test]
    fn coarse_ticks_default_to_two_grids_up_to_256_sessions() {
        assert_eq!(parse(&[]).coarse_ticks(), CoarseTicks::default());
        assert_eq!(
            parse(&[]).coarse_ticks(),
            CoarseTicks {
                up_to: 256,
                grids: 2
            }
        );
        let c = parse(&["--coarse-ticks-up-to", "0", "--coarse-tick-grids", "5"]);
        assert_eq!(c.coarse_ticks(), CoarseTicks { up_to: 0, grids: 5 });
        assert_eq!(parse(&["--coarse-tick-grids", "1"]).coarse_ticks().grids, 1);
    }

    #[test]
    fn coarse_tick_grids_other_than_1_2_or_5_are_refused() {
        for bad in ["0", "3", "4", "10", "20", "-2", "two", ""] {
            // `=`, so that "-2" reaches the value parser instead of reading as a flag.
            let arg = format!("--coarse-tick-grids={bad}");
            let err = Config::try_parse_from(["transceiver", arg.as_str()])
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains("--coarse-tick-grids") && err.contains("must be 1, 2 or 5"),
                "{bad:?}: {err}"
            );
        }
        let err = Config::try_parse_from(["transceiver", "--coarse-ticks-up-to=-1"])
            .expect_err("a session count is not negative")
            .to_string();
        assert!(err.contains("invalid value '-1'"), "{err}");
    }

    #[test]
    fn port_range_overflow_is_an_error() {
        let c = parse(&["--media-listen", "127.0.0.1:65535", "--loops", "2"]);
        assert!(matches!(c.loop_count(), Err(ConfigError::PortOverflow(..))));
    }

    #[test]
    fn wildcard_media_listen_needs_an_internal_ip() {
        let c = parse(&["--media-listen", "0.0.0.0:5000"]);
        assert!(matches!(c.internal_ip(), Err(ConfigError::NoInternalIp(_))));
        let c = parse(&[
            "--media-listen",
            "0.0.0.0:5000",
            "--internal-ip",
            "10.1.2.3",
        ]);
        assert_eq!(
            c.internal_ip().unwrap(),
            "10.1.2.3".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn relays_take_a_cidr_list_and_default_to_none() {
        assert!(parse(&[]).relays.is_empty());
        let c = parse(&["--relays", "10.0.0.0/8,::1/128,192.0.2.7"]);
        assert_eq!(c.relays.len(), 3);
        assert_eq!(c.relays[2], "192.0.2.7/32".parse::<ipnet::IpNet>().unwrap());
        assert!(Config::try_parse_from(["transceiver", "--relays", "10.0.0.1:3478"]).is_err());
    }

    #[test]
    fn opus_application_defaults_to_voip_and_takes_lowdelay() {
        assert_eq!(parse(&[]).opus_application, OpusApplication::Voip);
        let c = parse(&["--opus-application", "lowdelay"]);
        assert_eq!(c.opus_application, OpusApplication::Lowdelay);
        assert_eq!(c.opus_application.to_opus(), opus::Application::LowDelay);
        assert_eq!(
            parse(&["--opus-application", "audio"]).opus_application,
            OpusApplication::Audio
        );
        assert!(Config::try_parse_from(["transceiver", "--opus-application", "celt"]).is_err());
    }

    #[test]
    fn advertise_takes_a_comma_list() {
        let c = parse(&["--advertise", "10.0.0.1:3478,[::1]:3478"]);
        assert_eq!(c.advertise.len(), 2);
    }

    #[test]
    fn ingress_flags_build_a_selector_and_env_takes_semicolons() {
        let c = parse(&[
            "--ingress",
            "eu=198.51.100.10:3478,[2001:db8::10]:3478",
            "--ingress",
            "us=203.0.113.10:3478",
            "--ingress-tcp",
            "us=203.0.113.10:443",
            "--ingress-header",
            "CF-IPCountry",
            "--ingress-country",
            "DE=eu,US=us",
            "--ingress-cidr",
            "192.0.2.0/24=us",
            "--ingress-default",
            "us",
            "--trusted-proxies",
            "10.0.0.0/8",
        ]);
        let s = c.ingress_selector().unwrap().expect("an ingress map");
        assert_eq!(s.ingresses().len(), 2);
        assert_eq!(s.ingresses()[0].udp.len(), 2);
        assert_eq!(
            s.ingresses()[1].tcp,
            vec!["203.0.113.10:443".parse().unwrap()]
        );
        assert_eq!(&*s.default_ingress().name, "us");
        assert_eq!(s.header().map(|h| h.as_str()), Some("cf-ipcountry"));
        assert_eq!(c.trusted_proxies.len(), 1);
        // The environment twin separates entries with ';' (addresses use ',').
        let c = Config::try_parse_from([
            "transceiver",
            "--ingress",
            "eu=192.0.2.1:3478;us=192.0.2.2:3478,[::1]:3478",
        ])
        .unwrap();
        assert_eq!(c.ingresses.len(), 2);
        assert_eq!(c.ingresses[1].1.len(), 2);
    }

    #[test]
    fn advertise_is_the_default_ingress_and_excludes_ingress() {
        let c = parse(&["--advertise", "192.0.2.1:3478"]);
        let s = c.ingress_selector().unwrap().unwrap();
        assert_eq!(&*s.default_ingress().name, "default");
        assert_eq!(s.default_ingress().tcp, s.default_ingress().udp);
        assert!(
            parse(&[]).ingress_selector().unwrap().is_none(),
            "direct mode"
        );
        let c = parse(&[
            "--advertise",
            "192.0.2.1:3478",
            "--ingress",
            "eu=192.0.2.2:3478",
        ]);
        let err = c.ingress_selector().unwrap_err().to_string();
        assert!(err.contains("--advertise and --ingress"), "{err}");
    }

    #[test]
    fn advertise_tcp_is_the_tcp_of_the_advertise_ingress_only() {
        let c = parse(&[
            "--advertise",
            "192.0.2.1:3478",
            "--advertise-tcp",
            "192.0.2.1:443",
        ]);
        let s = c.ingress_selector().unwrap().unwrap();
        assert_eq!(
            s.default_ingress().tcp,
            vec!["192.0.2.1:443".parse().unwrap()]
        );
        let err = parse(&["--advertise-tcp", "192.0.2.1:443"])
            .ingress_selector()
            .unwrap_err()
            .to_string();
        assert!(err.contains("--advertise-tcp needs --ingress"), "{err}");
        assert!(parse(&[]).advertise_tcp_candidates());
        assert!(!parse(&["--no-advertise-tcp"]).advertise_tcp_candidates());
    }

    #[test]
    fn ingress_rule_errors_name_the_flag() {
        let err = parse(&[
            "--ingress",
            "eu=192.0.2.1:3478",
            "--ingress-cidr",
            "10.0.0.0/8=us",
        ])
        .ingress_selector()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--ingress-cidr") && err.contains("\"us\""),
            "{err}"
        );
        let err = parse(&["--ingress-default", "eu"])
            .ingress_selector()
            .unwrap_err()
            .to_string();
        assert!(err.contains("--ingress-default needs --ingress"), "{err}");
        for bad in [
            ["--ingress", "eu"],
            ["--ingress-cidr", "10.0.0.0/40=eu"],
            ["--trusted-proxies", "10.0.0.0/40"],
            ["--ingress-country", "Germany=eu"],
            ["--ingress-header-mode", "city"],
        ] {
            let mut v = vec!["transceiver"];
            v.extend_from_slice(&bad);
            assert!(Config::try_parse_from(v).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_fleet_key_is_rejected_without_echoing_it() {
        let c = parse(&["--fleet-key", "zz-not-hex-secret"]);
        let err = c.fleet_key().unwrap_err().to_string();
        assert!(!err.contains("zz-not-hex-secret"), "{err}");
    }

    #[test]
    fn an_empty_token_is_a_configuration_error() {
        let c = parse(&["--token", ""]);
        let err = c.check_auth().unwrap_err().to_string();
        assert!(
            err.contains("VOXGATE_TOKEN") && err.contains("empty"),
            "{err}"
        );
        let c = parse(&["--grpc-token", ""]);
        assert!(matches!(c.check_auth(), Err(ConfigError::EmptyToken(_))));
    }

    #[test]
    fn a_public_bind_needs_a_token_unless_insecure_no_auth() {
        assert!(
            parse(&[]).check_auth().is_ok(),
            "loopback defaults are fine"
        );
        let c = parse(&["--signal-listen", "0.0.0.0:8080"]);
        let err = c.check_auth().unwrap_err().to_string();
        assert!(
            err.contains("not loopback") && err.contains("--insecure-no-auth"),
            "{err}"
        );
        let c = parse(&["--grpc-listen", "[::]:50051", "--token", "t"]);
        assert!(matches!(
            c.check_auth(),
            Err(ConfigError::PublicWithoutToken { .. })
        ));
        let c = parse(&["--signal-listen", "0.0.0.0:8080", "--token", "t"]);
        assert!(c.check_auth().is_ok());
        let c = parse(&["--signal-listen", "0.0.0.0:8080", "--insecure-no-auth"]);
        assert!(c.check_auth().is_ok());
    }

    #[test]
    fn absent_fleet_key_is_random_per_process() {
        let c = parse(&[]);
        let (_, source) = c.fleet_key().unwrap();
        assert_eq!(source, KeySource::RandomPerProcess);
    }
}
