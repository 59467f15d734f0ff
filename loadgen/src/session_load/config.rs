//! What a session load is asked to do: where it signals, how many sessions at what rate, the
//! phases' lengths, the media, and what to measure around the window.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::BackendConfig;

/// Where sessions are signaled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Target {
    /// voxgate's WHIP-shaped signaling at this base URL.
    Voxgate { url: String, token: Option<String> },
    /// Janus's HTTP API root (e.g. `http://127.0.0.1:8088/janus`), echotest plugin.
    Janus { url: String },
}

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: Target,
    pub sessions: usize,
    /// New sessions per second (mean of a Poisson process).
    pub rate: f64,
    /// Length of the measurement window.
    pub hold: Duration,
    /// Pause between "all connected" and the window.
    pub settle: Duration,
    /// How long after the last arrival stragglers may take to connect.
    pub connect_timeout: Duration,
    /// Send uplink audio (50 Opus packets/s per session).
    pub audio: bool,
    pub data_channel: bool,
    /// Fraction of uplink RTP dropped before the socket (to exercise loss accounting).
    pub uplink_loss: f64,
    pub seed: u64,
    pub signaling_threads: usize,
    /// Server process whose CPU and RSS are read.
    pub server_pid: Option<u32>,
    pub backend: Option<BackendConfig>,
    pub progress: bool,
    pub bind_ip: IpAddr,
    /// Tear sessions down through signaling at the end (DELETE / destroy).
    pub teardown: bool,
    /// The server's Prometheus `/metrics` URL: when set, the transceiver's uplink hand-off
    /// histogram is scraped at both ends of the window (see [`crate::prom_hist`]).
    pub metrics_url: Option<String>,
}
