//! What a session hands the loop on each look ([`super::Session::take_report`]): counts and
//! one-off events since the last look, for the loop's metrics and the control plane.

use crate::media::audio_bridge::StartedTalking;
use crate::media::quality::QualitySample;
use crate::media::rtcp_bounds::Implausible;
use crate::metrics::{BridgeCounters, HandoffHistogram, TurnCounts};

use super::state::OwnerLoss;

/// What a session's bridge did since the loop last asked ([`super::Session::take_report`]).
#[derive(Debug, Default)]
pub struct SessionReport {
    /// Bridge counts since the last report, for the loop's metrics (O(1), no scan).
    pub bridge: BridgeCounters,
    /// Uplink hand-off latencies observed since the last report.
    pub handoff: HandoffHistogram,
    /// A PCM owner's backend played its first frame (once per owner).
    pub started_talking: Option<StartedTalking>,
    /// The owning backend was lost: how, and which owner (its `owner_id`).
    pub owner_lost: Option<(OwnerLoss, u64)>,
    /// A quality sample (every 5 s of a connected call), for the loop's histograms.
    pub quality: Option<QualitySample>,
    /// Implausible values in the caller's reports since the last look (`rtcp_bounds`).
    pub rtcp_implausible: Implausible,
    /// Turn totals and dropped turn reports since the last look (`turn_timing`).
    pub turns: Option<TurnCounts>,
}
