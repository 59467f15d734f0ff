//! The validated settings each part of the relay is given: the flow tables' decision
//! parameters ([`RoutingConfig`]), the TCP thread's ([`TcpConfig`]) and the route cache's
//! address ([`RedisUrl`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use voxgate_proto::Keyring;

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
    /// Open connections per client source (IPv4 address or IPv6 /64).
    pub max_per_ip: u32,
    /// Open connections per IPv6 /56.
    pub max_per_56: u32,
    /// Open connections per IPv6 /48.
    pub max_per_48: u32,
    /// Open connections in all.
    pub max_connections: usize,
    /// Connections not yet answered by their transceiver (the oldest is evicted past it).
    pub max_tentative: usize,
    /// Accept → first frame.
    pub first_frame_timeout: Duration,
    /// First frame → the transceiver's first reply.
    pub tentative_timeout: Duration,
    /// No reply from the transceiver, once established.
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
