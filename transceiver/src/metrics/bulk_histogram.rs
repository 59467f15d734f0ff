//! A Prometheus histogram a loop fills in bulk from its plain [`HandoffHistogram`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::metrics::counts::{HandoffHistogram, HANDOFF_BUCKETS_US};

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
    pub(super) fn add(&self, h: &HandoffHistogram) {
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
