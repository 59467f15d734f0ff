//! The relay's command line: [`Args`], one flattened group of flags per part of the relay,
//! each under its own help heading, each with the checks and conversions of its own values.
//! Every flag has an environment twin `VOXGATE_RELAY_<FLAG>`. No group derives `Debug`: two
//! hold key material and one a Redis URL that may carry a password.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ipnet::IpNet;
use voxgate_proto::{FleetKey, Keyring};

use super::error::ConfigError;
use super::settings::{RedisUrl, TcpConfig};

/// voxgate relay: reads the routing hint of a client's first STUN binding request, then
/// forwards the flow opaquely between the client and the transceiver loop the hint names.
/// It answers nothing by itself.
#[derive(Parser)]
#[command(name = "relay", version, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub sockets: SocketFlags,
    #[command(flatten)]
    pub keys: KeyFlags,
    #[command(flatten)]
    pub routing: RoutingFlags,
    #[command(flatten)]
    pub flows: FlowFlags,
    #[command(flatten)]
    pub cache: CacheFlags,
    #[command(flatten)]
    pub tcp: TcpFlags,
    #[command(flatten)]
    pub metrics: MetricsFlags,
}

/// Where the relay listens and how many workers share the load.
#[derive(clap::Args)]
#[command(next_help_heading = "Sockets and workers")]
pub struct SocketFlags {
    /// Public UDP address clients send to. Every worker binds it with SO_REUSEPORT, so the
    /// kernel keeps each client flow on one worker. Port 0 picks one port for all workers.
    #[arg(long, env = "VOXGATE_RELAY_LISTEN", default_value = "127.0.0.1:3478")]
    pub listen: SocketAddr,

    /// Internal UDP address towards transceivers and peer relays. Worker i binds PORT+i, so
    /// a reply sent to the source of a relayed datagram reaches the worker owning the flow.
    /// Port 0 gives every worker its own ephemeral port.
    #[arg(
        long,
        env = "VOXGATE_RELAY_INTERNAL_LISTEN",
        default_value = "127.0.0.1:3578"
    )]
    pub internal_listen: SocketAddr,

    /// Number of worker threads, each pinned to a core. Default: the number of cores.
    #[arg(long, env = "VOXGATE_RELAY_WORKERS")]
    pub workers: Option<usize>,

    /// Receive and send buffer size requested for each UDP socket (beyond rmem_max /
    /// wmem_max only with CAP_NET_ADMIN).
    #[arg(long, env = "VOXGATE_RELAY_SOCKET_BUFFER_BYTES", default_value_t = 4 << 20)]
    pub socket_buffer_bytes: usize,
}

/// The keys that authenticate routing hints: the current one and, during a rotation, the
/// previous one.
#[derive(clap::Args)]
#[command(next_help_heading = "Fleet keys")]
pub struct KeyFlags {
    /// Current fleet key, 64 hex characters. Prefer --fleet-key-file or the environment:
    /// command lines are visible to other local users.
    #[arg(long, env = "VOXGATE_RELAY_FLEET_KEY", hide_env_values = true)]
    pub fleet_key: Option<String>,

    /// File holding the current fleet key (64 hex characters, surrounding whitespace ignored).
    #[arg(
        long,
        env = "VOXGATE_RELAY_FLEET_KEY_FILE",
        conflicts_with = "fleet_key"
    )]
    pub fleet_key_file: Option<PathBuf>,

    /// Key id of the current fleet key (carried in clear in every hint).
    #[arg(long, env = "VOXGATE_RELAY_FLEET_KEY_ID", default_value_t = 1)]
    pub fleet_key_id: u8,

    /// Previous fleet key, still accepted during a key rotation (64 hex characters).
    #[arg(long, env = "VOXGATE_RELAY_PREVIOUS_FLEET_KEY", hide_env_values = true)]
    pub previous_fleet_key: Option<String>,

    /// File holding the previous fleet key.
    #[arg(
        long,
        env = "VOXGATE_RELAY_PREVIOUS_FLEET_KEY_FILE",
        conflicts_with = "previous_fleet_key"
    )]
    pub previous_fleet_key_file: Option<PathBuf>,

    /// Key id of the previous fleet key.
    #[arg(long, env = "VOXGATE_RELAY_PREVIOUS_FLEET_KEY_ID", default_value_t = 0)]
    pub previous_fleet_key_id: u8,
}

/// Which hints route where: this relay's cluster, the peer relays of the others, the
/// transceiver networks, how old a hint may be.
#[derive(clap::Args)]
#[command(next_help_heading = "Routing")]
pub struct RoutingFlags {
    /// Cluster this relay serves. Hints naming it are forwarded to the transceiver loop they
    /// name; hints naming another cluster go to that cluster's relay (--peer-cluster).
    #[arg(long, env = "VOXGATE_RELAY_CLUSTER_ID", default_value_t = 0)]
    pub cluster_id: u32,

    /// Relay ingress of another cluster, as ID=IP:PORT (repeatable, or comma-separated).
    /// Flows whose hint names that cluster are forwarded there with the relay header (the
    /// global tier). Relay-framed datagrams on the public port are accepted only from the IPs
    /// of these addresses.
    #[arg(
        long = "peer-cluster",
        env = "VOXGATE_RELAY_PEER_CLUSTERS",
        value_delimiter = ',',
        value_parser = parse_peer
    )]
    pub peer_clusters: Vec<(u32, SocketAddr)>,

    /// Networks allowed to use the return path (transceivers, and peer relays' internal
    /// addresses when they differ from their ingress IPs), as CIDRs.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TRANSCEIVERS",
        value_delimiter = ',',
        default_value = "127.0.0.0/8,::1/128"
    )]
    pub transceivers: Vec<IpNet>,

    /// Seconds a routing hint opens new flows after it was minted (5 min of clock skew between
    /// transceiver and relay are tolerated on top). Existing flows, ICE consent checks
    /// included, are never re-checked, so longer calls keep working.
    #[arg(
        long,
        env = "VOXGATE_RELAY_HINT_MAX_AGE_SECS",
        default_value_t = 86_400
    )]
    pub hint_max_age_secs: u64,

    /// Also route version 1 hints, which carry no mint time and so never expire. Only while
    /// upgrading a fleet whose transceivers still mint them.
    #[arg(long, env = "VOXGATE_RELAY_ACCEPT_UNTIMED_HINTS")]
    pub accept_untimed_hints: bool,
}

/// Caps and timers of each worker's flow table.
#[derive(clap::Args)]
#[command(next_help_heading = "Flow table")]
pub struct FlowFlags {
    /// Cap on tentative flows (no reply seen yet) per client source, per worker: per IPv4
    /// address, and per IPv6 /64 (one host can hold a whole /64).
    #[arg(long, env = "VOXGATE_RELAY_MAX_TENTATIVE_PER_IP", default_value_t = 16)]
    pub max_tentative_per_ip: u32,

    /// Cap on flows per worker (tentative and established).
    #[arg(long, env = "VOXGATE_RELAY_MAX_FLOWS", default_value_t = 100_000)]
    pub max_flows: usize,

    /// Cap on tentative flows per worker, as a percentage of --max-flows. A new flow past it
    /// evicts the oldest tentative flow; established flows are never evicted.
    #[arg(
        long,
        env = "VOXGATE_RELAY_MAX_TENTATIVE_PERCENT",
        default_value_t = 25,
        value_parser = clap::value_parser!(u8).range(1..=100)
    )]
    pub max_tentative_percent: u8,

    /// Seconds a tentative flow lives without a reply from its transceiver.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TENTATIVE_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tentative_timeout_secs: u64,

    /// Seconds an established flow lives without traffic either way (must exceed the 5 s ICE
    /// consent interval).
    #[arg(long, env = "VOXGATE_RELAY_IDLE_TIMEOUT_SECS", default_value_t = 30)]
    pub idle_timeout_secs: u64,
}

/// The Redis route cache, which lets a flow survive a relay restart.
#[derive(clap::Args)]
#[command(next_help_heading = "Route cache")]
pub struct CacheFlags {
    /// Redis route cache, e.g. redis://10.0.0.9:6379 (never logged: it may hold a password).
    /// Without it flows live in memory only and an unknown non-STUN packet is dropped until the
    /// client's next STUN check.
    #[arg(long, env = "VOXGATE_RELAY_REDIS", hide_env_values = true)]
    pub redis: Option<String>,

    /// TTL of a route written to Redis; established flows rewrite it every TTL/2 of traffic.
    #[arg(long, env = "VOXGATE_RELAY_ROUTE_TTL_SECS", default_value_t = 120)]
    pub route_ttl_secs: u64,

    /// Redis lookups a worker may start per second (unknown non-STUN packets).
    #[arg(long, env = "VOXGATE_RELAY_LOOKUP_RATE", default_value_t = 200)]
    pub lookup_rate: u32,

    /// Seconds a client whose lookup missed is not looked up again.
    #[arg(
        long,
        env = "VOXGATE_RELAY_LOOKUP_NEGATIVE_TTL_SECS",
        default_value_t = 5
    )]
    pub lookup_negative_ttl_secs: u64,
}

/// The TCP listener and its thread (ICE over TCP).
#[derive(clap::Args)]
#[command(next_help_heading = "ICE over TCP")]
pub struct TcpFlags {
    /// Public TCP address for ICE over TCP (RFC 6544 passive candidates, RFC 4571 framing),
    /// or `off`. Default: the IP and port of --listen. One thread serves every connection and
    /// talks to transceivers from its own internal UDP socket (--tcp-internal-listen). A
    /// connection's first frame must be a STUN binding request with a valid hint, else it is
    /// closed with nothing sent.
    #[arg(long, env = "VOXGATE_RELAY_TCP_LISTEN", value_parser = parse_tcp_listen)]
    pub tcp_listen: Option<TcpListen>,

    /// Internal UDP address of the TCP thread: frames of TCP clients leave from it and
    /// transceivers answer to it. Default: the IP of --internal-listen, any free port (set
    /// a port when a firewall between relay and transceivers needs one).
    #[arg(long, env = "VOXGATE_RELAY_TCP_INTERNAL_LISTEN")]
    pub tcp_internal_listen: Option<SocketAddr>,

    /// Cap on open TCP connections per client source (an IPv4 address, or an IPv6 /64).
    /// Callers behind one corporate NAT share it: each needs one connection.
    #[arg(long, env = "VOXGATE_RELAY_TCP_MAX_PER_IP", default_value_t = 64)]
    pub tcp_max_per_ip: u32,

    /// Cap on open TCP connections per IPv6 /56 (the usual delegation to a home: 256 /64s),
    /// so that one customer cannot spread over its /64s what --tcp-max-per-ip stops on one.
    #[arg(long, env = "VOXGATE_RELAY_TCP_MAX_PER_56", default_value_t = 256)]
    pub tcp_max_per_56: u32,

    /// Cap on open TCP connections per IPv6 /48 (the usual delegation to a site, a tenth of
    /// the default --tcp-max-connections).
    #[arg(long, env = "VOXGATE_RELAY_TCP_MAX_PER_48", default_value_t = 1024)]
    pub tcp_max_per_48: u32,

    /// Cap on open TCP connections in all.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_MAX_CONNECTIONS",
        default_value_t = 10_000
    )]
    pub tcp_max_connections: usize,

    /// Cap on tentative TCP connections: awaiting their first frame, or forwarded but not
    /// answered by the transceiver yet (a hint proves neither that its session still exists
    /// nor that the client knows its password). Past it, or into a full tier, a new
    /// connection closes the oldest tentative one; established connections are never closed
    /// for a newcomer.
    #[arg(long, env = "VOXGATE_RELAY_TCP_MAX_TENTATIVE", default_value_t = 2_500)]
    pub tcp_max_tentative: usize,

    /// Seconds from accept to a complete first frame; bytes dripping in do not extend it.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_FIRST_FRAME_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tcp_first_frame_timeout_secs: u64,

    /// Seconds a TCP connection whose first frame was forwarded waits for the transceiver's
    /// first reply before it is closed, as a tentative UDP flow does.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_TENTATIVE_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tcp_tentative_timeout_secs: u64,

    /// Seconds without a reply from the transceiver before an established TCP connection is
    /// closed (must exceed the 5 s ICE consent interval). The client's own frames do not count:
    /// the transceiver answers only what authenticates, so a connection whose session ended
    /// closes this long after the transceiver fell silent, whatever its client sends.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_IDLE_TIMEOUT_SECS",
        default_value_t = 30
    )]
    pub tcp_idle_timeout_secs: u64,

    /// Longest RFC 4571 frame accepted from a client; a longer length prefix closes the
    /// connection. STUN, DTLS records and SRTP packets of ICE-TCP stay under an MTU.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_MAX_FRAME_BYTES",
        default_value_t = 2048,
        value_parser = clap::value_parser!(u16).range(576..)
    )]
    pub tcp_max_frame_bytes: u16,

    /// Bytes of replies a TCP connection may have waiting for a client that does not read;
    /// past it the oldest frames are dropped (counted as drops, reason write_queue_full).
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_WRITE_QUEUE_BYTES",
        default_value_t = 16_384
    )]
    pub tcp_write_queue_bytes: usize,
}

/// The Prometheus endpoint.
#[derive(clap::Args)]
#[command(next_help_heading = "Metrics")]
pub struct MetricsFlags {
    /// Prometheus endpoint, served at /metrics.
    #[arg(
        long,
        env = "VOXGATE_RELAY_METRICS_LISTEN",
        default_value = "127.0.0.1:9478"
    )]
    pub metrics_listen: SocketAddr,

    /// Milliseconds between publications of the workers' counters to /metrics.
    #[arg(long, env = "VOXGATE_RELAY_METRICS_INTERVAL_MS", default_value_t = 500)]
    pub metrics_interval_ms: u64,
}

/// Where the TCP listener binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpListen {
    /// No TCP listener.
    Off,
    /// This address.
    At(SocketAddr),
}

fn parse_tcp_listen(s: &str) -> Result<TcpListen, String> {
    if s.trim().eq_ignore_ascii_case("off") {
        return Ok(TcpListen::Off);
    }
    s.trim()
        .parse()
        .map(TcpListen::At)
        .map_err(|e| format!("expected IP:PORT or \"off\", got {s:?}: {e}"))
}

fn parse_peer(s: &str) -> Result<(u32, SocketAddr), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ID=IP:PORT, got {s:?}"))?;
    let id = id
        .trim()
        .parse::<u32>()
        .map_err(|e| format!("bad cluster id in {s:?}: {e}"))?;
    let addr = addr
        .trim()
        .parse::<SocketAddr>()
        .map_err(|e| format!("bad address in {s:?}: {e}"))?;
    Ok((id, addr))
}

fn read_key(
    what: &'static str,
    id: u8,
    inline: Option<&str>,
    file: Option<&PathBuf>,
) -> Result<Option<FleetKey>, ConfigError> {
    let text = match (inline, file) {
        (Some(hex), _) => hex.to_owned(),
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|source| ConfigError::KeyFile {
                what,
                path: path.clone(),
                source,
            })?
        }
        (None, None) => return Ok(None),
    };
    FleetKey::from_hex(id, &text)
        .map(Some)
        .map_err(|source| ConfigError::BadKey { what, source })
}

impl SocketFlags {
    /// The worker count (default: one per core), if its internal ports fit.
    pub fn workers(&self) -> Result<usize, ConfigError> {
        let workers = self.workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1)
        });
        if workers == 0 || workers > 1024 {
            return Err(ConfigError::OutOfRange("--workers must be in 1..=1024"));
        }
        let base = self.internal_listen.port();
        if base != 0 && usize::from(base) + workers - 1 > usize::from(u16::MAX) {
            return Err(ConfigError::InternalPorts {
                port: base,
                workers,
            });
        }
        Ok(workers)
    }
}

impl KeyFlags {
    /// The current key (required) and the previous one, if given.
    pub fn keyring(&self) -> Result<Keyring, ConfigError> {
        let current = read_key(
            "fleet key",
            self.fleet_key_id,
            self.fleet_key.as_deref(),
            self.fleet_key_file.as_ref(),
        )?
        .ok_or(ConfigError::MissingFleetKey)?;
        let previous = read_key(
            "previous fleet key",
            self.previous_fleet_key_id,
            self.previous_fleet_key.as_deref(),
            self.previous_fleet_key_file.as_ref(),
        )?;
        Ok(match previous {
            Some(prev) => Keyring::new(current).with_previous(prev),
            None => Keyring::new(current),
        })
    }
}

impl RoutingFlags {
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.hint_max_age_secs == 0 {
            return Err(ConfigError::OutOfRange(
                "--hint-max-age-secs must be at least 1",
            ));
        }
        if let Some((id, _)) = self
            .peer_clusters
            .iter()
            .find(|(id, _)| *id == self.cluster_id)
        {
            return Err(ConfigError::PeerIsSelf(*id));
        }
        Ok(())
    }

    pub fn hint_max_age(&self) -> Duration {
        Duration::from_secs(self.hint_max_age_secs)
    }
}

impl FlowFlags {
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.max_flows == 0 {
            return Err(ConfigError::OutOfRange("--max-flows must be at least 1"));
        }
        if self.tentative_timeout_secs == 0 || self.idle_timeout_secs == 0 {
            return Err(ConfigError::OutOfRange(
                "--tentative-timeout-secs and --idle-timeout-secs must be at least 1",
            ));
        }
        Ok(())
    }

    /// Tentative flows per worker: `--max-tentative-percent` of `--max-flows`, at least one.
    pub fn max_tentative(&self) -> usize {
        (self.max_flows * usize::from(self.max_tentative_percent) / 100).max(1)
    }

    pub fn tentative_timeout(&self) -> Duration {
        Duration::from_secs(self.tentative_timeout_secs)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }
}

impl CacheFlags {
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.route_ttl_secs < 2 {
            return Err(ConfigError::OutOfRange(
                "--route-ttl-secs must be at least 2",
            ));
        }
        Ok(())
    }

    pub fn redis(&self) -> Option<RedisUrl> {
        self.redis.clone().map(RedisUrl)
    }

    pub fn route_ttl(&self) -> Duration {
        Duration::from_secs(self.route_ttl_secs)
    }

    pub fn lookup_negative_ttl(&self) -> Duration {
        Duration::from_secs(self.lookup_negative_ttl_secs)
    }
}

impl TcpFlags {
    /// The TCP thread's settings, `None` with `--tcp-listen off`. Its internal socket
    /// defaults to the IP of `internal_listen` (`--internal-listen`), any port.
    pub fn tcp_config(
        &self,
        internal_listen: SocketAddr,
    ) -> Result<Option<TcpConfig>, ConfigError> {
        if self.tcp_listen == Some(TcpListen::Off) {
            return Ok(None);
        }
        if self.tcp_first_frame_timeout_secs == 0
            || self.tcp_tentative_timeout_secs == 0
            || self.tcp_idle_timeout_secs == 0
        {
            return Err(ConfigError::OutOfRange(
                "--tcp-first-frame-timeout-secs, --tcp-tentative-timeout-secs and \
                 --tcp-idle-timeout-secs must be at least 1",
            ));
        }
        if self.tcp_max_per_ip == 0
            || self.tcp_max_per_56 == 0
            || self.tcp_max_per_48 == 0
            || self.tcp_max_connections == 0
            || self.tcp_max_tentative == 0
        {
            return Err(ConfigError::OutOfRange(
                "--tcp-max-per-ip, --tcp-max-per-56, --tcp-max-per-48, --tcp-max-connections \
                 and --tcp-max-tentative must be at least 1",
            ));
        }
        let max_frame = usize::from(self.tcp_max_frame_bytes);
        if self.tcp_write_queue_bytes < 2 + max_frame {
            return Err(ConfigError::OutOfRange(
                "--tcp-write-queue-bytes must hold at least one frame (--tcp-max-frame-bytes + 2)",
            ));
        }
        Ok(Some(TcpConfig {
            listen: match self.tcp_listen {
                Some(TcpListen::At(addr)) => Some(addr),
                _ => None,
            },
            internal_listen: self
                .tcp_internal_listen
                .unwrap_or(SocketAddr::new(internal_listen.ip(), 0)),
            max_per_ip: self.tcp_max_per_ip,
            max_per_56: self.tcp_max_per_56,
            max_per_48: self.tcp_max_per_48,
            max_connections: self.tcp_max_connections,
            max_tentative: self.tcp_max_tentative,
            first_frame_timeout: Duration::from_secs(self.tcp_first_frame_timeout_secs),
            tentative_timeout: Duration::from_secs(self.tcp_tentative_timeout_secs),
            idle_timeout: Duration::from_secs(self.tcp_idle_timeout_secs),
            max_frame,
            write_queue_bytes: self.tcp_write_queue_bytes,
        }))
    }
}

impl MetricsFlags {
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.metrics_interval_ms == 0 {
            return Err(ConfigError::OutOfRange(
                "--metrics-interval-ms must be at least 1",
            ));
        }
        Ok(())
    }

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.metrics_interval_ms)
    }
}
