//! Label sets of the transceiver's metric families, and the small key types other modules
//! hand the metrics (a stage of an offer, a multiplex drop, a loop's scheduling class, a
//! codec's settings): the metrics name what they count without depending on the modules that
//! count it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::histogram::Histogram;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoopLabel {
    pub(super) r#loop: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoopClassLabel {
    pub(super) r#loop: String,
    pub(super) class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoopReasonLabel {
    pub(super) r#loop: String,
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabel {
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StageLabel {
    pub(super) stage: String,
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
    pub(super) const ALL: [OfferStage; 3] =
        [OfferStage::Accept, OfferStage::Insert, OfferStage::Answer];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            OfferStage::Accept => "accept",
            OfferStage::Insert => "insert",
            OfferStage::Answer => "answer",
        }
    }
}

/// Bucket bounds (s) of `voxgate_offer_seconds`: 0.25 ms to 246 ms, 1.5 × apart (fine enough
/// for a p99 against the 30 ms setup target).
pub(super) fn offer_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_25, 1.5, 18,
    ))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct IngressLabel {
    pub(super) ingress: String,
    pub(super) reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct HeaderLabel {
    pub(super) header: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CodecLabel {
    pub(super) rate: String,
    pub(super) application: String,
    pub(super) complexity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StatusLabel {
    pub(super) status: String,
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
    /// Over the limit on one backend message (`backend::message_size`).
    TooLarge,
}

impl MultiplexDrop {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            MultiplexDrop::UnknownChannel => "unknown_channel",
            MultiplexDrop::AttachPending => "attach_pending",
            MultiplexDrop::DownlinkFull => "downlink_full",
            MultiplexDrop::TooLarge => "too_large",
        }
    }
}

/// Why the gRPC edge refused a call (`voxgate_grpc_rejected_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcRefusal {
    /// No `authorization` metadata where a credential is required.
    AuthMissing,
    /// A credential that is not the one configured.
    AuthInvalid,
    /// A `Work` registration past `--max-workers-per-connection`.
    WorkersPerConnection,
    /// A `Work` registration past `--max-workers`.
    WorkersTotal,
}

impl GrpcRefusal {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            GrpcRefusal::AuthMissing => "auth_missing",
            GrpcRefusal::AuthInvalid => "auth_invalid",
            GrpcRefusal::WorkersPerConnection => "workers_per_connection",
            GrpcRefusal::WorkersTotal => "workers_total",
        }
    }
}

/// The scheduling class a media loop's thread got (`voxgate_loop_scheduling{class}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulingClass {
    Rt,
    High,
    Normal,
}

impl SchedulingClass {
    pub const ALL: [SchedulingClass; 3] = [
        SchedulingClass::Rt,
        SchedulingClass::High,
        SchedulingClass::Normal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SchedulingClass::Rt => "rt",
            SchedulingClass::High => "high",
            SchedulingClass::Normal => "normal",
        }
    }
}

/// A PCM session's codecs as `voxgate_codec_cpu_seconds` labels them: the PCM rate and the
/// downlink encoder's libopus application and complexity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodecKey {
    pub rate: u32,
    /// `voip`, `audio` or `lowdelay`.
    pub application: &'static str,
    pub complexity: i32,
}
