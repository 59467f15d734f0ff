//! Prometheus metrics of the transceiver, and the plain counters media loops keep.
//!
//! Media loops never touch a metric per packet: each loop counts in plain integers
//! ([`LoopCounters`], with each session's [`BridgeCounters`] and [`HandoffHistogram`] summed
//! in) and publishes the deltas into its pre-resolved metric handles ([`LoopMetrics`]) once per
//! wakeup batch. Label lookups happen once, at start-up. This module depends on nothing else of
//! the crate, so the media path, the control plane and the backend side all count into it.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::ValueEnum;

use crate::media::thread_priority::LoopPriority;

/// A histogram the loop fills in bulk: it counts locally and adds whole bucket deltas at
/// publish time, so observing a frame costs no atomic operation.
#[derive(Debug, Clone, Default)]
pub struct BulkHistogram {
    inner: Arc<BulkInner>,
}

#[derive(Debug, Default)]
struct BulkInner {
    buckets: [AtomicU64; HANDOFF_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl BulkHistogram {
    fn add(&self, h: &HandoffHistogram) {
        if h.count == 0 {
            return;
        }
        for (a, b) in self.inner.buckets.iter().zip(h.buckets.iter()) {
            a.fetch_add(*b, Ordering::Relaxed);
        }
        self.inner.sum_us.fetch_add(h.sum_us, Ordering::Relaxed);
        self.inner.count.fetch_add(h.count, Ordering::Relaxed);
    }
}

impl TypedMetric for BulkHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for BulkHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = HANDOFF_BUCKETS_US
            .iter()
            .map(|us| *us as f64 / 1e6)
            .chain(std::iter::once(f64::MAX)) // the encoder writes f64::MAX as le="+Inf"
            .zip(self.inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            self.inner.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            self.inner.count.load(Ordering::Relaxed),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A session's audio-bridge counts, kept by its bridge and summed by its loop.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub struct BridgeCounters {
    pub uplink_frames: u64,
    pub uplink_concealed: u64,
    pub uplink_dropped: u64,
    pub downlink_frames: u64,
    /// Of those, frames the PCM encoder made (one per talking PCM session per 20 ms).
    pub pcm_frames_encoded: u64,
    pub downlink_cleared: u64,
    pub tap_dropped: u64,
    /// Backend Opus packets too large for one frame (passthrough), dropped.
    pub downlink_oversize: u64,
    /// Backend audio of the other mode (Opus to a PCM owner or PCM to a passthrough one).
    pub downlink_wrong_mode: u64,
    /// Ticks at which the downlink queue held its 30 s bound, leaving backend messages in
    /// the channel (gRPC flow control then pushes back on the backend).
    pub downlink_full_ticks: u64,
    /// Uplink audio packets and data messages held while no backend owned the session, for
    /// the owner that attaches next.
    pub uplink_held: u64,
    /// Of those, the ones the hold had no room for (older audio past a second, data past its
    /// count or byte bound).
    pub uplink_held_dropped: u64,
}

impl BridgeCounters {
    /// `self - earlier`, field by field (counters only grow).
    pub fn since(&self, earlier: &BridgeCounters) -> BridgeCounters {
        BridgeCounters {
            uplink_frames: self.uplink_frames - earlier.uplink_frames,
            uplink_concealed: self.uplink_concealed - earlier.uplink_concealed,
            uplink_dropped: self.uplink_dropped - earlier.uplink_dropped,
            downlink_frames: self.downlink_frames - earlier.downlink_frames,
            pcm_frames_encoded: self.pcm_frames_encoded - earlier.pcm_frames_encoded,
            downlink_cleared: self.downlink_cleared - earlier.downlink_cleared,
            tap_dropped: self.tap_dropped - earlier.tap_dropped,
            downlink_oversize: self.downlink_oversize - earlier.downlink_oversize,
            downlink_wrong_mode: self.downlink_wrong_mode - earlier.downlink_wrong_mode,
            downlink_full_ticks: self.downlink_full_ticks - earlier.downlink_full_ticks,
            uplink_held: self.uplink_held - earlier.uplink_held,
            uplink_held_dropped: self.uplink_held_dropped - earlier.uplink_held_dropped,
        }
    }

    pub fn add(&mut self, d: &BridgeCounters) {
        self.uplink_frames += d.uplink_frames;
        self.uplink_concealed += d.uplink_concealed;
        self.uplink_dropped += d.uplink_dropped;
        self.downlink_frames += d.downlink_frames;
        self.pcm_frames_encoded += d.pcm_frames_encoded;
        self.downlink_cleared += d.downlink_cleared;
        self.tap_dropped += d.tap_dropped;
        self.downlink_oversize += d.downlink_oversize;
        self.downlink_wrong_mode += d.downlink_wrong_mode;
        self.downlink_full_ticks += d.downlink_full_ticks;
        self.uplink_held += d.uplink_held;
        self.uplink_held_dropped += d.uplink_held_dropped;
    }
}

/// Upper bounds (µs) of the hand-off latency buckets: socket arrival → frame in the backend
/// streams' queues. The last bucket is +Inf. Quarter-millisecond steps around the 1 ms target,
/// so a percentile estimated inside a bucket is off by at most 0.25 ms there.
pub const HANDOFF_BUCKETS_US: [u64; 14] = [
    25, 50, 100, 250, 500, 750, 1_000, 1_250, 1_500, 2_000, 2_500, 5_000, 10_000, 25_000,
];

/// A histogram counted in plain integers on the loop, published in bulk (no atomics per frame).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandoffHistogram {
    pub buckets: [u64; HANDOFF_BUCKETS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl HandoffHistogram {
    pub fn observe(&mut self, us: u64) {
        let i = HANDOFF_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(HANDOFF_BUCKETS_US.len());
        self.buckets[i] += 1;
        self.sum_us += us;
        self.count += 1;
    }

    pub fn add(&mut self, other: &HandoffHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.sum_us += other.sum_us;
        self.count += other.count;
    }
}

/// Why a media loop closed one of its direct ICE-TCP connections (or refused it at accept);
/// the `reason` label of `voxgate_tcp_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpCloseReason {
    /// A first frame that is not a STUN binding request with a USERNAME, or an empty frame.
    Garbage,
    /// A first frame naming no session of this loop.
    UnknownUfrag,
    /// A first binding request that str0m did not answer (bad integrity, or address held).
    Unauthenticated,
    /// A length prefix above the frame limit.
    Oversize,
    FirstFrameTimeout,
    IdleTimeout,
    /// Refused at accept: the client IP (IPv6 /64) has its share of connections.
    PerIpCap,
    /// Refused at accept: the loop has its share of connections.
    GlobalCap,
    PeerClosed,
    IoError,
}

impl TcpCloseReason {
    pub const ALL: [TcpCloseReason; 10] = [
        TcpCloseReason::Garbage,
        TcpCloseReason::UnknownUfrag,
        TcpCloseReason::Unauthenticated,
        TcpCloseReason::Oversize,
        TcpCloseReason::FirstFrameTimeout,
        TcpCloseReason::IdleTimeout,
        TcpCloseReason::PerIpCap,
        TcpCloseReason::GlobalCap,
        TcpCloseReason::PeerClosed,
        TcpCloseReason::IoError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TcpCloseReason::Garbage => "garbage",
            TcpCloseReason::UnknownUfrag => "unknown_ufrag",
            TcpCloseReason::Unauthenticated => "unauthenticated",
            TcpCloseReason::Oversize => "oversize",
            TcpCloseReason::FirstFrameTimeout => "first_frame_timeout",
            TcpCloseReason::IdleTimeout => "idle_timeout",
            TcpCloseReason::PerIpCap => "per_ip_cap",
            TcpCloseReason::GlobalCap => "global_cap",
            TcpCloseReason::PeerClosed => "peer_closed",
            TcpCloseReason::IoError => "io_error",
        }
    }
}

/// A loop's direct ICE-TCP counts, plain integers published with the rest.
#[derive(Debug, Default, Clone)]
pub struct TcpCounters {
    pub accepted: u64,
    pub closed: [u64; TcpCloseReason::ALL.len()],
    pub frames_in: u64,
    pub frames_out: u64,
    /// Frames dropped from full per-connection write queues (a client that stops reading).
    pub write_dropped: u64,
}

impl TcpCounters {
    pub fn close(&mut self, reason: TcpCloseReason) {
        self.closed[reason as usize] += 1;
    }
}

/// Why a backend message on a `Multiplex` stream was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiplexDrop {
    /// For a channel never attached, or already closed.
    UnknownChannel,
    /// Past the messages that may wait for a channel's attach.
    AttachPending,
    /// The channel's downlink queue had no room (audio: none beyond the control reserve).
    DownlinkFull,
}

impl MultiplexDrop {
    fn as_str(self) -> &'static str {
        match self {
            MultiplexDrop::UnknownChannel => "unknown_channel",
            MultiplexDrop::AttachPending => "attach_pending",
            MultiplexDrop::DownlinkFull => "downlink_full",
        }
    }
}

/// Why a media loop dropped a datagram without handing it to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// STUN binding request whose server ufrag names no session on this loop.
    StunUnknownUfrag,
    /// STUN-looking datagram that is not a well-formed binding request with a USERNAME.
    StunMalformed,
    /// Non-STUN datagram from an address no session has authenticated.
    UnknownSource,
    /// Datagram of a known session that str0m could not parse or rejected.
    Rejected,
    /// Relay-framed datagram with a bad header.
    BadRelayHeader,
    /// Datagram larger than the receive buffer (truncated by the kernel).
    Oversize,
    /// Relay-framed datagram from a source outside `--relays`.
    RelayNotAllowed,
    /// Authenticated check from an address another session holds within its consent window:
    /// str0m's answer is withheld and the address stays where it is.
    AddrHeld,
}

impl DropReason {
    pub const ALL: [DropReason; 8] = [
        DropReason::StunUnknownUfrag,
        DropReason::StunMalformed,
        DropReason::UnknownSource,
        DropReason::Rejected,
        DropReason::BadRelayHeader,
        DropReason::Oversize,
        DropReason::RelayNotAllowed,
        DropReason::AddrHeld,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::StunUnknownUfrag => "stun_unknown_ufrag",
            DropReason::StunMalformed => "stun_malformed",
            DropReason::UnknownSource => "unknown_source",
            DropReason::Rejected => "rejected",
            DropReason::BadRelayHeader => "bad_relay_header",
            DropReason::Oversize => "oversize",
            DropReason::RelayNotAllowed => "relay_not_allowed",
            DropReason::AddrHeld => "addr_held",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopLabel {
    r#loop: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopClassLabel {
    r#loop: String,
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopReasonLabel {
    r#loop: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
}

/// A stage of answering an offer, timed on the server (`voxgate_offer_seconds{stage}`), so a
/// slow setup can be told apart from a slow client or network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferStage {
    /// The `Rtc` built and the offer accepted.
    Accept,
    /// The session handed to its media loop until the loop has inserted it.
    Insert,
    /// The whole offer, from the validated body to the answer (includes both above).
    Answer,
}

impl OfferStage {
    fn as_str(self) -> &'static str {
        match self {
            OfferStage::Accept => "accept",
            OfferStage::Insert => "insert",
            OfferStage::Answer => "answer",
        }
    }
}

/// Bucket bounds (s) of `voxgate_offer_seconds`: 0.25 ms to 246 ms, 1.5 × apart (fine enough
/// for a p99 against the 30 ms setup target).
fn offer_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_25, 1.5, 18,
    ))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IngressLabel {
    ingress: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeaderLabel {
    header: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodecLabel {
    rate: String,
    application: String,
    complexity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// The process-wide registry plus the families shared by control plane and loops.
pub struct Metrics {
    registry: Registry,
    datagrams_in: Family<LoopLabel, Counter>,
    bytes_in: Family<LoopLabel, Counter>,
    datagrams_out: Family<LoopLabel, Counter>,
    bytes_out: Family<LoopLabel, Counter>,
    send_errors: Family<LoopLabel, Counter>,
    drops: Family<LoopReasonLabel, Counter>,
    sessions_active: Family<LoopLabel, Gauge>,
    loop_busy: Family<LoopLabel, Gauge<f64, AtomicU64>>,
    process_cpu: Gauge<f64, AtomicU64>,
    usable_cores: Gauge<f64, AtomicU64>,
    loop_scheduling: Family<LoopClassLabel, Gauge>,
    sessions_refused: Family<ReasonLabel, Counter>,
    wakeups: Family<LoopLabel, Counter>,
    rests: Family<LoopLabel, Counter>,
    read_holds: Family<LoopLabel, Counter>,
    sessions_ended: Family<ReasonLabel, Counter>,
    signaling_responses: Family<StatusLabel, Counter>,
    sessions_created: Counter,
    offer_seconds: Family<StageLabel, Histogram, fn() -> Histogram>,
    uplink_frames: Family<LoopLabel, Counter>,
    uplink_concealed: Family<LoopLabel, Counter>,
    uplink_dropped: Family<LoopLabel, Counter>,
    downlink_frames: Family<LoopLabel, Counter>,
    tap_dropped: Family<LoopLabel, Counter>,
    downlink_dropped: Family<LoopReasonLabel, Counter>,
    downlink_full_ticks: Family<LoopLabel, Counter>,
    uplink_held: Family<LoopLabel, Counter>,
    uplink_held_dropped: Family<LoopLabel, Counter>,
    bridge_refused: Family<LoopReasonLabel, Counter>,
    unrouted: Family<LoopLabel, Counter>,
    handoff: Family<LoopLabel, BulkHistogram>,
    uplink_queue: Histogram,
    tcp_accepted: Family<LoopLabel, Counter>,
    tcp_closed: Family<LoopReasonLabel, Counter>,
    tcp_frames_in: Family<LoopLabel, Counter>,
    tcp_frames_out: Family<LoopLabel, Counter>,
    tcp_write_dropped: Family<LoopLabel, Counter>,
    tcp_connections: Family<LoopLabel, Gauge>,
    backend_workers: Gauge,
    dispatch_queued: Gauge,
    dispatches: Counter,
    /// `Multiplex` streams: open streams, uplink batches and their messages, drops by reason.
    multiplex_streams: Gauge,
    multiplex_batches: Counter,
    multiplex_messages: Counter,
    multiplex_dropped: Family<ReasonLabel, Counter>,
    /// Control-plane hardening (issue 11): admission slots, refusals by reason, backends.
    sessions_reserved: Gauge,
    signaling_rejected: Family<ReasonLabel, Counter>,
    backend_stalls: Counter,
    /// Admission's estimate of a talking PCM session (see `control::codec_cost`).
    codec_cost: Family<CodecLabel, Gauge<f64, AtomicU64>>,
    talking_counted: Counter,
    /// Every loop's PCM frames encoded (admission counts talking sessions from it), and what
    /// admission made of them (see `control::talk_crest`).
    pcm_frames_encoded: Counter,
    pcm_talking: Gauge<f64, AtomicU64>,
    pcm_talking_share: Gauge<f64, AtomicU64>,
    talk_crest: Gauge<f64, AtomicU64>,
    /// Ingress steering (issue 13): choices, and request headers not believed.
    ingress_selected: Family<IngressLabel, Counter>,
    ingress_header_unmatched: Counter,
    untrusted_header: Family<HeaderLabel, Counter>,
    forwarded_for_malformed: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("voxgate");
        let m = Metrics {
            datagrams_in: Family::default(),
            bytes_in: Family::default(),
            datagrams_out: Family::default(),
            bytes_out: Family::default(),
            send_errors: Family::default(),
            drops: Family::default(),
            sessions_active: Family::default(),
            loop_busy: Family::default(),
            process_cpu: Gauge::default(),
            usable_cores: Gauge::default(),
            loop_scheduling: Family::default(),
            sessions_refused: Family::default(),
            wakeups: Family::default(),
            rests: Family::default(),
            read_holds: Family::default(),
            sessions_ended: Family::default(),
            signaling_responses: Family::default(),
            sessions_created: Counter::default(),
            offer_seconds: Family::new_with_constructor(offer_histogram),
            uplink_frames: Family::default(),
            uplink_concealed: Family::default(),
            uplink_dropped: Family::default(),
            downlink_frames: Family::default(),
            tap_dropped: Family::default(),
            downlink_dropped: Family::default(),
            downlink_full_ticks: Family::default(),
            uplink_held: Family::default(),
            uplink_held_dropped: Family::default(),
            bridge_refused: Family::default(),
            unrouted: Family::default(),
            handoff: Family::default(),
            uplink_queue: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.000_25, 2.0, 14),
            ),
            tcp_accepted: Family::default(),
            tcp_closed: Family::default(),
            tcp_frames_in: Family::default(),
            tcp_frames_out: Family::default(),
            tcp_write_dropped: Family::default(),
            tcp_connections: Family::default(),
            backend_workers: Gauge::default(),
            dispatch_queued: Gauge::default(),
            sessions_reserved: Gauge::default(),
            signaling_rejected: Family::default(),
            backend_stalls: Counter::default(),
            codec_cost: Family::default(),
            talking_counted: Counter::default(),
            pcm_frames_encoded: Counter::default(),
            pcm_talking: Gauge::default(),
            pcm_talking_share: Gauge::default(),
            talk_crest: Gauge::default(),
            ingress_selected: Family::default(),
            ingress_header_unmatched: Counter::default(),
            untrusted_header: Family::default(),
            forwarded_for_malformed: Counter::default(),
            dispatches: Counter::default(),
            multiplex_streams: Gauge::default(),
            multiplex_batches: Counter::default(),
            multiplex_messages: Counter::default(),
            multiplex_dropped: Family::default(),
            registry: Registry::default(),
        };
        // Registration order is the exposition order.
        m.register_loop_and_session_metrics(&mut registry);
        m.register_bridge_metrics(&mut registry);
        m.register_dispatch_metrics(&mut registry);
        m.register_hardening_metrics(&mut registry);
        m.register_tcp_metrics(&mut registry);
        m.register_ingress_metrics(&mut registry);
        Metrics { registry, ..m }
    }

    /// Loop I/O, drops, busy ratio, and session admission and lifecycle.
    fn register_loop_and_session_metrics(&self, registry: &mut Registry) {
        registry.register(
            "datagrams_in",
            "UDP datagrams received by a media loop",
            self.datagrams_in.clone(),
        );
        registry.register(
            "bytes_in",
            "UDP bytes received by a media loop",
            self.bytes_in.clone(),
        );
        registry.register(
            "datagrams_out",
            "UDP datagrams sent by a media loop",
            self.datagrams_out.clone(),
        );
        registry.register(
            "bytes_out",
            "UDP bytes sent by a media loop",
            self.bytes_out.clone(),
        );
        registry.register(
            "send_errors",
            "UDP sends that failed (datagram lost)",
            self.send_errors.clone(),
        );
        registry.register(
            "dropped_datagrams",
            "Datagrams dropped by a media loop before reaching a session, by reason",
            self.drops.clone(),
        );
        registry.register(
            "sessions_active",
            "Sessions owned by a media loop",
            self.sessions_active.clone(),
        );
        registry.register(
            "loop_busy_ratio",
            "Share of wall time a media loop spent working (not waiting in poll), last 0.5 s window",
            self.loop_busy.clone(),
        );
        registry.register(
            "process_cpu_ratio",
            "CPU time of the whole process (every thread) over the last 1 s, as a share of its usable cores",
            self.process_cpu.clone(),
        );
        registry.register(
            "usable_cores",
            "Cores the process may use: its CPU affinity, capped by a cgroup CPU quota",
            self.usable_cores.clone(),
        );
        registry.register(
            "loop_scheduling",
            "1 for the scheduling class a media loop's thread runs at (rt, high, normal; see --loop-priority)",
            self.loop_scheduling.clone(),
        );
        registry.register(
            "sessions_refused",
            "New sessions refused (503 or 429), by reason",
            self.sessions_refused.clone(),
        );
        registry.register(
            "loop_wakeups",
            "Times a media loop woke from poll",
            self.wakeups.clone(),
        );
        registry.register(
            "loop_rests",
            "0.2 ms rests a saturated loop took after 2 ms without waiting, so other work on its core never starves (the kernel would take 50 ms at once)",
            self.rests.clone(),
        );
        registry.register(
            "loop_read_holds",
            "Times a media loop under steady traffic slept out its read window (--read-window-us) instead of waking per datagram",
            self.read_holds.clone(),
        );
        registry.register(
            "sessions_ended",
            "Sessions ended, by reason",
            self.sessions_ended.clone(),
        );
        registry.register(
            "unrouted_transmits",
            "Datagrams a session produced for an address it has no authenticated path to (not sent)",
            self.unrouted.clone(),
        );
        registry.register(
            "signaling_responses",
            "Signaling responses, by HTTP status",
            self.signaling_responses.clone(),
        );
        registry.register(
            "sessions_created",
            "Sessions created through signaling",
            self.sessions_created.clone(),
        );
        registry.register(
            "offer_seconds",
            "Server time to answer an offer, by stage (accept: Rtc built and offer accepted; insert: waiting for the media loop; answer: all of it)",
            self.offer_seconds.clone(),
        );
    }

    /// The audio bridge: uplink frames, downlink frames, taps, hand-off latency.
    fn register_bridge_metrics(&self, registry: &mut Registry) {
        registry.register(
            "bridge_uplink_frames",
            "PCM frames handed to backend streams (concealed ones included)",
            self.uplink_frames.clone(),
        );
        registry.register(
            "bridge_uplink_concealed",
            "Uplink frames synthesized by FEC or packet-loss concealment",
            self.uplink_concealed.clone(),
        );
        registry.register(
            "bridge_uplink_dropped",
            "Uplink messages dropped because a backend stream's queue was full",
            self.uplink_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_frames",
            "Opus frames sent to callers from backend audio",
            self.downlink_frames.clone(),
        );
        registry.register(
            "bridge_tap_dropped",
            "Uplink messages dropped because a tap's queue was full",
            self.tap_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_dropped",
            "Backend downlink audio dropped, by reason (oversize Opus packet, wrong audio mode)",
            self.downlink_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_full_ticks",
            "20 ms ticks at which a session's downlink queue held its 30 s bound (the backend is back-pressured)",
            self.downlink_full_ticks.clone(),
        );
        registry.register(
            "bridge_uplink_held",
            "Uplink audio packets and data messages held while no backend owned the session, for the next owner",
            self.uplink_held.clone(),
        );
        registry.register(
            "bridge_uplink_held_dropped",
            "Held uplink items dropped because the hold was full (a second of audio, 32 data messages, 64 KiB)",
            self.uplink_held_dropped.clone(),
        );
        registry.register(
            "bridge_refused",
            "Backend requests a media loop refused, by reason (too_many_taps)",
            self.bridge_refused.clone(),
        );
        registry.register(
            "bridge_uplink_handoff_seconds",
            "Socket arrival of a caller's Opus packet to its PCM frame queued for the backends",
            self.handoff.clone(),
        );
        registry.register(
            "bridge_uplink_queue_seconds",
            "From an uplink datagram's arrival to its frame leaving the uplink queue for the owner's gRPC stream: the loop's hand-off plus the wait for the gRPC side (0.25 ms to 2 s)",
            self.uplink_queue.clone(),
        );
    }

    /// Backend workers and the dispatch queue.
    fn register_dispatch_metrics(&self, registry: &mut Registry) {
        registry.register(
            "backend_workers",
            "Backend workers subscribed over gRPC",
            self.backend_workers.clone(),
        );
        registry.register(
            "dispatch_queued",
            "Sessions waiting for a backend with room",
            self.dispatch_queued.clone(),
        );
        registry.register(
            "dispatches",
            "Sessions offered to backend workers",
            self.dispatches.clone(),
        );
        registry.register(
            "multiplex_streams",
            "Open Multiplex streams (many sessions on one gRPC stream)",
            self.multiplex_streams.clone(),
        );
        registry.register(
            "multiplex_uplink_batches",
            "Uplink messages of Multiplex streams (each carries many channels' messages)",
            self.multiplex_batches.clone(),
        );
        registry.register(
            "multiplex_uplink_messages",
            "Channel messages carried in Multiplex uplink batches",
            self.multiplex_messages.clone(),
        );
        registry.register(
            "multiplex_dropped",
            "Backend messages on Multiplex streams dropped, by reason (unknown_channel, attach_pending, downlink_full)",
            self.multiplex_dropped.clone(),
        );
    }

    /// Direct ICE-TCP connections of the media loops.
    fn register_tcp_metrics(&self, registry: &mut Registry) {
        registry.register(
            "tcp_accepted",
            "ICE-TCP connections a media loop accepted",
            self.tcp_accepted.clone(),
        );
        registry.register(
            "tcp_closed",
            "ICE-TCP connections a media loop closed or refused, by reason",
            self.tcp_closed.clone(),
        );
        registry.register(
            "tcp_frames_in",
            "RFC 4571 frames received on a media loop's ICE-TCP connections",
            self.tcp_frames_in.clone(),
        );
        registry.register(
            "tcp_frames_out",
            "RFC 4571 frames queued or written on a media loop's ICE-TCP connections",
            self.tcp_frames_out.clone(),
        );
        registry.register(
            "tcp_write_dropped",
            "Frames dropped from full ICE-TCP write queues (a client that stops reading)",
            self.tcp_write_dropped.clone(),
        );
        registry.register(
            "tcp_connections",
            "ICE-TCP connections open on a media loop",
            self.tcp_connections.clone(),
        );
    }

    /// Admission slots, refused requests and stalled backends.
    fn register_hardening_metrics(&self, registry: &mut Registry) {
        registry.register(
            "sessions_reserved",
            "Admission slots held: live sessions plus POSTs being answered",
            self.sessions_reserved.clone(),
        );
        registry.register(
            "signaling_rejected",
            "Signaling requests refused before admission (auth, rate limit, slow client), by reason",
            self.signaling_rejected.clone(),
        );
        registry.register(
            "backend_stalls",
            "Backend streams dropped because their uplink queue stayed full past --backend-stall-secs",
            self.backend_stalls.clone(),
        );
        registry.register(
            "codec_cpu_seconds",
            "CPU seconds this process measured for one second of a PCM session's decoding and encoding, by backend rate and encoder setting (admission counts a talking session at twice this)",
            self.codec_cost.clone(),
        );
        registry.register(
            "admission_talking_sessions",
            "PCM sessions admission counted at their encoder's cost when their backend started talking",
            self.talking_counted.clone(),
        );
        registry.register(
            "bridge_pcm_frames_encoded",
            "Downlink frames the PCM encoders made, all loops (one per talking PCM session per 20 ms)",
            self.pcm_frames_encoded.clone(),
        );
        registry.register(
            "pcm_talking_sessions",
            "PCM sessions whose backend talked at once, averaged over the last second",
            self.pcm_talking.clone(),
        );
        registry.register(
            "pcm_talking_share",
            "Long-run share (10 s average) of the PCM sessions that have talked that talk at once",
            self.pcm_talking_share.clone(),
        );
        registry.register(
            "admission_talk_crest_ratio",
            "Share of the usable cores admission adds to the CPU window for the talking PCM sessions' crest (mean plus one sigma) beyond those talking now",
            self.talk_crest.clone(),
        );
    }

    /// Ingress choices and the proxy headers that were not believed.
    fn register_ingress_metrics(&self, registry: &mut Registry) {
        registry.register(
            "ingress_selected",
            "New sessions by the relay ingress their answer advertises, and why it was chosen (header, cidr, default)",
            self.ingress_selected.clone(),
        );
        registry.register(
            "ingress_header_unmatched",
            "Trusted ingress-header values that named no ingress (the request fell through to the CIDR rules)",
            self.ingress_header_unmatched.clone(),
        );
        registry.register(
            "untrusted_header",
            "Proxy headers (X-Forwarded-For, the ingress header) ignored because the peer is not in --trusted-proxies",
            self.untrusted_header.clone(),
        );
        registry.register(
            "forwarded_for_malformed",
            "X-Forwarded-For from a trusted proxy that did not parse (the peer address was used)",
            self.forwarded_for_malformed.clone(),
        );
    }

    /// A new session was steered to `ingress` for `reason`.
    pub fn ingress_selected(&self, ingress: &str, reason: &str) {
        self.ingress_selected
            .get_or_create(&IngressLabel {
                ingress: ingress.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn ingress_header_unmatched(&self) {
        self.ingress_header_unmatched.inc();
    }

    /// `header` is a configured header name (lower case), never a client-chosen string.
    pub fn untrusted_header(&self, header: &str) {
        self.untrusted_header
            .get_or_create(&HeaderLabel {
                header: header.to_string(),
            })
            .inc();
    }

    pub fn forwarded_for_malformed(&self) {
        self.forwarded_for_malformed.inc();
    }

    /// A signaling request refused before admission; `reason` is a fixed word.
    pub fn signaling_rejected(&self, reason: &str) {
        self.signaling_rejected
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn backend_stalled(&self) {
        self.backend_stalls.inc();
    }

    /// A codec cost admission measured (CPU seconds per session-second).
    pub fn codec_cost(&self, key: crate::media::audio_bridge::StartedTalking, seconds: f64) {
        self.codec_cost
            .get_or_create(&CodecLabel {
                rate: key.rate.to_string(),
                application: format!("{:?}", key.encoder.application).to_lowercase(),
                complexity: key.encoder.complexity.to_string(),
            })
            .set(seconds);
    }

    pub fn talking_counted(&self) {
        self.talking_counted.inc();
    }

    /// PCM frames every loop's encoders made so far.
    pub fn pcm_frames_encoded(&self) -> u64 {
        self.pcm_frames_encoded.get()
    }

    /// What admission made of its talking sessions at its last sample.
    pub fn talk_crest(&self, talking: f64, share: f64, headroom: f64) {
        self.pcm_talking.set(talking);
        self.pcm_talking_share.set(share);
        self.talk_crest.set(headroom);
    }

    /// The admission-slot gauge, for the registry to keep exact under its lock.
    pub fn sessions_reserved_gauge(&self) -> Gauge {
        self.sessions_reserved.clone()
    }

    /// Handles for media loop `index`, resolved once so the loop never hashes labels.
    pub fn loop_metrics(&self, index: usize) -> LoopMetrics {
        let l = LoopLabel {
            r#loop: index.to_string(),
        };
        let drops = DropReason::ALL.map(|r| {
            self.drops
                .get_or_create(&LoopReasonLabel {
                    r#loop: index.to_string(),
                    reason: r.as_str().to_string(),
                })
                .clone()
        });
        let with_reason = |family: &Family<LoopReasonLabel, Counter>, reason: &str| {
            family
                .get_or_create(&LoopReasonLabel {
                    r#loop: index.to_string(),
                    reason: reason.to_string(),
                })
                .clone()
        };
        LoopMetrics {
            downlink_oversize: with_reason(&self.downlink_dropped, "oversize"),
            downlink_wrong_mode: with_reason(&self.downlink_dropped, "wrong_mode"),
            downlink_full_ticks: self.downlink_full_ticks.get_or_create(&l).clone(),
            uplink_held: self.uplink_held.get_or_create(&l).clone(),
            uplink_held_dropped: self.uplink_held_dropped.get_or_create(&l).clone(),
            taps_refused: with_reason(&self.bridge_refused, "too_many_taps"),
            unrouted: self.unrouted.get_or_create(&l).clone(),
            datagrams_in: self.datagrams_in.get_or_create(&l).clone(),
            bytes_in: self.bytes_in.get_or_create(&l).clone(),
            datagrams_out: self.datagrams_out.get_or_create(&l).clone(),
            bytes_out: self.bytes_out.get_or_create(&l).clone(),
            send_errors: self.send_errors.get_or_create(&l).clone(),
            wakeups: self.wakeups.get_or_create(&l).clone(),
            rests: self.rests.get_or_create(&l).clone(),
            read_holds: self.read_holds.get_or_create(&l).clone(),
            sessions_active: self.sessions_active.get_or_create(&l).clone(),
            busy: self.loop_busy.get_or_create(&l).clone(),
            scheduling: LoopPriority::value_variants()
                .iter()
                .map(|p| {
                    let label = LoopClassLabel {
                        r#loop: index.to_string(),
                        class: p.as_str().to_string(),
                    };
                    (*p, self.loop_scheduling.get_or_create(&label).clone())
                })
                .collect(),
            drops,
            uplink_frames: self.uplink_frames.get_or_create(&l).clone(),
            uplink_concealed: self.uplink_concealed.get_or_create(&l).clone(),
            uplink_dropped: self.uplink_dropped.get_or_create(&l).clone(),
            downlink_frames: self.downlink_frames.get_or_create(&l).clone(),
            pcm_frames_encoded: self.pcm_frames_encoded.clone(),
            tap_dropped: self.tap_dropped.get_or_create(&l).clone(),
            handoff: self.handoff.get_or_create(&l).clone(),
            tcp_closed: TcpCloseReason::ALL.map(|r| with_reason(&self.tcp_closed, r.as_str())),
            tcp_accepted: self.tcp_accepted.get_or_create(&l).clone(),
            tcp_frames_in: self.tcp_frames_in.get_or_create(&l).clone(),
            tcp_frames_out: self.tcp_frames_out.get_or_create(&l).clone(),
            tcp_write_dropped: self.tcp_write_dropped.get_or_create(&l).clone(),
            tcp_connections: self.tcp_connections.get_or_create(&l).clone(),
        }
    }

    /// A POST answered 503; `reason` is one of a few fixed words (capacity, overloaded, ...).
    pub fn session_refused(&self, reason: &str) {
        self.sessions_refused
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn session_created(&self) {
        self.sessions_created.inc();
    }

    pub fn offer_stage(&self, stage: OfferStage, took: std::time::Duration) {
        self.offer_seconds
            .get_or_create(&StageLabel {
                stage: stage.as_str().to_string(),
            })
            .observe(took.as_secs_f64());
    }

    pub fn session_ended(&self, reason: &str) {
        self.sessions_ended
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// The dispatcher's state after each change.
    /// The histogram owners' uplink streams observe each frame's wait in (see
    /// `backend::bridge_service`).
    pub fn uplink_queue_histogram(&self) -> Histogram {
        self.uplink_queue.clone()
    }

    pub fn process_cpu(&self, ratio: f64) {
        self.process_cpu.set(ratio);
    }

    pub fn usable_cores(&self, cores: f64) {
        self.usable_cores.set(cores);
    }

    pub fn dispatch_state(&self, workers: usize, queued: usize) {
        self.backend_workers.set(workers as i64);
        self.dispatch_queued.set(queued as i64);
    }

    pub fn dispatched(&self) {
        self.dispatches.inc();
    }

    /// A `Multiplex` stream opened (`+1`) or ended (`-1`).
    pub fn multiplex_streams(&self, delta: i64) {
        self.multiplex_streams.inc_by(delta);
    }

    /// A `Multiplex` uplink message carrying `messages` channel messages went out.
    pub fn multiplex_batch(&self, messages: usize) {
        self.multiplex_batches.inc();
        self.multiplex_messages.inc_by(messages as u64);
    }

    pub fn multiplex_dropped(&self, reason: MultiplexDrop) {
        self.multiplex_dropped
            .get_or_create(&ReasonLabel {
                reason: reason.as_str().to_string(),
            })
            .inc();
    }

    pub fn signaling_response(&self, status: u16) {
        self.signaling_responses
            .get_or_create(&StatusLabel {
                status: status.to_string(),
            })
            .inc();
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Counters a loop increments as plain integers, published as deltas by [`LoopMetrics::publish`].
#[derive(Debug, Default, Clone)]
pub struct LoopCounters {
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub datagrams_out: u64,
    pub bytes_out: u64,
    pub send_errors: u64,
    pub wakeups: u64,
    /// Rests of a saturated loop (see `media::core_share`).
    pub rests: u64,
    /// Read windows slept out under steady traffic (see `media::read_coalescing`).
    pub read_holds: u64,
    pub drops: [u64; DropReason::ALL.len()],
    /// Transmits with no authenticated path to their destination (not sent).
    pub unrouted: u64,
    /// Tap requests refused at `--max-taps`.
    pub taps_refused: u64,
    pub bridge: BridgeCounters,
    pub handoff: HandoffHistogram,
}

impl LoopCounters {
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }
}

/// Adds a pending count to its counter and zeroes it.
fn flush(c: &Counter, v: &mut u64) {
    if *v != 0 {
        c.inc_by(*v);
        *v = 0;
    }
}

/// One media loop's metric handles.
pub struct LoopMetrics {
    datagrams_in: Counter,
    bytes_in: Counter,
    datagrams_out: Counter,
    bytes_out: Counter,
    send_errors: Counter,
    wakeups: Counter,
    rests: Counter,
    read_holds: Counter,
    sessions_active: Gauge,
    busy: Gauge<f64, AtomicU64>,
    scheduling: Vec<(LoopPriority, Gauge)>,
    drops: [Counter; DropReason::ALL.len()],
    uplink_frames: Counter,
    uplink_concealed: Counter,
    uplink_dropped: Counter,
    downlink_frames: Counter,
    /// The process-wide count (no loop label): admission reads the sum.
    pcm_frames_encoded: Counter,
    tap_dropped: Counter,
    downlink_oversize: Counter,
    downlink_wrong_mode: Counter,
    downlink_full_ticks: Counter,
    uplink_held: Counter,
    uplink_held_dropped: Counter,
    taps_refused: Counter,
    unrouted: Counter,
    handoff: BulkHistogram,
    tcp_accepted: Counter,
    tcp_closed: [Counter; TcpCloseReason::ALL.len()],
    tcp_frames_in: Counter,
    tcp_frames_out: Counter,
    tcp_write_dropped: Counter,
    tcp_connections: Gauge,
}

impl LoopMetrics {
    /// The loop's busy ratio of its last window (see `media::busy_meter`).
    pub fn set_busy(&self, ratio: f64) {
        self.busy.set(ratio);
    }

    /// The scheduling class the loop's thread got (see `media::thread_priority`).
    pub fn set_priority(&self, got: LoopPriority) {
        for (class, gauge) in &self.scheduling {
            gauge.set(i64::from(*class == got));
        }
    }

    /// Adds the pending counts to the shared metrics and zeroes them.
    pub fn publish(&self, pending: &mut LoopCounters, sessions_active: usize) {
        flush(&self.datagrams_in, &mut pending.datagrams_in);
        flush(&self.bytes_in, &mut pending.bytes_in);
        flush(&self.datagrams_out, &mut pending.datagrams_out);
        flush(&self.bytes_out, &mut pending.bytes_out);
        flush(&self.send_errors, &mut pending.send_errors);
        flush(&self.wakeups, &mut pending.wakeups);
        flush(&self.rests, &mut pending.rests);
        flush(&self.read_holds, &mut pending.read_holds);
        for (c, v) in self.drops.iter().zip(pending.drops.iter_mut()) {
            flush(c, v);
        }
        let b = &mut pending.bridge;
        flush(&self.uplink_frames, &mut b.uplink_frames);
        flush(&self.uplink_concealed, &mut b.uplink_concealed);
        flush(&self.uplink_dropped, &mut b.uplink_dropped);
        flush(&self.downlink_frames, &mut b.downlink_frames);
        flush(&self.pcm_frames_encoded, &mut b.pcm_frames_encoded);
        flush(&self.tap_dropped, &mut b.tap_dropped);
        flush(&self.downlink_oversize, &mut b.downlink_oversize);
        flush(&self.downlink_wrong_mode, &mut b.downlink_wrong_mode);
        flush(&self.downlink_full_ticks, &mut b.downlink_full_ticks);
        flush(&self.uplink_held, &mut b.uplink_held);
        flush(&self.uplink_held_dropped, &mut b.uplink_held_dropped);
        flush(&self.taps_refused, &mut pending.taps_refused);
        flush(&self.unrouted, &mut pending.unrouted);
        b.downlink_cleared = 0;
        self.handoff.add(&pending.handoff);
        pending.handoff = HandoffHistogram::default();
        self.sessions_active.set(sessions_active as i64);
    }

    /// Adds a loop's pending ICE-TCP counts and zeroes them; sets the open-connection gauge.
    pub fn publish_tcp(&self, t: &mut TcpCounters, open: usize) {
        flush(&self.tcp_accepted, &mut t.accepted);
        for (c, v) in self.tcp_closed.iter().zip(t.closed.iter_mut()) {
            flush(c, v);
        }
        flush(&self.tcp_frames_in, &mut t.frames_in);
        flush(&self.tcp_frames_out, &mut t.frames_out);
        flush(&self.tcp_write_dropped, &mut t.write_dropped);
        self.tcp_connections.set(open as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_loop_counts_appear_in_the_exposition() {
        let m = Metrics::new();
        let lm = m.loop_metrics(1);
        let mut c = LoopCounters {
            datagrams_in: 7,
            ..Default::default()
        };
        c.drop(DropReason::UnknownSource);
        lm.publish(&mut c, 3);
        assert_eq!(c.datagrams_in, 0, "publish zeroes pending counts");
        let text = m.encode();
        assert!(
            text.contains("voxgate_datagrams_in_total{loop=\"1\"} 7"),
            "{text}"
        );
        assert!(text
            .contains("voxgate_dropped_datagrams_total{loop=\"1\",reason=\"unknown_source\"} 1"));
        assert!(text.contains("voxgate_sessions_active{loop=\"1\"} 3"));
    }
}
