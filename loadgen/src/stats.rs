//! Percentile summaries of measured samples (latencies, per-run rates).
//!
//! Samples are kept whole and sorted once: the largest set a run produces (media latency at
//! 1,000 sessions for tens of seconds) is a few million `f64`s, small next to what the
//! sessions themselves hold, and exact percentiles need no bucket-width caveat in the report.

use serde::{Deserialize, Serialize};

/// Order statistics of one set of samples. All fields are in the unit of the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// Summarises `samples` (any order; NaNs are ignored). Empty input gives all zeros.
    pub fn of(samples: &[f64]) -> Summary {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return Summary::default();
        }
        v.sort_by(f64::total_cmp);
        let sum: f64 = v.iter().sum();
        Summary {
            count: v.len() as u64,
            min: v[0],
            p50: percentile_sorted(&v, 50.0),
            p90: percentile_sorted(&v, 90.0),
            p99: percentile_sorted(&v, 99.0),
            max: v[v.len() - 1],
            mean: sum / v.len() as f64,
        }
    }
}

/// Nearest-rank percentile (`p` in `0..=100`) of an ascending, non-empty slice.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of nothing");
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `values` (any order); `None` when empty. For an even count, the mean of the
/// two middle values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Points of the empirical CDF of `samples`, thinned to at most `max_points` (always keeping
/// the last): `(value, fraction of samples <= value)`.
pub fn cdf_points(samples: &[f64], max_points: usize) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() || max_points == 0 {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let step = n.div_ceil(max_points).max(1);
    let mut out: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if out.last().map(|&(_, f)| f) != Some(1.0) {
        out.push((v[n - 1], 1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v);
        assert_eq!(s.count, 100);
        assert_eq!(
            (s.min, s.p50, s.p90, s.p99, s.max),
            (1.0, 50.0, 90.0, 99.0, 100.0)
        );
        assert!((s.mean - 50.5).abs() < 1e-9);
    }

    #[test]
    fn empty_and_nan_inputs_summarise_to_zero() {
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(Summary::of(&[f64::NAN]).count, 0);
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn median_of_even_count_is_the_middle_mean() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }

    #[test]
    fn cdf_is_thinned_and_ends_at_one() {
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        let c = cdf_points(&v, 10);
        assert!(c.len() <= 11);
        assert_eq!(c.last(), Some(&(999.0, 1.0)));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }
}
