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
    /// Shell commands run (and waited for) just after the window opens and just after it
    /// closes: `scripts/bench-ab --callgrind` zeroes and dumps a server's instruction counts
    /// with them, so what it counts is the window alone.
    pub window_hooks: WindowHooks,
}

/// See [`LoadConfig::window_hooks`].
#[derive(Debug, Clone, Default)]
pub struct WindowHooks {
    pub open: Option<String>,
    pub close: Option<String>,
}

impl WindowHooks {
    /// Runs `command` with `sh -c` and waits; a hook that fails is reported on stderr (the
    /// caller checks what the hook was to produce).
    pub fn run(command: &Option<String>) {
        let Some(command) = command else { return };
        match std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .status()
        {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("loadgen: window hook `{command}` exited with {status}"),
            Err(e) => eprintln!("loadgen: window hook `{command}` did not start: {e}"),
        }
    }
}
