//! When a new session is refused, and how long an admitted one may take and last.

use std::time::Duration;

use super::error::ConfigError;
use crate::control::rate_limit::RateLimitConfig;

/// When a new session is refused.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Admission")]
pub struct AdmissionFlags {
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

    /// Refuse new sessions (503 + Retry-After) while no backend worker has room.
    #[arg(long, env = "VOXGATE_REQUIRE_BACKEND", default_value_t = false)]
    pub require_backend: bool,

    /// Concurrent sessions (plus POSTs in flight) per client IP (an IPv6 /64); beyond it POST
    /// answers 429. 0 turns the cap off.
    #[arg(long, env = "VOXGATE_MAX_SESSIONS_PER_IP", default_value_t = 100)]
    pub max_sessions_per_ip: usize,

    /// Session-creating POSTs a client IP (an IPv6 /64) may make per second, sustained; beyond
    /// it POST answers 429 with Retry-After. 0 turns the limit off.
    #[arg(long, env = "VOXGATE_POST_RATE_PER_IP", default_value_t = 20.0)]
    pub post_rate_per_ip: f64,

    /// POSTs a client IP may make at once before --post-rate-per-ip applies.
    #[arg(long, env = "VOXGATE_POST_BURST_PER_IP", default_value_t = 100)]
    pub post_burst_per_ip: u32,

    /// ICE restarts (PATCH with a new offer) a client IP (an IPv6 /64) may make per second,
    /// over all its sessions, sustained; beyond it PATCH answers 429 with Retry-After. Each
    /// session also has its own bucket (4 at once, then one every 5 s). 0 turns the per-IP
    /// limit off.
    #[arg(long, env = "VOXGATE_RESTART_RATE_PER_IP", default_value_t = 10.0)]
    pub restart_rate_per_ip: f64,

    /// ICE restarts a client IP may make at once before --restart-rate-per-ip applies.
    #[arg(long, env = "VOXGATE_RESTART_BURST_PER_IP", default_value_t = 50)]
    pub restart_burst_per_ip: u32,
}

/// How long a session may take to connect and to last, and how long shutdown waits for it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Sessions")]
pub struct SessionFlags {
    /// Seconds a new session may take to connect (ICE + DTLS) before it is ended.
    #[arg(long, env = "VOXGATE_CONNECT_TIMEOUT_SECS", default_value_t = 20)]
    pub connect_timeout_secs: u64,

    /// Longest a session may last; it then ends with reason `max_duration` (told to the
    /// client on the data channel and to the backend). 0 = no limit.
    #[arg(long, env = "VOXGATE_MAX_SESSION_SECS", default_value_t = 4 * 3600)]
    pub max_session_secs: u64,

    /// On SIGTERM/SIGINT, refuse new sessions, ask every connected caller to move its call
    /// to another transceiver, and keep serving the rest for up to this many seconds before
    /// ending them; a second signal ends them at once. 0 = end every session at once.
    // 25 s by default: a bare SIGTERM should move calls, not drop them, and Kubernetes'
    // default stop grace is 30 s, so the drain ends before the kill.
    #[arg(long, env = "VOXGATE_DRAIN_TIMEOUT_SECS", default_value_t = 25)]
    pub drain_timeout_secs: u64,
}

fn parse_busy_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not in (0, 1]"))
    }
}

impl AdmissionFlags {
    /// `--post-rate-per-ip` and `--restart-rate-per-ip` are rates: finite and not negative.
    pub fn check_post_rate(&self) -> Result<(), ConfigError> {
        let rate = |r: f64| r.is_finite() && r >= 0.0;
        if !rate(self.post_rate_per_ip) {
            return Err(ConfigError::BadPostRate);
        }
        if !rate(self.restart_rate_per_ip) {
            return Err(ConfigError::BadRestartRate);
        }
        Ok(())
    }

    /// The per-client-IP token buckets of session-creating POSTs.
    pub fn rate_limit(&self) -> RateLimitConfig {
        RateLimitConfig {
            rate: self.post_rate_per_ip,
            burst: self.post_burst_per_ip,
            max_clients: 65_536,
        }
    }

    /// The per-client-IP token buckets of ICE restarts.
    pub fn restart_rate_limit(&self) -> RateLimitConfig {
        RateLimitConfig {
            rate: self.restart_rate_per_ip,
            burst: self.restart_burst_per_ip,
            max_clients: 65_536,
        }
    }
}

impl SessionFlags {
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs.max(1))
    }

    /// `None` when sessions may last forever.
    pub fn max_session_duration(&self) -> Option<Duration> {
        (self.max_session_secs > 0).then(|| Duration::from_secs(self.max_session_secs))
    }

    /// How long a shutdown lets sessions run on (`--drain-timeout-secs`; zero: not at all).
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.drain_timeout_secs)
    }
}
