//! A saturated real-time loop leaves its core for a moment every few milliseconds, so the
//! kernel never has to take it away for 50 ms at once.
//!
//! A media loop runs `SCHED_RR` (see `thread_priority`) and, under a flood at its capacity,
//! never goes back to wait in `poll`: there is always another datagram. Linux does not let a
//! real-time task starve the ordinary ones on its core for ever: its fair server (6.12 and
//! later; `sched_rt_runtime_us` throttling before) gives them 50 ms of every second, in one
//! piece, once they have waited long enough. For that piece the loop does not run at all, so
//! every session's downlink tick is 50 ms late: the junk-flood test of `hostile_media` saw such
//! gaps while a build ran beside it (docs/SESSION_COST.md, "Appendix: figures formerly in the
//! README", media loop priority).
//!
//! So the loop gives up its core itself, in small pieces: after [`MAX_RUN`] without a wait in
//! `poll`, it sleeps [`REST`]. That is at most 0.2 ms added to a tick, the other work on the
//! core gets about 9 % of it (more than the 5 % the kernel would take), and the datagrams not
//! read meanwhile are dropped by the kernel as they would be anyway (the loop is past its
//! capacity). A loop that waits in `poll` now and then never rests.
//!
//! The other work on the core includes the transceiver's own control plane: signaling and the
//! gRPC side run on ordinary threads that the loop preempts. A loop below capacity on average
//! still works off bursts (a backlog of uplink after a busy moment) without a wait, and an
//! offer waiting for a core then waited for the whole burst. The pieces were 1 ms every 10 ms;
//! at 0.2 ms every 2 ms the share is the same and the wait is five times shorter, which
//! shortened the set-up tail of sessions arriving at a loaded core (docs/SESSION_COST.md,
//! "Setting up a session, continued", item 4).
//!
//! Sans-IO: the loop passes the instants it already reads and does the sleeping.

use std::time::{Duration, Instant};

/// Longest stretch a loop works without waiting before it rests.
pub const MAX_RUN: Duration = Duration::from_millis(2);
/// How long it rests.
pub const REST: Duration = Duration::from_micros(200);
/// A wait in `poll` at least this long counted as the core being free (other threads ran).
const WAIT_THAT_COUNTS: Duration = Duration::from_micros(100);

#[derive(Debug)]
pub struct CoreShare {
    /// Since when the loop has worked without a wait that counts.
    running_since: Instant,
}

impl CoreShare {
    pub fn new(now: Instant) -> Self {
        CoreShare { running_since: now }
    }

    /// Called after each pass: `polled` is when the loop called `poll`, `woke` when it
    /// returned, `now` the end of the pass. Returns how long to sleep before the next `poll`.
    pub fn after_pass(&mut self, polled: Instant, woke: Instant, now: Instant) -> Option<Duration> {
        if woke.saturating_duration_since(polled) >= WAIT_THAT_COUNTS {
            self.running_since = woke;
        }
        if now.saturating_duration_since(self.running_since) < MAX_RUN {
            return None;
        }
        // The rest itself frees the core: the next run is counted from its end.
        self.running_since = now + REST;
        Some(REST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_loop_that_waits_in_poll_never_rests() {
        let t0 = Instant::now();
        let mut c = CoreShare::new(t0);
        // 5 s of 1.5 ms passes, each after a 200 µs wait: busy, but below capacity.
        let mut t = t0;
        for _ in 0..2_941 {
            let polled = t;
            let woke = polled + us(200);
            t = woke + us(1_500);
            assert_eq!(c.after_pass(polled, woke, t), None);
        }
    }

    #[test]
    fn a_saturated_loop_rests_a_tenth_of_the_time() {
        let t0 = Instant::now();
        let mut c = CoreShare::new(t0);
        let mut t = t0;
        let mut rested = Duration::ZERO;
        // One second of 250 µs passes whose poll returns at once (datagrams always waiting).
        while t < t0 + Duration::from_secs(1) {
            let polled = t;
            t += us(250);
            if let Some(rest) = c.after_pass(polled, polled, t) {
                assert_eq!(rest, REST);
                rested += rest;
                t += rest;
            }
        }
        // REST in every MAX_RUN + REST: about 91 ms in a second.
        let n = rested.as_millis();
        assert!((85..=95).contains(&n), "rested {n} ms in a second");
    }

    #[test]
    fn short_waits_do_not_count_as_the_core_being_free() {
        let t0 = Instant::now();
        let mut c = CoreShare::new(t0);
        let mut t = t0;
        let mut rests = 0;
        for _ in 0..100 {
            let polled = t;
            let woke = polled + us(20);
            t = woke + us(500);
            if c.after_pass(polled, woke, t).is_some() {
                rests += 1;
                t += REST;
            }
        }
        assert!(rests >= 4, "52 ms of work with 20 µs waits: {rests} rests");
    }
}
