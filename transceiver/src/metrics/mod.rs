//! Prometheus metrics of the transceiver, and the plain counters media loops keep.
//!
//! Media loops never touch a metric per packet: each loop counts in plain integers
//! ([`LoopCounters`], with each session's [`BridgeCounters`] and [`HandoffHistogram`] summed
//! in) and publishes the deltas into its pre-resolved metric handles ([`LoopMetrics`]) once per
//! wakeup batch. Label lookups happen once, at start-up. This module depends on nothing else of
//! the crate, so the media path, the control plane and the backend side all count into it: what
//! a family is labelled by comes in as one of its own small key types ([`SchedulingClass`],
//! [`CodecKey`], [`OfferStage`], [`MultiplexDrop`], [`GrpcRefusal`]).
//!
//! [`counts`]: the plain counters; [`labels`]: label sets and key types; [`registry`]: the
//! registry and the process-wide families; [`loop_metrics`]: the per-loop families and one
//! loop's handles; [`bulk_histogram`]: a histogram filled in bulk; [`quality_histograms`]: call
//! quality across sessions.

mod bulk_histogram;
mod counts;
mod labels;
mod loop_metrics;
mod quality_histograms;
mod registry;

pub use bulk_histogram::BulkHistogram;
pub use counts::{
    BridgeCounters, DropReason, HandoffHistogram, LoopCounters, TcpCloseReason, TcpCounters,
    HANDOFF_BUCKETS_US,
};
pub use labels::{CodecKey, GrpcRefusal, MultiplexDrop, OfferStage, SchedulingClass};
pub use loop_metrics::LoopMetrics;
pub use quality_histograms::{
    QualityCounts, QualityObservation, RtcpField, TurnCounts, TURN_REPORT_DROPS,
};
pub use registry::Metrics;

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
