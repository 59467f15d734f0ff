//! The `relay` binary: parse the configuration, start the workers, wait for SIGTERM or
//! SIGINT, stop cleanly (exit 0). See the library docs for the packet path.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use clap::Parser as _;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing_subscriber::EnvFilter;
use voxgate_relay::config::{Args, Config};
use voxgate_relay::runtime::Relay;

fn main() -> anyhow::Result<()> {
    // Logs go to stderr, like other daemons'.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let cfg = Config::from_args(Args::parse()).context("invalid configuration")?;
    // Registered before any thread starts, so no signal is missed.
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;

    let (workers, cluster_id, peers, cache) = (
        cfg.workers,
        cfg.routing.cluster_id,
        cfg.routing.peers.len(),
        cfg.redis.is_some(),
    );
    let relay = Relay::start(cfg).context("starting the relay")?;
    tracing::info!(
        public = %relay.public_addr,
        internal = ?relay.internal_addrs,
        metrics = %relay.metrics_addr,
        tcp = ?relay.tcp_addr,
        tcp_internal = ?relay.tcp_internal_addr,
        workers,
        cluster_id,
        peers,
        route_cache = cache,
        "relay running"
    );

    let signal = signals.forever().next();
    tracing::info!(?signal, "shutting down");
    relay.stop();
    tracing::info!("stopped");
    Ok(())
}
