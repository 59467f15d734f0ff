//! Everything a session load measured, as it lands in the results JSON.

use serde::{Deserialize, Serialize};

use crate::loss::LossSummary;
use crate::stats::Summary;

/// Setup latencies, in milliseconds from the start of signaling.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupLatency {
    pub answer: Summary,
    pub ice_connected: Summary,
    pub dtls_connected: Summary,
    /// First uplink PCM (or Opus) frame received by the backend.
    pub first_frame: Summary,
    /// Raw samples, for CDF plots.
    pub samples: SetupSamples,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupSamples {
    pub answer: Vec<f64>,
    pub ice_connected: Vec<f64>,
    pub dtls_connected: Vec<f64>,
    pub first_frame: Vec<f64>,
}

/// What the OS charged the server for, around the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerUsage {
    pub pid: u32,
    pub cpu_secs: f64,
    /// CPU seconds per session-second (sessions connected through the window).
    pub cpu_per_session_sec: f64,
    /// Server CPU per datagram the clients sent or received in the window, in µs.
    pub us_per_packet: f64,
    /// Share of one core the server used during the window.
    pub cores: f64,
    pub rss_before_kib: u64,
    pub rss_window_start_kib: u64,
    pub rss_window_end_kib: u64,
    /// (RSS at window end − RSS before the first session) / connected sessions.
    pub rss_per_session_kib: f64,
}

/// One line of the progress log.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProgressSample {
    pub t: f64,
    pub up: usize,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub backend_fps: f64,
}

/// What was dropped during the window, and where: the transceiver's own counters and the
/// kernel's, so that a run which lost packets says at which step they went. `None` for a
/// counter that could not be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowDrops {
    /// Uplink messages a backend stream's full queue refused (`voxgate_bridge_uplink_dropped_total`).
    pub bridge_uplink: Option<u64>,
    /// Datagrams a media loop dropped before they reached a session
    /// (`voxgate_dropped_datagrams_total`, every reason).
    pub loop_datagrams: Option<u64>,
    /// The transceiver's failed sends (`voxgate_send_errors_total`).
    pub send_errors: Option<u64>,
    /// UDP datagrams the kernel dropped because a socket's receive buffer was full,
    /// machine-wide (`RcvbufErrors` of `/proc/net/snmp` and `snmp6`): a loop that fell behind
    /// its socket, or a client that fell behind its own.
    pub kernel_rcvbuf: Option<u64>,
}

/// Everything a run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadResult {
    pub target: String,
    pub sessions_requested: usize,
    pub arrival_rate: f64,
    pub seed: u64,
    pub audio_mode: String,
    pub backend_behaviour: String,
    pub sessions_signaled: usize,
    pub signaling_errors: usize,
    pub first_signaling_error: Option<String>,
    pub sessions_connected_window_start: usize,
    pub sessions_connected_window_end: usize,
    pub sessions_failed: usize,
    /// The ramp hit its deadline (server overloaded): the window measured fewer sessions.
    pub ramp_truncated: bool,
    /// Sessions whose signaling finished after the ramp was cut (not measured).
    pub sessions_abandoned: usize,
    pub ramp_secs: f64,
    pub window_secs: f64,
    pub setup: SetupLatency,
    pub media_latency_us: Summary,
    pub media_latency_cdf: Vec<(f64, f64)>,
    /// Fraction of media-latency samples below zero (the transceiver's arrival stamp ran
    /// ahead of the backend's clock: a stamp error, not time travel).
    pub media_latency_negative_fraction: f64,
    /// Each sample minus its session's fastest sample, in µs: the delay a frame picked up
    /// above the best case of its own session. Immune to a per-session clock offset.
    pub media_delay_variation_us: Summary,
    pub server: Option<ServerUsage>,
    /// Datagrams the clients handed to their sockets / received, in the window.
    pub window_datagrams_sent: u64,
    pub window_datagrams_received: u64,
    /// Uplink RTP packets sent and downlink RTP packets received by clients in the window.
    pub window_audio_sent: u64,
    pub window_audio_received: u64,
    pub loss: LossSummary,
    /// The uplink was measured at a backend (false for Janus: no backend sees it).
    pub uplink_loss_measured: bool,
    pub backend_errors: u64,
    /// TCP_NODELAY of each of the server's accepted gRPC sockets, as read from the server
    /// process once the backend connected (empty when not inspected).
    pub server_grpc_nodelay: Vec<bool>,
    pub backend_downlink_sent: u64,
    pub backend_downlink_dropped: u64,
    /// Uplink frames the load generator skipped because it woke late (it was overloaded).
    pub loadgen_frames_skipped: u64,
    pub loadgen_send_errors: u64,
    pub loadgen_cpu_secs_window: f64,
    /// Cores the server and the load generator used during the ramp (setup under load).
    pub server_cores_ramp: f64,
    pub loadgen_cores_ramp: f64,
    pub progress: Vec<ProgressSample>,
    /// Socket arrival → PCM frame handed to the gRPC stream, measured inside the transceiver
    /// (its `voxgate_bridge_uplink_handoff_seconds` histogram, window deltas; bucket
    /// estimates). `None` when no metrics URL was given or the metric was missing.
    pub transceiver_handoff: Option<crate::prom_hist::HandoffLatency>,
    /// Times the transceiver's media loops woke from `poll` in the window (its
    /// `voxgate_loop_wakeups_total`); `None` without a metrics URL.
    pub server_loop_wakeups_window: Option<u64>,
    /// Share of the server's cores' time in the window that the hypervisor gave to someone
    /// else ("steal" in `/proc/stat`, over the cores the server may run on): a wakeup of the
    /// server that came late because its vCPU was not running. `None` where it cannot be read.
    pub server_steal_fraction: Option<f64>,
    /// Drops counted during the window; `None` without a metrics URL.
    pub window_drops: Option<WindowDrops>,
    /// The transceiver's own time to answer each offer of the run, validated body → answer
    /// (`voxgate_offer_seconds{stage="answer"}`; bucket estimates). Beside the client's
    /// POST → answer it tells server time from client and network queueing.
    pub server_offer_answer: Option<crate::prom_hist::HandoffLatency>,
}
