//! How busy a media loop is: the share of wall time it spends working rather than waiting in
//! `poll`, over fixed windows.
//!
//! This is what admission control needs. A loop past its capacity does not fail loudly: it
//! falls behind on every session at once (paced downlink frames go out late or not at all,
//! uplink frames queue). Refusing new sessions while a loop is near saturation keeps the calls
//! it already carries whole. Wall time, not CPU time, is measured on purpose: time the thread
//! lost to other processes is capacity the loop did not have.
//!
//! Sans-IO: the loop passes the instants it already reads; tests pass their own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Length of one measurement window.
pub const WINDOW: Duration = Duration::from_millis(500);

/// A share in [0, 1], in parts per million, shared between one writer and its readers: a
/// loop's busy share of its last completed window (the loop writes, the control plane reads),
/// and the process's CPU share (`control::process_load`).
#[derive(Debug, Clone, Default)]
pub struct SharedBusy(Arc<AtomicU32>);

impl SharedBusy {
    pub fn ratio(&self) -> f64 {
        f64::from(self.0.load(Ordering::Relaxed)) / 1e6
    }

    pub(crate) fn set(&self, ratio: f64) {
        self.0
            .store((ratio.clamp(0.0, 1.0) * 1e6) as u32, Ordering::Relaxed);
    }
}

#[derive(Debug)]
pub struct BusyMeter {
    window_start: Instant,
    busy: Duration,
    shared: SharedBusy,
}

impl BusyMeter {
    pub fn new(now: Instant, shared: SharedBusy) -> Self {
        BusyMeter {
            window_start: now,
            busy: Duration::ZERO,
            shared,
        }
    }

    /// Records one stretch of work, from waking up to going back to `poll`. Returns the busy
    /// ratio of a window when this stretch completes it (and publishes it).
    pub fn worked(&mut self, woke: Instant, done: Instant) -> Option<f64> {
        // Work that straddles the window start counts only from the start.
        let from = woke.max(self.window_start);
        self.busy += done.saturating_duration_since(from);
        let elapsed = done.saturating_duration_since(self.window_start);
        if elapsed < WINDOW {
            return None;
        }
        let ratio = (self.busy.as_secs_f64() / elapsed.as_secs_f64()).min(1.0);
        self.shared.set(ratio);
        self.window_start = done;
        self.busy = Duration::ZERO;
        Some(ratio)
    }

    /// Closes the current window if it is over even though the loop did no work (an idle loop
    /// sleeps in `poll` until a timer: its ratio must still fall).
    pub fn idle_until(&mut self, now: Instant) -> Option<f64> {
        self.worked(now, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn ratio_is_work_over_wall_time_per_window() {
        let t0 = Instant::now();
        let shared = SharedBusy::default();
        let mut m = BusyMeter::new(t0, shared.clone());
        // 10 ms of work every 20 ms: half busy.
        let mut last = None;
        for i in 0..30 {
            let woke = t0 + ms(20 * i);
            if let Some(r) = m.worked(woke, woke + ms(10)) {
                last = Some(r);
            }
        }
        let r = last.expect("a window completed");
        assert!((r - 0.5).abs() < 0.03, "{r}");
        assert!((shared.ratio() - r).abs() < 1e-5);
    }

    #[test]
    fn a_saturated_loop_reads_one_and_an_idle_one_falls_to_zero() {
        let t0 = Instant::now();
        let shared = SharedBusy::default();
        let mut m = BusyMeter::new(t0, shared.clone());
        // Back-to-back work: no time in poll at all.
        let mut t = t0;
        while m.worked(t, t + ms(7)).is_none() {
            t += ms(7);
        }
        assert!(shared.ratio() > 0.99, "{}", shared.ratio());
        // Then nothing to do for a whole window.
        let r = m.idle_until(t + ms(7) + WINDOW).expect("window closed");
        assert_eq!(r, 0.0);
        assert_eq!(shared.ratio(), 0.0);
    }

    #[test]
    fn no_ratio_before_a_window_is_complete() {
        let t0 = Instant::now();
        let mut m = BusyMeter::new(t0, SharedBusy::default());
        assert_eq!(m.worked(t0, t0 + ms(100)), None);
        assert_eq!(m.idle_until(t0 + ms(499)), None);
        assert!(m.idle_until(t0 + ms(500)).is_some());
    }
}
