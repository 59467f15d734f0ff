//! Under steady traffic a loop reads its socket once per window, not once per datagram.
//!
//! A loop waits in `poll` and the kernel wakes it for each datagram that finds it waiting. With
//! 100 passthrough sessions (7,500 datagrams a second on one loop) most wakeups carried one
//! datagram, and in a profile the kernel's share of a packet was larger than str0m's
//! (docs/SESSION_COST.md, "What the whole process adds"). Each wakeup also handed its one
//! frame to tokio, waking a runtime thread in turn.
//!
//! So once datagrams come faster than the window, the loop holds off: after a read pass it
//! sleeps out the rest of the window (never past a timer that is due sooner), then reads
//! everything that queued meanwhile in one batch. It stays in that rhythm while each window
//! brings something, and goes back to waiting for the kernel's wakeup as soon as one window
//! comes back empty, so a quiet loop keeps its one-wakeup-per-datagram latency and never wakes
//! for nothing. A datagram waits about one window in the kernel's queue: the price, paid only
//! under load, is up to `--read-window-us` of uplink delay, and the uplink hand-off counts it
//! (it is timed from the kernel's receive stamp, see `arrival`). Downlink ticks are timers and
//! are not delayed. A pass that left datagrams unread (a flood) does not hold: the loop is
//! already reading as fast as it can.
//!
//! Off by default (`--read-window-us 0`). A 1 ms window saves CPU per packet only at several
//! hundred passthrough sessions and more, and it puts the hand-off p99 past the 1 ms it must
//! stay within; shorter windows saved nothing and lengthened the hand-off's tail
//! (docs/SESSION_COST.md, "The hand-off counted from the socket" and "No read window by
//! default").
//!
//! Sans-IO: the loop passes the instants it already reads and does the sleeping.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ReadCoalescing {
    window: Duration,
    /// When the last read pass that brought datagrams began.
    last_read: Option<Instant>,
    /// Whether the loop is in the once-per-window rhythm.
    holding: bool,
}

impl ReadCoalescing {
    /// `window` zero turns coalescing off: every datagram is read when it wakes the loop.
    pub fn new(window: Duration) -> Self {
        ReadCoalescing {
            window,
            last_read: None,
            holding: false,
        }
    }

    /// After a read pass that began at `read_at` and brought `received` datagrams; `unread`
    /// says the pass stopped on its budget with datagrams still queued. Returns until when
    /// the loop should hold off reading again (it may still wake sooner for a timer).
    pub fn after_read(
        &mut self,
        read_at: Instant,
        received: usize,
        unread: bool,
    ) -> Option<Instant> {
        if self.window.is_zero() {
            return None;
        }
        if received == 0 {
            // A window that brought nothing: traffic stopped, wait for the kernel again.
            self.holding = false;
            self.last_read = None;
            return None;
        }
        // Two reads with data within a window: datagrams come faster than the window.
        let dense = self
            .last_read
            .is_some_and(|prev| read_at.saturating_duration_since(prev) < self.window);
        self.holding = self.holding || dense;
        self.last_read = Some(read_at);
        if unread || !self.holding {
            return None;
        }
        Some(read_at + self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Simulates a loop fed one datagram every `gap` for `total`, reading as the coalescing
    /// says; returns the read passes and the longest a datagram waited to be read.
    fn simulate(window: Duration, gap: Duration, total: Duration) -> (usize, Duration) {
        let t0 = Instant::now();
        let mut c = ReadCoalescing::new(window);
        let arrivals: Vec<Instant> = (0..)
            .map(|i| t0 + gap * i)
            .take_while(|t| *t < t0 + total)
            .collect();
        let mut next = 0; // first arrival not read yet
        let mut reads = 0;
        let mut worst = Duration::ZERO;
        let mut hold: Option<Instant> = None;
        while next < arrivals.len() {
            // Without a hold the loop wakes at the next arrival; with one, at its end.
            let read_at = match hold.take() {
                Some(until) => until,
                None => arrivals[next],
            };
            let mut received = 0;
            while next < arrivals.len() && arrivals[next] <= read_at {
                worst = worst.max(read_at - arrivals[next]);
                next += 1;
                received += 1;
            }
            reads += 1;
            hold = c.after_read(read_at, received, false);
        }
        (reads, worst)
    }

    #[test]
    fn steady_traffic_is_read_once_per_window() {
        // 7,500 datagrams a second (100 passthrough sessions) for one second, 1 ms window.
        let (reads, worst) = simulate(us(1_000), us(133), Duration::from_secs(1));
        assert!((995..=1_005).contains(&reads), "{reads} read passes");
        assert!(worst <= us(1_000), "a datagram waited {worst:?}");
    }

    #[test]
    fn sparse_traffic_is_read_as_it_arrives() {
        // One session's 50 datagrams a second: each is read the moment it wakes the loop.
        let (reads, worst) = simulate(us(1_000), us(20_000), Duration::from_secs(1));
        assert_eq!(reads, 50);
        assert_eq!(worst, Duration::ZERO);
    }

    #[test]
    fn off_reads_every_datagram_as_it_arrives() {
        let (reads, worst) = simulate(Duration::ZERO, us(133), Duration::from_secs(1));
        assert_eq!(reads, 7_519);
        assert_eq!(worst, Duration::ZERO);
    }

    #[test]
    fn an_empty_window_ends_the_rhythm() {
        let t0 = Instant::now();
        let mut c = ReadCoalescing::new(us(1_000));
        assert_eq!(
            c.after_read(t0, 1, false),
            None,
            "one read says nothing yet"
        );
        assert_eq!(c.after_read(t0 + us(300), 2, false), Some(t0 + us(1_300)));
        assert_eq!(c.after_read(t0 + us(1_300), 7, false), Some(t0 + us(2_300)));
        // The window brought nothing: back to waiting for the kernel.
        assert_eq!(c.after_read(t0 + us(2_300), 0, false), None);
        // A datagram much later is read at once and starts nothing.
        assert_eq!(c.after_read(t0 + us(50_000), 1, false), None);
    }

    #[test]
    fn a_pass_that_left_datagrams_unread_does_not_hold() {
        let t0 = Instant::now();
        let mut c = ReadCoalescing::new(us(1_000));
        c.after_read(t0, 5, false);
        assert_eq!(c.after_read(t0 + us(100), 256, true), None);
        // Once the flood is read, the rhythm holds again.
        assert_eq!(c.after_read(t0 + us(200), 12, false), Some(t0 + us(1_200)));
    }
}
