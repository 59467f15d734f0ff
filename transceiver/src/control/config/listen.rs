//! Where the transceiver listens, and the limits of its signaling edge.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The transceiver's listeners and the URL it is reached at.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Listen")]
pub struct ListenFlags {
    /// HTTP signaling address (POST /v1/sessions, /healthz, /readyz, /metrics, the demo page at /).
    #[arg(long, env = "VOXGATE_SIGNAL_LISTEN", default_value = "127.0.0.1:8080")]
    pub signal_listen: SocketAddr,

    /// UDP address of media loop 0; loop i binds the same IP on PORT+i.
    #[arg(long, env = "VOXGATE_MEDIA_LISTEN", default_value = "127.0.0.1:40000")]
    pub media_listen: SocketAddr,

    /// gRPC address of the audio bridge (backends subscribe here; see proto/grpc/voxgate.proto).
    #[arg(long, env = "VOXGATE_GRPC_LISTEN", default_value = "127.0.0.1:50051")]
    pub grpc_listen: SocketAddr,

    /// Absolute base URL of this instance (e.g. `https://tx-3.voice.example.com`). When set,
    /// `Location` is absolute, so PATCH/GET/DELETE reach the instance that owns the session
    /// even behind a load balancer. Default: a relative `Location`.
    #[arg(long, env = "VOXGATE_PUBLIC_URL")]
    pub public_url: Option<String>,
}

/// What one signaling connection or request may take.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Signaling limits")]
pub struct SignalingFlags {
    /// Largest accepted signaling request body, in bytes.
    #[arg(long, env = "VOXGATE_MAX_BODY_BYTES", default_value_t = 64 * 1024)]
    pub max_body_bytes: usize,

    /// Seconds a signaling connection has to send complete request headers before it is
    /// closed.
    #[arg(long, env = "VOXGATE_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// Seconds a signaling request has to deliver its whole body (408 after that).
    #[arg(long, env = "VOXGATE_BODY_TIMEOUT_SECS", default_value_t = 10)]
    pub body_timeout_secs: u64,
}

impl ListenFlags {
    /// The socket address media loop `i` binds.
    pub fn loop_listen(&self, i: usize) -> SocketAddr {
        let mut addr = self.media_listen;
        if addr.port() != 0 {
            addr.set_port(addr.port() + i as u16);
        }
        addr
    }

    /// `--public-url` without a trailing `/`, the base of an absolute `Location`.
    pub fn public_url_base(&self) -> Option<Arc<str>> {
        self.public_url
            .as_deref()
            .map(|u| Arc::from(u.trim_end_matches('/')))
    }
}

impl SignalingFlags {
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.max(1))
    }
}
