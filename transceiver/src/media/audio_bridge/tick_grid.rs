//! The downlink's shared 20 ms clock: every session's tick falls on one of a few process-wide
//! grids.
//!
//! Why: a session used to start its 20 ms clock when its backend attached, so N sessions had
//! N phases and a loop woke up to 50 × N times a second just for ticks (most of them idle:
//! nothing to play, but the backend queue is polled). On shared grids one timer pass walks
//! every session due at that instant, and the frames they produce leave in the same
//! `sendmmsg` batches.
//!
//! Why [`PHASES`] grids and not one: a PCM session encodes a frame on its tick (~0.1 ms each),
//! and on a single grid a loop at its PCM capacity would encode for ~10 ms in one burst every
//! 20 ms. The loop still reads its socket between slices of a pass, but the control plane and
//! the gRPC hop get no CPU on a shared core until the burst ends, so uplink frames would reach
//! backends up to a burst late. Ten grids 2 ms apart cap a burst at a tenth of the sessions,
//! for at most 500 tick wakeups a second per loop whatever its session count.
//!
//! Pure arithmetic on `Instant`s; the epoch is taken once per process, so sessions on every
//! loop share it; a session's phase comes from its id.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::FRAME;

/// How many phase-shifted grids sessions are spread over.
pub const PHASES: u32 = 10;

/// A grid of instants `epoch + k × period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickGrid {
    epoch: Instant,
    period: Duration,
}

impl TickGrid {
    pub fn new(epoch: Instant, period: Duration) -> Self {
        TickGrid { epoch, period }
    }

    /// The process's 20 ms downlink grid of phase 0.
    pub fn shared() -> Self {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        TickGrid::new(*EPOCH.get_or_init(Instant::now), FRAME)
    }

    /// The shared grid of the session named `session_id`: phase `hash(id) mod PHASES`.
    pub fn for_session(session_id: &str) -> Self {
        // FNV-1a: stable across runs and builds, unlike std's randomly keyed hasher.
        let hash = session_id.bytes().fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        TickGrid::shared().phase(hash % PHASES, PHASES)
    }

    /// This grid shifted by `slot` / `slots` of a period.
    pub fn phase(self, slot: u32, slots: u32) -> Self {
        let shift = self.period * (slot % slots.max(1)) / slots.max(1);
        TickGrid::new(self.epoch + shift, self.period)
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
    fn phases_shift_the_grid_by_a_fraction_of_the_period() {
        let t0 = Instant::now();
        let g = TickGrid::new(t0, 20 * MS);
        assert_eq!(g.phase(0, 10), g);
        assert_eq!(g.phase(3, 10).first_after(t0), t0 + 6 * MS);
        assert_eq!(g.phase(9, 10).first_after(t0 + 19 * MS), t0 + 38 * MS);
        assert_eq!(g.phase(13, 10), g.phase(3, 10), "slots wrap");
    }

    #[test]
    fn a_session_keeps_its_phase_and_sessions_spread_over_every_phase() {
        let ids: Vec<String> = (0..200).map(|i| format!("{i:032x}")).collect();
        for id in &ids {
            assert_eq!(TickGrid::for_session(id), TickGrid::for_session(id));
        }
        let base = TickGrid::shared().epoch;
        let mut per_phase = [0usize; PHASES as usize];
        for id in &ids {
            let shift = TickGrid::for_session(id).epoch - base;
            let slot = (shift.as_nanos() * u128::from(PHASES) / FRAME.as_nanos()) as usize;
            per_phase[slot] += 1;
        }
        assert!(per_phase.iter().all(|&n| n >= 5), "{per_phase:?}");
    }
}
