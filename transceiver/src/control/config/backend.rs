//! The backends' side: dispatching sessions to them and watching their gRPC connections.

use std::time::Duration;

use crate::backend::dispatch::DispatchConfig;
use crate::backend::grpc_admission::WorkerLimits;

/// Dispatching sessions to backends and keeping their connections honest.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Backends (gRPC)")]
pub struct BackendFlags {
    /// Seconds a session may wait for a backend with room before it ends (0 = wait forever).
    #[arg(long, env = "VOXGATE_DISPATCH_TIMEOUT_SECS", default_value_t = 0)]
    pub dispatch_timeout_secs: u64,

    /// Seconds a worker has to attach a dispatched session before it goes to another worker.
    #[arg(long, env = "VOXGATE_ATTACH_TIMEOUT_SECS", default_value_t = 5)]
    pub attach_timeout_secs: u64,

    /// Dispatches per session (after declines or lost backends) before it ends with no_backend;
    /// counted afresh after each attach that held, so a call served until its backend broke
    /// gets them all again.
    #[arg(long, env = "VOXGATE_MAX_DISPATCH_ATTEMPTS", default_value_t = 3)]
    pub max_dispatch_attempts: u32,

    /// A backend whose uplink queue for a session stays full this long is treated as lost:
    /// its stream is dropped and the session is dispatched again.
    #[arg(long, env = "VOXGATE_BACKEND_STALL_SECS", default_value_t = 5)]
    pub backend_stall_secs: u64,

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

    /// Backend workers (`Work` streams) that may be registered on one gRPC connection at once;
    /// more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "VOXGATE_MAX_WORKERS_PER_CONNECTION", default_value_t = 16)]
    pub max_workers_per_connection: usize,

    /// Backend workers that may be registered at once, on all connections; more are refused
    /// with RESOURCE_EXHAUSTED.
    #[arg(long, env = "VOXGATE_MAX_WORKERS", default_value_t = 1024)]
    pub max_workers: usize,

    /// Coalesce a runtime tick's gRPC frames into one system call per connection instead of
    /// one per frame (see `backend::write_coalescing`). Off by default: it saved no CPU and
    /// slowed session setup under a burst of arrivals. See docs/SESSION_COST.md, "Coalescing:
    /// fewer wakeups and system calls per packet".
    #[arg(long, env = "VOXGATE_GRPC_WRITE_COALESCING")]
    pub grpc_write_coalescing: bool,
}

impl BackendFlags {
    /// The dispatcher's timeouts and attempts.
    pub fn dispatch_config(&self) -> DispatchConfig {
        DispatchConfig {
            attach_timeout: Duration::from_secs(self.attach_timeout_secs.max(1)),
            dispatch_timeout: (self.dispatch_timeout_secs > 0)
                .then(|| Duration::from_secs(self.dispatch_timeout_secs)),
            max_attempts: self.max_dispatch_attempts.max(1),
        }
    }

    /// How many workers may register, per connection and in total.
    pub fn worker_limits(&self) -> WorkerLimits {
        WorkerLimits {
            per_connection: self.max_workers_per_connection,
            total: self.max_workers,
        }
    }

    pub fn backend_stall(&self) -> Duration {
        Duration::from_secs(self.backend_stall_secs.max(1))
    }

    /// The gRPC connections' PING interval and how long a PING may go unanswered.
    pub fn grpc_keepalive(&self) -> (Duration, Duration) {
        (
            Duration::from_secs(self.grpc_keepalive_secs.max(1)),
            Duration::from_secs(self.grpc_keepalive_timeout_secs.max(1)),
        )
    }
}
