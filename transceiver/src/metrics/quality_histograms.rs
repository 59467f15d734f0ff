//! Distributions of call quality across sessions: each session's quality sample (one per 5 s
//! of a connected call, see `media::quality`) is one observation, so the histograms show how
//! many calls were how good, with no series per session.
//!
//! A loop counts samples in plain integers ([`QualityCounts`], part of its `LoopCounters`) and
//! publishes them in bulk into the process-wide [`QualityHistograms`] like its other counts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// Most buckets any quality histogram has (the last, +Inf, not counted).
const MAX_BOUNDS: usize = 12;

const RTT_S: &[f64] = &[0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0];
const JITTER_S: &[f64] = &[0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2];
const LOSS: &[f64] = &[0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5];
const MOS: &[f64] = &[1.5, 2.0, 2.5, 3.0, 3.5, 3.8, 4.0, 4.2, 4.3, 4.4];
const TURN_S: &[f64] = &[0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0];

/// Why a caller's turn report was dropped (`media::turn_timing::ReportDrop`, in its order).
pub const TURN_REPORT_DROPS: [&str; 5] = [
    "malformed",
    "implausible",
    "unmatched",
    "repeated",
    "inconsistent",
];

/// A session's turn timing since the loop last looked: mouth-to-ear totals and dropped
/// reports by reason (indexed as [`TURN_REPORT_DROPS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnCounts {
    totals: PlainHistogram,
    pub dropped: [u64; TURN_REPORT_DROPS.len()],
}

impl TurnCounts {
    pub fn observe_total(&mut self, seconds: f64) {
        if seconds.is_finite() {
            self.totals.observe(TURN_S, seconds);
        }
    }

    pub fn any(&self) -> bool {
        self.totals.count > 0 || self.dropped.iter().any(|&n| n > 0)
    }
}

/// One session's sample, in base units (seconds, fractions). `None`: not measured yet.
#[derive(Debug, Clone, Copy, Default)]
pub struct QualityObservation {
    pub rtt_s: Option<f64>,
    pub uplink_jitter_s: Option<f64>,
    pub downlink_jitter_s: Option<f64>,
    pub uplink_loss: Option<f64>,
    pub downlink_loss: Option<f64>,
    pub uplink_mos: Option<f64>,
    pub downlink_mos: Option<f64>,
}

/// A value of a caller's RTCP that `media::rtcp_bounds` found implausible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtcpField {
    Rtt,
    Jitter,
    Lost,
}

impl RtcpField {
    pub const COUNT: usize = 3;
    const LABELS: [&'static str; Self::COUNT] = ["rtt", "jitter", "lost"];
}

/// A histogram counted in plain integers (no atomics), for one loop's pending counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PlainHistogram {
    buckets: [u64; MAX_BOUNDS + 1],
    sum: f64,
    count: u64,
}

impl PlainHistogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        let i = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.buckets[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

/// A loop's pending quality observations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QualityCounts {
    /// Something was counted since the last publish. A loop publishes on every pass, and a
    /// sample arrives once per session every 5 s: comparing these 860 bytes with zero on each
    /// pass instead was 0.3 % of a 5-session loop's instructions (callgrind, docs/SESSION_COST.md).
    counted: bool,
    rtt: PlainHistogram,
    jitter: [PlainHistogram; 2],
    loss: [PlainHistogram; 2],
    mos: [PlainHistogram; 2],
    implausible: [u64; RtcpField::COUNT],
    turns: TurnCounts,
}

impl QualityCounts {
    /// A session's turn timing (see [`TurnCounts`]).
    pub fn turns(&mut self, t: &TurnCounts) {
        if !t.any() {
            return;
        }
        self.counted = true;
        let h = &mut self.turns.totals;
        for (a, b) in h.buckets.iter_mut().zip(t.totals.buckets) {
            *a += b;
        }
        h.sum += t.totals.sum;
        h.count += t.totals.count;
        for (a, b) in self.turns.dropped.iter_mut().zip(t.dropped) {
            *a += b;
        }
    }

    /// Implausible values by field (indexed by [`RtcpField`]).
    pub fn implausible(&mut self, by_field: &[u32; RtcpField::COUNT]) {
        for (a, b) in self.implausible.iter_mut().zip(by_field) {
            *a += u64::from(*b);
            self.counted |= *b > 0;
        }
    }

    pub fn observe(&mut self, o: &QualityObservation) {
        self.counted = true;
        let put = |h: &mut PlainHistogram, bounds: &[f64], v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                h.observe(bounds, v);
            }
        };
        put(&mut self.rtt, RTT_S, o.rtt_s);
        put(&mut self.jitter[0], JITTER_S, o.uplink_jitter_s);
        put(&mut self.jitter[1], JITTER_S, o.downlink_jitter_s);
        put(&mut self.loss[0], LOSS, o.uplink_loss);
        put(&mut self.loss[1], LOSS, o.downlink_loss);
        put(&mut self.mos[0], MOS, o.uplink_mos);
        put(&mut self.mos[1], MOS, o.downlink_mos);
    }
}

/// The `direction` label of the per-direction quality histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabel {
    direction: &'static str,
}

const DIRECTIONS: [&str; 2] = ["uplink", "downlink"];

type DirectionFamily = Family<DirectionLabel, SharedHistogram, fn() -> SharedHistogram>;

/// The process-wide quality histograms.
#[derive(Clone)]
pub struct QualityHistograms {
    rtt: SharedHistogram,
    jitter: [SharedHistogram; 2],
    loss: [SharedHistogram; 2],
    mos: [SharedHistogram; 2],
    families: [DirectionFamily; 3],
    implausible: [Counter; RtcpField::COUNT],
    turn_total: SharedHistogram,
    turn_drops: [Counter; TURN_REPORT_DROPS.len()],
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FieldLabel {
    field: &'static str,
}

impl QualityHistograms {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let rtt = SharedHistogram::new(RTT_S);
        let families: [DirectionFamily; 3] = [
            Family::new_with_constructor(|| SharedHistogram::new(JITTER_S)),
            Family::new_with_constructor(|| SharedHistogram::new(LOSS)),
            Family::new_with_constructor(|| SharedHistogram::new(MOS)),
        ];
        let of = |f: &DirectionFamily| {
            DIRECTIONS.map(|direction| f.get_or_create(&DirectionLabel { direction }).clone())
        };
        let fields = Family::<FieldLabel, Counter>::default();
        let reasons = Family::<ReasonLabel, Counter>::default();
        let turn_total = SharedHistogram::new(TURN_S);
        let h = QualityHistograms {
            turn_total: turn_total.clone(),
            turn_drops: TURN_REPORT_DROPS
                .map(|reason| reasons.get_or_create(&ReasonLabel { reason }).clone()),
            rtt: rtt.clone(),
            jitter: of(&families[0]),
            loss: of(&families[1]),
            mos: of(&families[2]),
            families,
            implausible: RtcpField::LABELS
                .map(|field| fields.get_or_create(&FieldLabel { field }).clone()),
        };
        registry.register(
            "rtcp_implausible",
            "Values in callers' RTCP (and RTP timestamps) outside what a network can produce, dropped or clamped before they count as a call's quality, by field",
            fields,
        );
        registry.register(
            "turn_mouth_to_ear_seconds",
            "Turns' time from the caller's end of speech to the reply heard at its ear, as its browser reported it (media::turn_timing), one observation per turn",
            turn_total,
        );
        registry.register(
            "turn_reports_dropped",
            "Callers' turn reports dropped before they count (unparsable, implausible, matching no turn, repeated, or shorter than the transceiver's own part), by reason",
            reasons,
        );
        registry.register(
            "call_rtt_seconds",
            "Calls' round-trip time from RTCP, one observation per call every 5 s",
            rtt,
        );
        registry.register(
            "call_jitter_seconds",
            "Calls' RFC 3550 interarrival jitter by direction, one observation per call every 5 s",
            h.families[0].clone(),
        );
        registry.register(
            "call_loss_ratio",
            "Calls' recent packet loss (last RTCP report) by direction, one observation per call every 5 s",
            h.families[1].clone(),
        );
        registry.register(
            "call_mos",
            "Calls' E-model MOS estimate (ITU-T G.107) by direction, one observation per call every 5 s",
            h.families[2].clone(),
        );
        h
    }

    /// Adds a loop's pending observations and zeroes them.
    pub fn publish(&self, pending: &mut QualityCounts) {
        if !pending.counted {
            return;
        }
        self.rtt.add(&pending.rtt);
        for i in 0..2 {
            self.jitter[i].add(&pending.jitter[i]);
            self.loss[i].add(&pending.loss[i]);
            self.mos[i].add(&pending.mos[i]);
        }
        for (c, n) in self.implausible.iter().zip(pending.implausible) {
            if n > 0 {
                c.inc_by(n);
            }
        }
        self.turn_total.add(&pending.turns.totals);
        for (c, n) in self.turn_drops.iter().zip(pending.turns.dropped) {
            if n > 0 {
                c.inc_by(n);
            }
        }
        *pending = QualityCounts::default();
    }
}

/// A histogram filled in bulk from [`PlainHistogram`]s.
#[derive(Debug, Clone)]
pub struct SharedHistogram {
    bounds: &'static [f64],
    inner: Arc<SharedInner>,
}

#[derive(Debug, Default)]
struct SharedInner {
    buckets: [AtomicU64; MAX_BOUNDS + 1],
    /// The sum's f64 bits (added under a compare-and-swap, at publish time only).
    sum_bits: AtomicU64,
    count: AtomicU64,
}

impl SharedHistogram {
    fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.len() <= MAX_BOUNDS);
        SharedHistogram {
            bounds,
            inner: Arc::default(),
        }
    }

    fn add(&self, h: &PlainHistogram) {
        if h.count == 0 {
            return;
        }
        for (a, b) in self.inner.buckets.iter().zip(h.buckets.iter()) {
            a.fetch_add(*b, Ordering::Relaxed);
        }
        let _ = self
            .inner
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + h.sum).to_bits())
            });
        self.inner.count.fetch_add(h.count, Ordering::Relaxed);
    }
}

impl TypedMetric for SharedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SharedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // Per-bucket counts: the encoder makes them cumulative. Observations above every
        // bound sit at index `bounds.len()`.
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX)) // the encoder writes f64::MAX as le="+Inf"
            .zip(self.inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            f64::from_bits(self.inner.sum_bits.load(Ordering::Relaxed)),
            self.inner.count.load(Ordering::Relaxed),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_cumulative_buckets_by_direction() {
        let mut registry = Registry::with_prefix("voxgate");
        let h = QualityHistograms::register(&mut registry);
        let mut pending = QualityCounts::default();
        pending.observe(&QualityObservation {
            rtt_s: Some(0.04),
            uplink_loss: Some(0.03),
            downlink_loss: Some(0.0),
            uplink_mos: Some(3.9),
            ..Default::default()
        });
        pending.observe(&QualityObservation {
            rtt_s: Some(3.0),
            uplink_loss: Some(f64::NAN),
            ..Default::default()
        });
        h.publish(&mut pending);
        assert_eq!(pending, QualityCounts::default());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"voxgate_call_rtt_seconds_bucket{le="0.05"} 1"#,
            r#"voxgate_call_rtt_seconds_bucket{le="2.0"} 1"#,
            r#"voxgate_call_rtt_seconds_bucket{le="+Inf"} 2"#,
            "voxgate_call_rtt_seconds_count 2",
            r#"voxgate_call_loss_ratio_bucket{le="0.02",direction="uplink"} 0"#,
            r#"voxgate_call_loss_ratio_bucket{le="0.05",direction="uplink"} 1"#,
            r#"voxgate_call_loss_ratio_count{direction="uplink"} 1"#,
            r#"voxgate_call_loss_ratio_bucket{le="0.001",direction="downlink"} 1"#,
            r#"voxgate_call_mos_bucket{le="4.0",direction="uplink"} 1"#,
            r#"voxgate_call_mos_count{direction="downlink"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn implausible_values_alone_are_published_and_nothing_counted_publishes_nothing() {
        let mut registry = Registry::with_prefix("voxgate");
        let h = QualityHistograms::register(&mut registry);
        let mut pending = QualityCounts::default();
        pending.implausible(&[0, 0, 0]);
        assert_eq!(pending, QualityCounts::default());
        pending.implausible(&[0, 2, 0]);
        h.publish(&mut pending);
        assert_eq!(pending, QualityCounts::default());
        h.publish(&mut pending);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"voxgate_rtcp_implausible_total{field="jitter"} 2"#),
            "{text}"
        );
    }

    #[test]
    fn turn_totals_and_dropped_reports_are_published() {
        let mut registry = Registry::with_prefix("voxgate");
        let h = QualityHistograms::register(&mut registry);
        let mut pending = QualityCounts::default();
        pending.turns(&TurnCounts::default());
        assert_eq!(pending, QualityCounts::default(), "nothing to count");
        let mut t = TurnCounts::default();
        t.observe_total(0.62);
        t.observe_total(f64::NAN);
        t.dropped[2] = 3;
        pending.turns(&t);
        pending.turns(&t);
        h.publish(&mut pending);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"voxgate_turn_mouth_to_ear_seconds_bucket{le="0.5"} 0"#,
            r#"voxgate_turn_mouth_to_ear_seconds_bucket{le="0.75"} 2"#,
            "voxgate_turn_mouth_to_ear_seconds_count 2",
            r#"voxgate_turn_reports_dropped_total{reason="unmatched"} 6"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
