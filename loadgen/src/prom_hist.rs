//! A Prometheus histogram read from a server's `/metrics` text, and percentiles estimated
//! from its cumulative buckets.
//!
//! Used for the transceiver's `voxgate_bridge_uplink_handoff_seconds`: socket arrival of a
//! caller's Opus packet → its PCM frame handed to the gRPC stream, measured inside the
//! transceiver. The suite scrapes it at the start and at the end of the measurement window
//! and keeps the difference, so only the window's packets count. Percentiles from buckets
//! are estimates: linear inside the bucket that holds the rank, never finer than the bucket.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The transceiver's in-process hand-off histogram (seconds).
pub const HANDOFF_METRIC: &str = "voxgate_bridge_uplink_handoff_seconds";
/// The transceiver's server-side offer timing (seconds), by `stage`.
pub const OFFER_METRIC: &str = "voxgate_offer_seconds";
/// Times the transceiver's media loops woke from `poll` (summed over loops).
pub const WAKEUPS_METRIC: &str = "voxgate_loop_wakeups_total";
/// Uplink messages refused by a backend stream's full queue.
pub const UPLINK_DROPPED_METRIC: &str = "voxgate_bridge_uplink_dropped_total";
/// Datagrams a media loop dropped before a session, by reason.
pub const LOOP_DROPPED_METRIC: &str = "voxgate_dropped_datagrams_total";
/// Sends that failed.
pub const SEND_ERRORS_METRIC: &str = "voxgate_send_errors_total";

/// One histogram summed over all its series (e.g. over the `loop` label).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// (upper bound, cumulative count), ascending; the last bound may be `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
    /// Number of series summed (label sets with a `_count` line).
    pub series: usize,
}

/// Splits `name{labels} value [exemplar…]` into (name, labels, value).
fn split_line(line: &str) -> Option<(&str, &str, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = match line.find('{') {
        Some(i) => {
            let close = line[i..].find('}')? + i;
            (&line[..i], (&line[i + 1..close], &line[close + 1..]))
        }
        None => {
            let i = line.find(char::is_whitespace)?;
            (&line[..i], ("", &line[i..]))
        }
    };
    let (labels, tail) = rest;
    let value = tail.split_whitespace().next()?;
    Some((name.trim(), labels, value))
}

/// The value of label `key` in `a="x",b="y"` (values without escaped quotes).
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// Parses histogram `name` out of Prometheus / OpenMetrics text, summing every series.
/// `None` when the text has no `_count` line for it.
pub fn parse(text: &str, name: &str) -> Option<Histogram> {
    parse_where(text, name, None)
}

/// Like [`parse`], summing only the series whose label `key` is `value`.
pub fn parse_labeled(text: &str, name: &str, key: &str, value: &str) -> Option<Histogram> {
    parse_where(text, name, Some((key, value)))
}

fn parse_where(text: &str, name: &str, only: Option<(&str, &str)>) -> Option<Histogram> {
    let bucket = format!("{name}_bucket");
    let sum = format!("{name}_sum");
    let count = format!("{name}_count");
    let mut h = Histogram::default();
    let mut bounds: Vec<(f64, u64)> = Vec::new();
    let wanted = |labels: &str| only.is_none_or(|(k, v)| label(labels, k) == Some(v));
    for (n, labels, value) in text.lines().filter_map(split_line) {
        if !wanted(labels) {
            continue;
        }
        if n == bucket {
            let (Some(le), Ok(v)) = (
                label(labels, "le").and_then(|s| s.parse::<f64>().ok()),
                value.parse::<f64>(),
            ) else {
                continue;
            };
            match bounds.iter_mut().find(|(b, _)| *b == le) {
                Some((_, c)) => *c += v as u64,
                None => bounds.push((le, v as u64)),
            }
        } else if n == sum {
            h.sum += value.parse::<f64>().unwrap_or(0.0);
        } else if n == count {
            h.count += value.parse::<f64>().map_or(0, |v| v as u64);
            h.series += 1;
        }
    }
    if h.series == 0 {
        return None;
    }
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    h.buckets = bounds;
    Some(h)
}

impl Histogram {
    /// `self − earlier`, bucket by bucket (the window between two scrapes). Bounds missing
    /// from `earlier` count as zero there; counts never go below zero (a restart).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let before = |le: f64| {
            earlier
                .buckets
                .iter()
                .find(|(b, _)| *b == le)
                .map_or(0, |(_, c)| *c)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|&(le, c)| (le, c.saturating_sub(before(le))))
                .collect(),
            sum: (self.sum - earlier.sum).max(0.0),
            count: self.count.saturating_sub(earlier.count),
            series: self.series,
        }
    }
}

/// The `q`-quantile (0..=1) from cumulative `buckets` (upper bound, cumulative count),
/// ascending: (estimate, upper bound of the bucket holding it). The estimate interpolates
/// linearly between the bucket's lower bound (the previous bound, 0 for the first) and its
/// upper bound; in the `+Inf` bucket it is the last finite bound (a floor, not a value).
/// `None` when the buckets hold no observations.
pub fn quantile(buckets: &[(f64, u64)], q: f64) -> Option<(f64, f64)> {
    let total = buckets.iter().map(|b| b.1).max()?;
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut lower = (0.0_f64, 0_u64);
    for &(le, cum) in buckets {
        if cum as f64 >= rank && cum > lower.1 {
            if le.is_infinite() {
                return Some((lower.0, le));
            }
            let frac = (rank - lower.1 as f64) / (cum - lower.1) as f64;
            return Some((lower.0 + frac.clamp(0.0, 1.0) * (le - lower.0), le));
        }
        lower = (if le.is_finite() { le } else { lower.0 }, cum.max(lower.1));
    }
    // Counts beyond the last bound (no +Inf line): the last bound is a floor.
    Some((lower.0, f64::INFINITY))
}

/// The sum of every series of gauge or counter `name` (e.g. over the `loop` or `worker`
/// label); `None` when the text has none.
pub fn sum(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter_map(split_line)
        .filter(|(n, _, _)| *n == name)
        .filter_map(|(_, _, v)| v.parse::<f64>().ok())
        .fold(None, |total, v| Some(total.unwrap_or(0.0) + v))
}

/// The whole exposition at `url` (a `/metrics` endpoint). Errors are `None`: a missing
/// metric leaves the report's column empty rather than failing the run.
pub fn scrape_text(http: &reqwest::blocking::Client, url: &str) -> Option<String> {
    http.get(url)
        .send()
        .ok()?
        .error_for_status()
        .ok()?
        .text()
        .ok()
}

/// A client for [`scrape`] with a short timeout (it runs on the load generator's fleet
/// thread, between two polls of the sessions).
pub fn client() -> Option<reqwest::blocking::Client> {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()
}

/// In-transceiver hand-off latency over a run's measurement window, from the bucket deltas
/// of [`HANDOFF_METRIC`]. Percentiles are bucket estimates; the bucket's upper bound is kept
/// next to each (`None` = the `+Inf` bucket).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandoffLatency {
    /// Frames observed in the window (all loops).
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p50_bucket_le_us: Option<f64>,
    pub p99_us: f64,
    pub p99_bucket_le_us: Option<f64>,
    /// Finite bucket upper bounds, µs.
    pub bucket_le_us: Vec<f64>,
    /// Observations per bucket in the window (not cumulative); one more than
    /// `bucket_le_us`: the last is the `+Inf` bucket.
    pub bucket_counts: Vec<u64>,
    /// Series (media loops) summed.
    pub loops: usize,
}

impl HandoffLatency {
    /// Summarises a window's histogram (seconds).
    pub fn of(h: &Histogram) -> HandoffLatency {
        let us = |s: f64| s * 1e6;
        let le = |b: f64| b.is_finite().then(|| us(b));
        let p50 = quantile(&h.buckets, 0.50);
        let p99 = quantile(&h.buckets, 0.99);
        let mut bucket_le_us = Vec::new();
        let mut bucket_counts = Vec::new();
        let mut prev = 0_u64;
        for &(b, cum) in &h.buckets {
            if b.is_finite() {
                bucket_le_us.push(us(b));
            }
            bucket_counts.push(cum.saturating_sub(prev));
            prev = prev.max(cum);
        }
        if h.buckets.last().is_none_or(|b| b.0.is_finite()) {
            bucket_counts.push(h.count.saturating_sub(prev));
        }
        HandoffLatency {
            count: h.count,
            mean_us: if h.count == 0 {
                0.0
            } else {
                us(h.sum) / h.count as f64
            },
            p50_us: p50.map_or(0.0, |p| us(p.0)),
            p50_bucket_le_us: p50.and_then(|p| le(p.1)),
            p99_us: p99.map_or(0.0, |p| us(p.0)),
            p99_bucket_le_us: p99.and_then(|p| le(p.1)),
            bucket_le_us,
            bucket_counts,
            loops: h.series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [f64; 10] = [
        0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    ];

    fn cumulative(per_bucket: &[u64]) -> Vec<(f64, u64)> {
        let mut c = 0;
        BOUNDS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(per_bucket)
            .map(|(b, n)| {
                c += n;
                (b, c)
            })
            .collect()
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        // 100 observations: 40 ≤ 25 µs, 40 in (25, 50] µs, 19 in (50, 100] µs, 1 in (1, 2.5] ms.
        let b = cumulative(&[40, 40, 19, 0, 0, 0, 1, 0, 0, 0, 0]);
        let (p50, le50) = quantile(&b, 0.5).unwrap();
        assert_eq!(le50, 0.00005);
        // Rank 50 is the 10th of 40 in (25, 50] µs: 25 + 10/40 × 25 = 31.25 µs.
        assert!((p50 - 31.25e-6).abs() < 1e-12, "{p50}");
        let (p99, le99) = quantile(&b, 0.99).unwrap();
        assert_eq!(le99, 0.0001);
        assert!((p99 - 0.0001).abs() < 1e-12, "{p99}");
        // The first bucket interpolates from zero.
        let (p10, le10) = quantile(&b, 0.1).unwrap();
        assert_eq!(le10, 0.000025);
        assert!((p10 - 6.25e-6).abs() < 1e-12, "{p10}");
        let (p100, le100) = quantile(&b, 1.0).unwrap();
        assert_eq!(le100, 0.0025);
        assert!(p100 > 0.001 && p100 <= 0.0025);
    }

    #[test]
    fn a_labeled_parse_keeps_only_its_series() {
        let text = "\
voxgate_offer_seconds_bucket{stage=\"accept\",le=\"0.001\"} 3
voxgate_offer_seconds_bucket{stage=\"accept\",le=\"+Inf\"} 4
voxgate_offer_seconds_sum{stage=\"accept\"} 0.01
voxgate_offer_seconds_count{stage=\"accept\"} 4
voxgate_offer_seconds_bucket{stage=\"answer\",le=\"0.001\"} 1
voxgate_offer_seconds_bucket{stage=\"answer\",le=\"+Inf\"} 4
voxgate_offer_seconds_sum{stage=\"answer\"} 0.05
voxgate_offer_seconds_count{stage=\"answer\"} 4
";
        let answer = parse_labeled(text, OFFER_METRIC, "stage", "answer").unwrap();
        assert_eq!(answer.count, 4);
        assert_eq!(answer.buckets, vec![(0.001, 1), (f64::INFINITY, 4)]);
        assert!((answer.sum - 0.05).abs() < 1e-12);
        assert_eq!(
            parse(text, OFFER_METRIC).unwrap().count,
            8,
            "unlabeled sums both"
        );
        assert!(parse_labeled(text, OFFER_METRIC, "stage", "insert").is_none());
    }

    #[test]
    fn quantiles_in_the_overflow_bucket_and_of_nothing() {
        let b = cumulative(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10]);
        assert_eq!(quantile(&b, 0.5), Some((0.025, f64::INFINITY)));
        assert_eq!(quantile(&cumulative(&[0; 11]), 0.5), None);
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn sum_adds_every_series_of_a_gauge_and_only_it() {
        let text = "# TYPE g gauge\ng{loop=\"0\"} 3\ng{loop=\"1\"} 4\ng_other 100\n";
        assert_eq!(sum(text, "g"), Some(7.0));
        assert_eq!(sum(text, "missing"), None);
    }

    #[test]
    fn parses_and_sums_series_in_any_label_order() {
        let text = "\
# HELP voxgate_bridge_uplink_handoff_seconds x
# TYPE voxgate_bridge_uplink_handoff_seconds histogram
voxgate_bridge_uplink_handoff_seconds_sum{loop=\"0\"} 0.5
voxgate_bridge_uplink_handoff_seconds_count{loop=\"0\"} 10
voxgate_bridge_uplink_handoff_seconds_bucket{le=\"0.000025\",loop=\"0\"} 4
voxgate_bridge_uplink_handoff_seconds_bucket{le=\"+Inf\",loop=\"0\"} 10
voxgate_bridge_uplink_handoff_seconds_sum{loop=\"1\"} 0.25
voxgate_bridge_uplink_handoff_seconds_count{loop=\"1\"} 6
voxgate_bridge_uplink_handoff_seconds_bucket{loop=\"1\",le=\"0.000025\"} 6
voxgate_bridge_uplink_handoff_seconds_bucket{loop=\"1\",le=\"+Inf\"} 6 # {trace=\"x\"} 1
voxgate_bridge_uplink_dropped_total{loop=\"0\"} 3
# EOF
";
        let h = parse(text, HANDOFF_METRIC).unwrap();
        assert_eq!(h.count, 16);
        assert_eq!(h.series, 2);
        assert!((h.sum - 0.75).abs() < 1e-12);
        assert_eq!(h.buckets, vec![(0.000025, 10), (f64::INFINITY, 16)]);
        assert!(parse(text, "voxgate_nothing").is_none());

        let earlier = Histogram {
            buckets: vec![(0.000025, 4), (f64::INFINITY, 6)],
            sum: 0.25,
            count: 6,
            series: 2,
        };
        let w = h.since(&earlier);
        assert_eq!(w.buckets, vec![(0.000025, 6), (f64::INFINITY, 10)]);
        assert_eq!(w.count, 10);
        let s = HandoffLatency::of(&w);
        assert_eq!(s.bucket_le_us, vec![25.0]);
        assert_eq!(s.bucket_counts, vec![6, 4]);
        assert_eq!(s.p50_bucket_le_us, Some(25.0));
        assert_eq!(s.p99_bucket_le_us, None);
        assert!((s.mean_us - 50_000.0).abs() < 1e-6);
    }
}
