//! Command line and environment configuration.
//!
//! Every flag has an environment twin `VOXGATE_RELAY_<FLAG>` (for example `--listen` ↔
//! `VOXGATE_RELAY_LISTEN`). The flags come in groups, one per part of the relay, each under
//! its own help heading ([`flags`]; `docs/FLAGS.md` lists them, generated from the same
//! definitions). [`Config::from_args`] checks each group and builds what each part is given
//! ([`settings`]). Fleet keys are read from a flag, the environment or a file and are never
//! printed: `--help` hides their environment values and [`Config`]'s `Debug` redacts them (the
//! proto crate's `FleetKey` does).

pub mod error;
pub mod flags;
pub mod settings;

use std::net::SocketAddr;
use std::time::Duration;

pub use error::ConfigError;
pub use flags::{Args, TcpListen};
pub use settings::{RedisUrl, RoutingConfig, TcpConfig};

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

impl Config {
    /// Validates parsed arguments.
    pub fn from_args(args: Args) -> Result<Self, ConfigError> {
        let keyring = args.keys.keyring()?;
        let workers = args.sockets.workers()?;
        args.flows.check()?;
        args.routing.check()?;
        args.cache.check()?;
        args.metrics.check()?;
        let tcp = args.tcp.tcp_config(args.sockets.internal_listen)?;
        let (routing, flows, cache) = (&args.routing, &args.flows, &args.cache);
        Ok(Self {
            listen: args.sockets.listen,
            internal_listen: args.sockets.internal_listen,
            workers,
            routing: RoutingConfig {
                keyring,
                cluster_id: routing.cluster_id,
                peers: routing.peer_clusters.clone(),
                transceivers: routing.transceivers.clone(),
                max_tentative_per_ip: flows.max_tentative_per_ip,
                max_flows: flows.max_flows,
                max_tentative: flows.max_tentative(),
                hint_max_age: routing.hint_max_age(),
                accept_untimed_hints: routing.accept_untimed_hints,
                tentative_timeout: flows.tentative_timeout(),
                idle_timeout: flows.idle_timeout(),
                lookups: cache.redis.is_some(),
                lookup_rate: cache.lookup_rate,
                lookup_negative_ttl: cache.lookup_negative_ttl(),
                route_refresh: cache.route_ttl() / 2,
            },
            redis: cache.redis(),
            route_ttl: cache.route_ttl(),
            metrics_listen: args.metrics.metrics_listen,
            metrics_interval: args.metrics.interval(),
            socket_buffer_bytes: args.sockets.socket_buffer_bytes,
            tcp,
        })
    }
}

#[cfg(test)]
mod tests;
