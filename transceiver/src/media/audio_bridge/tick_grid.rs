//! The downlink's shared 20 ms clock: every session's tick falls on one process-wide grid.
//!
//! Why: a session used to start its 20 ms clock when its backend attached, so N sessions had
//! N phases and a loop woke up to 50 × N times a second just for ticks (most of them idle:
//! nothing to play, but the backend queue is polled and str0m is driven). On one grid the
//! loop wakes 50 times a second for all of them: one timer pass walks every due session, and
//! the frames they produce leave in the same `sendmmsg` batches. A long pass (many PCM
//! encodes) does not delay callers' packets: the loop reads its socket between slices of a
//! timer pass (`media::loop`).
//!
//! Pure arithmetic on `Instant`s; the epoch is taken once per process, so sessions on every
//! loop share it.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::FRAME;

/// A grid of instants `epoch + k × period`.
#[derive(Debug, Clone, Copy)]
pub struct TickGrid {
    epoch: Instant,
    period: Duration,
}

impl TickGrid {
    pub fn new(epoch: Instant, period: Duration) -> Self {
        TickGrid { epoch, period }
    }

    /// The process's 20 ms downlink grid.
    pub fn shared() -> Self {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        TickGrid::new(*EPOCH.get_or_init(Instant::now), FRAME)
    }

    /// The first grid instant strictly after `now`.
    pub fn first_after(&self, now: Instant) -> Instant {
        let Some(since) = now.checked_duration_since(self.epoch) else {
            return self.epoch;
        };
        let period = self.period.as_nanos().max(1);
        let k = since.as_nanos() / period + 1;
        // k × period fits a u64 of nanoseconds for 584 years of uptime.
        self.epoch + Duration::from_nanos((k * period) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn instants_anywhere_in_a_period_map_to_its_end() {
        let t0 = Instant::now();
        let g = TickGrid::new(t0, 20 * MS);
        assert_eq!(g.first_after(t0), t0 + 20 * MS, "strictly after");
        assert_eq!(g.first_after(t0 + MS), t0 + 20 * MS);
        assert_eq!(g.first_after(t0 + 19 * MS), t0 + 20 * MS);
        assert_eq!(g.first_after(t0 + 20 * MS), t0 + 40 * MS);
        assert_eq!(g.first_after(t0 + 20_007 * MS), t0 + 20_020 * MS);
    }

    #[test]
    fn an_instant_before_the_epoch_gets_the_epoch() {
        let t0 = Instant::now() + 50 * MS;
        let g = TickGrid::new(t0, 20 * MS);
        assert_eq!(g.first_after(t0 - 30 * MS), t0);
    }

    #[test]
    fn the_shared_grid_is_the_same_for_every_caller() {
        let now = Instant::now();
        let a = TickGrid::shared().first_after(now);
        let b = TickGrid::shared().first_after(now + 3 * MS);
        let c = TickGrid::shared().first_after(now + 19 * MS);
        // Three instants within 20 ms share one tick or straddle a single boundary.
        let d = |x: Instant, y: Instant| x.max(y) - x.min(y);
        assert!([d(a, b), d(a, c), d(b, c)]
            .iter()
            .all(|g| g.is_zero() || *g == FRAME));
    }
}
