//! Command line and environment configuration.
//!
//! Every flag has an environment twin `VOXGATE_RELAY_<FLAG>` (for example `--listen` ↔
//! `VOXGATE_RELAY_LISTEN`). Fleet keys are read from a flag, the environment or a file and
//! are never printed: `--help` hides their environment values and [`Config`]'s `Debug`
//! redacts them (the proto crate's `FleetKey` does).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ipnet::IpNet;
use voxgate_proto::{FleetKey, Keyring};

/// voxgate relay: reads the routing hint of a client's first STUN binding request, then
/// forwards the flow opaquely between the client and the transceiver loop the hint names.
/// It answers nothing by itself.
#[derive(Parser)]
#[command(name = "relay", version, about, long_about = None)]
pub struct Args {
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

    /// Redis route cache, e.g. redis://10.0.0.9:6379 (never logged: it may hold a password). Without it flows live in memory only
    /// and an unknown non-STUN packet is dropped until the client's next STUN check.
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

    /// Receive and send buffer size requested for each UDP socket (beyond rmem_max /
    /// wmem_max only with CAP_NET_ADMIN).
    #[arg(long, env = "VOXGATE_RELAY_SOCKET_BUFFER_BYTES", default_value_t = 4 << 20)]
    pub socket_buffer_bytes: usize,

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

    /// Cap on open TCP connections in all.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_MAX_CONNECTIONS",
        default_value_t = 10_000
    )]
    pub tcp_max_connections: usize,

    /// Seconds from accept to a complete first frame; bytes dripping in do not extend it.
    #[arg(
        long,
        env = "VOXGATE_RELAY_TCP_FIRST_FRAME_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub tcp_first_frame_timeout_secs: u64,

    /// Seconds without a frame either way before a TCP connection is closed (must exceed
    /// the 5 s ICE consent interval).
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

/// Why the configuration cannot be used. Never contains key material.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No current fleet key given.
    #[error("a fleet key is required: --fleet-key, --fleet-key-file or VOXGATE_RELAY_FLEET_KEY")]
    MissingFleetKey,
    /// A key file could not be read.
    #[error("cannot read {what} file {path}: {source}")]
    KeyFile {
        /// Which key.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key is malformed (the error says how, without echoing it).
    #[error("invalid {what}: {source}")]
    BadKey {
        /// Which key.
        what: &'static str,
        /// What is wrong.
        source: voxgate_proto::KeyError,
    },
    /// A numeric setting is out of range.
    #[error("{0}")]
    OutOfRange(&'static str),
    /// The peer list names this relay's own cluster.
    #[error("--peer-cluster names this relay's own cluster id {0}")]
    PeerIsSelf(u32),
    /// The worker count does not fit the internal port range.
    #[error("--internal-listen port {port} + {workers} workers exceeds 65535")]
    InternalPorts {
        /// Base port.
        port: u16,
        /// Worker count.
        workers: usize,
    },
}

/// What the flow table needs to decide; shared read-only by all workers.
#[derive(Debug, Clone)]
pub struct RoutingConfig {
    /// Keys that authenticate routing hints.
    pub keyring: Keyring,
    /// This relay's cluster.
    pub cluster_id: u32,
    /// Relay ingress per other cluster.
    pub peers: Vec<(u32, SocketAddr)>,
    /// Sources allowed on the return path (besides peer relay IPs).
    pub transceivers: Vec<IpNet>,
    /// Tentative flows per client source (IPv4 address or IPv6 /64).
    pub max_tentative_per_ip: u32,
    /// Flows per worker.
    pub max_flows: usize,
    /// Tentative flows per worker (the oldest is evicted past it).
    pub max_tentative: usize,
    /// How long after its mint time a hint may open a flow (plus the skew allowance).
    pub hint_max_age: Duration,
    /// Whether version 1 hints (no mint time) may open flows.
    pub accept_untimed_hints: bool,
    /// Lifetime of a flow without a reply.
    pub tentative_timeout: Duration,
    /// Lifetime of an established flow without traffic.
    pub idle_timeout: Duration,
    /// Whether unknown non-STUN packets may trigger a route lookup (a cache is configured).
    pub lookups: bool,
    /// Lookups started per second per worker.
    pub lookup_rate: u32,
    /// How long a missed lookup is not retried.
    pub lookup_negative_ttl: Duration,
    /// How often an established, active flow's route is rewritten to the cache.
    pub route_refresh: Duration,
}

impl RoutingConfig {
    /// Is `ip` the IP of a configured peer relay?
    pub fn is_peer_ip(&self, ip: IpAddr) -> bool {
        self.peers.iter().any(|(_, a)| a.ip() == ip)
    }

    /// Is `addr` exactly a configured peer relay ingress?
    pub fn is_peer_addr(&self, addr: SocketAddr) -> bool {
        self.peers.iter().any(|(_, a)| *a == addr)
    }

    /// Ingress of the relay serving `cluster`, if configured.
    pub fn peer_for(&self, cluster: u32) -> Option<SocketAddr> {
        self.peers
            .iter()
            .find(|(id, _)| *id == cluster)
            .map(|(_, a)| *a)
    }

    /// May `ip` send on the return path?
    pub fn is_transceiver(&self, ip: IpAddr) -> bool {
        self.transceivers.iter().any(|net| net.contains(&ip))
    }
}

/// The TCP listener's settings (ICE over TCP).
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Where to listen; `None`: the UDP public address (as bound, so port 0 resolves first).
    pub listen: Option<SocketAddr>,
    /// The TCP thread's internal UDP address.
    pub internal_listen: SocketAddr,
    /// Open connections per client source.
    pub max_per_ip: u32,
    /// Open connections in all.
    pub max_connections: usize,
    /// Accept → first frame.
    pub first_frame_timeout: Duration,
    /// No frame either way.
    pub idle_timeout: Duration,
    /// Longest frame from a client.
    pub max_frame: usize,
    /// Reply bytes waiting per connection.
    pub write_queue_bytes: usize,
}

/// A Redis URL; `Debug` hides it, as it may carry a password.
#[derive(Clone)]
pub struct RedisUrl(pub String);

impl RedisUrl {
    /// The URL itself, for the Redis client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisUrl(<redacted>)")
    }
}

/// The validated configuration of the whole process.
#[derive(Debug, Clone)]
pub struct Config {
    /// Public address.
    pub listen: SocketAddr,
    /// Internal base address.
    pub internal_listen: SocketAddr,
    /// Worker threads.
    pub workers: usize,
    /// Decision parameters.
    pub routing: RoutingConfig,
    /// Redis URL, if any.
    pub redis: Option<RedisUrl>,
    /// Route TTL in Redis.
    pub route_ttl: Duration,
    /// Prometheus endpoint.
    pub metrics_listen: SocketAddr,
    /// Counter publication period.
    pub metrics_interval: Duration,
    /// Socket buffer size request.
    pub socket_buffer_bytes: usize,
    /// ICE over TCP, unless `--tcp-listen off`.
    pub tcp: Option<TcpConfig>,
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

impl Config {
    /// Validates parsed arguments.
    pub fn from_args(args: Args) -> Result<Self, ConfigError> {
        let current = read_key(
            "fleet key",
            args.fleet_key_id,
            args.fleet_key.as_deref(),
            args.fleet_key_file.as_ref(),
        )?
        .ok_or(ConfigError::MissingFleetKey)?;
        let previous = read_key(
            "previous fleet key",
            args.previous_fleet_key_id,
            args.previous_fleet_key.as_deref(),
            args.previous_fleet_key_file.as_ref(),
        )?;
        let keyring = match previous {
            Some(prev) => Keyring::new(current).with_previous(prev),
            None => Keyring::new(current),
        };

        let workers = args.workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1)
        });
        if workers == 0 || workers > 1024 {
            return Err(ConfigError::OutOfRange("--workers must be in 1..=1024"));
        }
        let tcp_on = args.tcp_listen != Some(TcpListen::Off);
        let base = args.internal_listen.port();
        if base != 0 && usize::from(base) + workers - 1 > usize::from(u16::MAX) {
            return Err(ConfigError::InternalPorts {
                port: base,
                workers,
            });
        }
        if args.max_flows == 0 {
            return Err(ConfigError::OutOfRange("--max-flows must be at least 1"));
        }
        if args.hint_max_age_secs == 0 {
            return Err(ConfigError::OutOfRange(
                "--hint-max-age-secs must be at least 1",
            ));
        }
        if args.tentative_timeout_secs == 0 || args.idle_timeout_secs == 0 {
            return Err(ConfigError::OutOfRange(
                "--tentative-timeout-secs and --idle-timeout-secs must be at least 1",
            ));
        }
        if args.route_ttl_secs < 2 {
            return Err(ConfigError::OutOfRange(
                "--route-ttl-secs must be at least 2",
            ));
        }
        if args.metrics_interval_ms == 0 {
            return Err(ConfigError::OutOfRange(
                "--metrics-interval-ms must be at least 1",
            ));
        }
        if tcp_on && (args.tcp_first_frame_timeout_secs == 0 || args.tcp_idle_timeout_secs == 0) {
            return Err(ConfigError::OutOfRange(
                "--tcp-first-frame-timeout-secs and --tcp-idle-timeout-secs must be at least 1",
            ));
        }
        if tcp_on && (args.tcp_max_per_ip == 0 || args.tcp_max_connections == 0) {
            return Err(ConfigError::OutOfRange(
                "--tcp-max-per-ip and --tcp-max-connections must be at least 1",
            ));
        }
        let max_frame = usize::from(args.tcp_max_frame_bytes);
        if tcp_on && args.tcp_write_queue_bytes < 2 + max_frame {
            return Err(ConfigError::OutOfRange(
                "--tcp-write-queue-bytes must hold at least one frame (--tcp-max-frame-bytes + 2)",
            ));
        }
        let tcp = tcp_on.then(|| TcpConfig {
            listen: match args.tcp_listen {
                Some(TcpListen::At(addr)) => Some(addr),
                _ => None,
            },
            internal_listen: args
                .tcp_internal_listen
                .unwrap_or(SocketAddr::new(args.internal_listen.ip(), 0)),
            max_per_ip: args.tcp_max_per_ip,
            max_connections: args.tcp_max_connections,
            first_frame_timeout: Duration::from_secs(args.tcp_first_frame_timeout_secs),
            idle_timeout: Duration::from_secs(args.tcp_idle_timeout_secs),
            max_frame,
            write_queue_bytes: args.tcp_write_queue_bytes,
        });
        if let Some((id, _)) = args
            .peer_clusters
            .iter()
            .find(|(id, _)| *id == args.cluster_id)
        {
            return Err(ConfigError::PeerIsSelf(*id));
        }

        let route_ttl = Duration::from_secs(args.route_ttl_secs);
        Ok(Self {
            listen: args.listen,
            internal_listen: args.internal_listen,
            workers,
            routing: RoutingConfig {
                keyring,
                cluster_id: args.cluster_id,
                peers: args.peer_clusters,
                transceivers: args.transceivers,
                max_tentative_per_ip: args.max_tentative_per_ip,
                max_flows: args.max_flows,
                max_tentative: (args.max_flows * usize::from(args.max_tentative_percent) / 100)
                    .max(1),
                hint_max_age: Duration::from_secs(args.hint_max_age_secs),
                accept_untimed_hints: args.accept_untimed_hints,
                tentative_timeout: Duration::from_secs(args.tentative_timeout_secs),
                idle_timeout: Duration::from_secs(args.idle_timeout_secs),
                lookups: args.redis.is_some(),
                lookup_rate: args.lookup_rate,
                lookup_negative_ttl: Duration::from_secs(args.lookup_negative_ttl_secs),
                route_refresh: route_ttl / 2,
            },
            redis: args.redis.map(RedisUrl),
            route_ttl,
            metrics_listen: args.metrics_listen,
            metrics_interval: Duration::from_millis(args.metrics_interval_ms),
            socket_buffer_bytes: args.socket_buffer_bytes,
            tcp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn parse(extra: &[&str]) -> Result<Config, ConfigError> {
        let mut argv = vec!["relay", "--fleet-key", KEY];
        argv.extend_from_slice(extra);
        Config::from_args(Args::try_parse_from(argv).expect("clap accepts"))
    }

    #[test]
    fn defaults_match_the_documented_values() {
        let c = parse(&["--workers", "2"]).unwrap();
        assert_eq!(c.listen, "127.0.0.1:3478".parse().unwrap());
        assert_eq!(c.internal_listen, "127.0.0.1:3578".parse().unwrap());
        assert_eq!(c.metrics_listen, "127.0.0.1:9478".parse().unwrap());
        assert_eq!(c.routing.cluster_id, 0);
        assert_eq!(c.routing.max_tentative_per_ip, 16);
        assert_eq!(c.routing.max_flows, 100_000);
        assert_eq!(c.routing.max_tentative, 25_000);
        assert_eq!(c.routing.hint_max_age, Duration::from_secs(86_400));
        assert!(!c.routing.accept_untimed_hints);
        assert_eq!(c.routing.tentative_timeout, Duration::from_secs(5));
        assert_eq!(c.routing.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.route_ttl, Duration::from_secs(120));
        assert!(!c.routing.lookups);
        assert!(c.routing.is_transceiver("127.0.0.9".parse().unwrap()));
        assert!(c.routing.is_transceiver("::1".parse().unwrap()));
        assert!(!c.routing.is_transceiver("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn peer_clusters_parse_repeated_and_comma_separated() {
        let c = parse(&[
            "--peer-cluster",
            "7=10.1.0.1:3478,8=10.2.0.1:3478",
            "--peer-cluster",
            "9=[2001:db8::1]:3478",
        ])
        .unwrap();
        assert_eq!(c.routing.peers.len(), 3);
        assert_eq!(
            c.routing.peer_for(8),
            Some("10.2.0.1:3478".parse().unwrap())
        );
        assert!(c.routing.is_peer_ip("2001:db8::1".parse().unwrap()));
        assert!(Args::try_parse_from(["relay", "--peer-cluster", "x=1.2.3.4:5"]).is_err());
    }

    #[test]
    fn tentative_share_is_a_percentage_of_max_flows_and_never_zero() {
        let c = parse(&["--max-flows", "1000", "--max-tentative-percent", "10"]).unwrap();
        assert_eq!(c.routing.max_tentative, 100);
        let c = parse(&["--max-flows", "3", "--max-tentative-percent", "1"]).unwrap();
        assert_eq!(c.routing.max_tentative, 1);
        for bad in ["0", "101"] {
            let argv = ["relay", "--fleet-key", KEY, "--max-tentative-percent", bad];
            assert!(Args::try_parse_from(argv).is_err(), "{bad}");
        }
        assert!(matches!(
            parse(&["--hint-max-age-secs", "0"]),
            Err(ConfigError::OutOfRange(_))
        ));
    }

    #[test]
    fn tcp_listens_beside_udp_by_default_and_can_be_turned_off() {
        let c = parse(&[]).unwrap();
        let tcp = c.tcp.expect("on by default");
        assert_eq!(tcp.listen, None, "same address as --listen");
        assert_eq!(tcp.max_per_ip, 64);
        assert_eq!(tcp.max_connections, 10_000);
        assert_eq!(tcp.first_frame_timeout, Duration::from_secs(5));
        assert_eq!(tcp.idle_timeout, Duration::from_secs(30));
        assert_eq!(tcp.max_frame, 2048);
        assert_eq!(tcp.write_queue_bytes, 16_384);
        let c = parse(&["--tcp-listen", "0.0.0.0:443"]).unwrap();
        assert_eq!(c.tcp.unwrap().listen, Some("0.0.0.0:443".parse().unwrap()));
        assert!(parse(&["--tcp-listen", "off"]).unwrap().tcp.is_none());
        assert!(Args::try_parse_from(["relay", "--tcp-listen", "nowhere"]).is_err());
        assert!(matches!(
            parse(&["--tcp-write-queue-bytes", "100"]),
            Err(ConfigError::OutOfRange(_))
        ));
        let c = parse(&["--internal-listen", "10.0.0.5:3578"]).unwrap();
        assert_eq!(
            c.tcp.unwrap().internal_listen,
            "10.0.0.5:0".parse().unwrap()
        );
        let c = parse(&["--tcp-internal-listen", "10.0.0.5:3600"]).unwrap();
        assert_eq!(
            c.tcp.unwrap().internal_listen,
            "10.0.0.5:3600".parse().unwrap()
        );
    }

    #[test]
    fn own_cluster_as_peer_is_rejected() {
        assert!(matches!(
            parse(&["--cluster-id", "3", "--peer-cluster", "3=10.0.0.1:3478"]),
            Err(ConfigError::PeerIsSelf(3))
        ));
    }

    #[test]
    fn missing_or_bad_key_is_rejected_without_echoing_it() {
        let args = Args::try_parse_from(["relay"]).unwrap();
        assert!(matches!(
            Config::from_args(args),
            Err(ConfigError::MissingFleetKey)
        ));
        let secret = "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
        let args = Args::try_parse_from(["relay", "--fleet-key", secret]).unwrap();
        let err = Config::from_args(args).unwrap_err().to_string();
        assert!(!err.contains("0102030405"), "{err}");
    }

    #[test]
    fn keys_are_read_from_files_with_their_ids() {
        let dir = std::env::temp_dir();
        let current = dir.join(format!("voxgate-relay-key-{}", std::process::id()));
        std::fs::write(&current, format!("{KEY}\n")).unwrap();
        let args = Args::try_parse_from([
            "relay",
            "--fleet-key-file",
            current.to_str().unwrap(),
            "--fleet-key-id",
            "7",
            "--previous-fleet-key",
            KEY,
            "--previous-fleet-key-id",
            "6",
        ])
        .unwrap();
        let c = Config::from_args(args).unwrap();
        std::fs::remove_file(&current).unwrap();
        assert_eq!(c.routing.keyring.current().id(), 7);
        let missing = Args::try_parse_from(["relay", "--fleet-key-file", "/nonexistent/key"]);
        assert!(matches!(
            Config::from_args(missing.unwrap()),
            Err(ConfigError::KeyFile { .. })
        ));
    }

    #[test]
    fn config_debug_does_not_print_the_key() {
        let c = parse(&[
            "--previous-fleet-key",
            KEY,
            "--redis",
            "redis://:hunter2@10.0.0.9:6379",
        ])
        .unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(!dbg.contains("0102"), "{dbg}");
        assert!(!dbg.contains("[0, 1, 2"), "{dbg}");
    }
}
