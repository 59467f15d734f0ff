//! The transceiver's Prometheus registry: the process-wide families (admission, signaling,
//! dispatch, ingress steering) and the per-loop ones ([`LoopFamilies`]), registered once.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::quality_histograms::QualityHistograms;

use crate::metrics::labels::{
    offer_histogram, CodecKey, CodecLabel, GrpcRefusal, HeaderLabel, IngressLabel, MultiplexDrop,
    OfferStage, OutcomeLabel, ReasonLabel, StageLabel, StatusLabel,
};
use crate::metrics::loop_metrics::{LoopFamilies, LoopMetrics};

/// The process-wide registry plus the families shared by control plane and loops.
pub struct Metrics {
    registry: Registry,
    /// Every family labelled by media loop.
    loops: LoopFamilies,
    process_cpu: Gauge<f64, AtomicU64>,
    usable_cores: Gauge<f64, AtomicU64>,
    sessions_refused: Family<ReasonLabel, Counter>,
    sessions_ended: Family<ReasonLabel, Counter>,
    signaling_responses: Family<StatusLabel, Counter>,
    sessions_created: Counter,
    offer_seconds: Family<StageLabel, Histogram, fn() -> Histogram>,
    uplink_queue: Histogram,
    backend_workers: Gauge,
    dispatch_queued: Gauge,
    dispatches: Counter,
    /// `Multiplex` streams: open streams, uplink batches and their messages, drops by reason.
    multiplex_streams: Gauge,
    multiplex_batches: Counter,
    multiplex_messages: Counter,
    multiplex_dropped: Family<ReasonLabel, Counter>,
    /// Backend messages dropped on `Session` streams, by reason; gRPC calls refused, by reason.
    session_downlink_dropped: Family<ReasonLabel, Counter>,
    grpc_rejected: Family<ReasonLabel, Counter>,
    /// Control-plane hardening (issue 11): admission slots, refusals by reason, backends.
    sessions_reserved: Gauge,
    signaling_rejected: Family<ReasonLabel, Counter>,
    /// Resume POSTs (docs/continuity.md), by outcome.
    resumes: Family<OutcomeLabel, Counter>,
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
    /// Call quality across sessions (see `quality_histograms`); the loops publish into it.
    quality: QualityHistograms,
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
            loops: LoopFamilies::default(),
            process_cpu: Gauge::default(),
            usable_cores: Gauge::default(),
            sessions_refused: Family::default(),
            sessions_ended: Family::default(),
            signaling_responses: Family::default(),
            sessions_created: Counter::default(),
            offer_seconds: Family::new_with_constructor(offer_histogram),
            uplink_queue: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.000_25, 2.0, 14),
            ),
            backend_workers: Gauge::default(),
            dispatch_queued: Gauge::default(),
            dispatches: Counter::default(),
            multiplex_streams: Gauge::default(),
            multiplex_batches: Counter::default(),
            multiplex_messages: Counter::default(),
            multiplex_dropped: Family::default(),
            session_downlink_dropped: Family::default(),
            grpc_rejected: Family::default(),
            sessions_reserved: Gauge::default(),
            signaling_rejected: Family::default(),
            resumes: Family::default(),
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
            quality: QualityHistograms::register(&mut registry),
            registry: Registry::default(),
        };
        // Registration order is the exposition order.
        m.loops.register_io(&mut registry);
        m.register_session_metrics(&mut registry);
        m.loops.register_bridge(&mut registry);
        m.register_uplink_queue_metrics(&mut registry);
        m.register_dispatch_metrics(&mut registry);
        m.register_hardening_metrics(&mut registry);
        m.loops.register_tcp(&mut registry);
        m.register_ingress_metrics(&mut registry);
        // Every stage's histogram exists, at zero, from the start: a series that first appears
        // with the first offer has no earlier sample, so `rate()` over it misses that offer and
        // a quiet transceiver's offer-time panel would read NaN instead of its first answer.
        for stage in OfferStage::ALL {
            drop(m.offer_seconds.get_or_create(&StageLabel {
                stage: stage.as_str().to_string(),
            }));
        }
        Metrics { registry, ..m }
    }

    /// Process CPU, admission refusals, session lifecycle, signaling responses, offer timing.
    fn register_session_metrics(&self, registry: &mut Registry) {
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
            "sessions_refused",
            "New sessions refused (503 or 429), by reason",
            self.sessions_refused.clone(),
        );
        registry.register(
            "sessions_ended",
            "Sessions ended, by reason",
            self.sessions_ended.clone(),
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

    /// The owners' uplink streams: how long a frame waits in its queue.
    fn register_uplink_queue_metrics(&self, registry: &mut Registry) {
        registry.register(
            "bridge_uplink_queue_seconds",
            "From an uplink datagram's arrival to its frame leaving the uplink queue for the owner's gRPC stream: the loop's hand-off plus the wait for the gRPC side (0.25 ms to 2 s)",
            self.uplink_queue.clone(),
        );
    }

    /// Backends and dispatch, `Multiplex` streams.
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
            "Backend messages on Multiplex streams dropped, by reason (unknown_channel, attach_pending, downlink_full, too_large)",
            self.multiplex_dropped.clone(),
        );
        registry.register(
            "session_downlink_dropped",
            "Backend messages on Session streams dropped, by reason (too_large)",
            self.session_downlink_dropped.clone(),
        );
        registry.register(
            "grpc_rejected",
            "gRPC calls refused, by reason (auth_missing, auth_invalid, workers_per_connection, workers_total)",
            self.grpc_rejected.clone(),
        );
    }

    /// Admission slots, signaling refusals, stalled backends, codec costs and talking sessions.
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
            "resume",
            "Resume POSTs (a call continued on a new session), by outcome: resumed, invalid, \
             expired, replayed, stale, unknown, no_backend, refused (admission), table_full",
            self.resumes.clone(),
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

    /// Ingress steering: choices, and request headers not believed.
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

    /// Handles for media loop `index`, resolved once so the loop never hashes labels.
    pub fn loop_metrics(&self, index: usize) -> LoopMetrics {
        self.loops
            .for_loop(index, &self.pcm_frames_encoded, &self.quality)
    }

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

    /// A resume POST's outcome; `outcome` is a fixed word.
    pub fn resume(&self, outcome: &str) {
        self.resumes
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn backend_stalled(&self) {
        self.backend_stalls.inc();
    }

    /// A codec cost admission measured (CPU seconds per session-second).
    pub fn codec_cost(&self, key: CodecKey, seconds: f64) {
        self.codec_cost
            .get_or_create(&CodecLabel {
                rate: key.rate.to_string(),
                application: key.application.to_string(),
                complexity: key.complexity.to_string(),
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

    /// A backend message on a `Session` stream was over the limit on one message.
    pub fn session_downlink_too_large(&self) {
        self.session_downlink_dropped
            .get_or_create(&ReasonLabel {
                reason: MultiplexDrop::TooLarge.as_str().to_string(),
            })
            .inc();
    }

    pub fn grpc_rejected(&self, reason: GrpcRefusal) {
        self.grpc_rejected
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
