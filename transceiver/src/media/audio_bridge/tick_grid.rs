//! The downlink's shared 20 ms clock: every session's tick falls on one of a few process-wide
//! grids.
//!
//! Why: a session used to start its 20 ms clock when its backend attached, so N sessions had
//! N phases and a loop woke up to 50 × N times a second just for ticks (most of them idle:
//! nothing to play, but the backend queue is polled). On shared grids one timer pass walks
//! every session due at that instant, and the frames they produce leave in the same
//! `sendmmsg` batches.
//!
//! Why [`PHASES`] grids and not one: a PCM session encodes a frame on its tick (most of its
//! CPU), and on a single grid a loop at its PCM capacity would do all its sessions' encoding in
//! one burst every 20 ms. The loop still reads its socket between slices of a pass, but the
//! control plane and the gRPC hop get no CPU on a shared core until the burst ends, so uplink
//! frames would reach backends up to a burst late. Ten grids 2 ms apart cap a burst at a tenth
//! of the sessions, for at most 500 tick wakeups a second per loop whatever its session count.
//!
//! Why passthrough sessions use only two of them while their loop is small
//! ([`TickGrid::for_owner`]): a passthrough tick moves one queued Opus packet, so spreading a
//! few hundred of them over ten grids bought no shorter burst worth having, and each of the ten
//! passes cost a wakeup of the loop, and often of the control thread the loop had just handed
//! uplink to. On two grids 10 ms apart a loop of passthrough sessions wakes for ticks 100 times
//! a second instead of 500: fewer context switches and less CPU per session-second, for a
//! longer uplink hand-off (longer passes; docs/SESSION_COST.md, "Passthrough ticks on two
//! grids"). Past [`COARSE_UP_TO`] sessions a loop's ticks are no longer what wakes it (its
//! packets are), and a coarse pass would grow: later sessions spread over every grid again.
//!
//! Both numbers are deployment settings ([`CoarseTicks`]: `--coarse-ticks-up-to`,
//! `--coarse-tick-grids`), defaulting to two grids up to 256 sessions. The default rests on one
//! load (two grids at 200 passthrough sessions), and 256 comes from a pass's length (see
//! [`COARSE_UP_TO`]), so a host whose backends want the shortest uplink hand-off can turn
//! coarse grids off, and one short of CPU can trade more hand-off for fewer wakeups.
//!
//! Pure arithmetic on `Instant`s; the epoch is taken once per process, so sessions on every
//! loop share it; a session's phase comes from its id.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::frame::FRAME;

/// How many phase-shifted grids sessions are spread over.
pub const PHASES: u32 = 10;
/// How many of those a passthrough session of a small loop uses by default: every fifth,
/// 10 ms apart.
pub const COARSE_PHASES: u32 = 2;
/// Sessions a loop holds up to which a new passthrough owner ticks on the coarse grids, by
/// default. At this size a coarse pass walks about 128 sessions, still a short pass if every
/// one plays a frame (a passthrough downlink packet is a queue pop, an RTP write and an SRTP
/// encryption), and the loop still reads its socket every 100 µs of a pass.
pub const COARSE_UP_TO: usize = 256;

/// Which passthrough owners tick on coarse grids, and on how many of the `PHASES` fine ones
/// (`--coarse-ticks-up-to`, `--coarse-tick-grids`). Each media loop holds a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoarseTicks {
    /// A passthrough owner of a loop holding at most this many sessions gets a coarse grid;
    /// 0: none does (every owner spreads over all `PHASES` grids, as PCM owners do).
    pub up_to: usize,
    /// How many evenly spaced fine grids the coarse owners share; one of
    /// [`CoarseTicks::GRID_CHOICES`] (the config refuses others).
    pub grids: u32,
}

impl CoarseTicks {
    /// The coarse grid counts that space their grids evenly: the divisors of `PHASES` below
    /// it (`PHASES` itself would be every grid, i.e. coarse ticks off). With any other count
    /// the coarse grids would sit unevenly, and the fullest would carry the longest pass.
    pub const GRID_CHOICES: [u32; 3] = [1, 2, 5];

    /// No coarse grids: every owner ticks on its session's own fine grid.
    pub const OFF: CoarseTicks = CoarseTicks {
        up_to: 0,
        grids: COARSE_PHASES,
    };

    /// Whether `grids` is one of [`CoarseTicks::GRID_CHOICES`].
    pub fn allows_grids(grids: u32) -> bool {
        Self::GRID_CHOICES.contains(&grids)
    }
}

impl Default for CoarseTicks {
    /// Two grids 10 ms apart for loops of up to 256 sessions (the module comment says why).
    fn default() -> Self {
        CoarseTicks {
            up_to: COARSE_UP_TO,
            grids: COARSE_PHASES,
        }
    }
}

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
        TickGrid::shared().phase(slot_of(session_id), PHASES)
    }

    /// The grid an owner's ticks fall on: a passthrough owner (`cheap_ticks`) of a loop that
    /// holds at most `coarse.up_to` sessions gets one of the `coarse.grids` coarse grids,
    /// which are fine grids too; anything else gets [`TickGrid::for_session`].
    pub fn for_owner(
        session_id: &str,
        cheap_ticks: bool,
        loop_sessions: usize,
        coarse: CoarseTicks,
    ) -> Self {
        let slot = slot_of(session_id);
        if cheap_ticks && coarse.up_to > 0 && loop_sessions <= coarse.up_to {
            // Rounding the fine phase down to a multiple of the stride keeps the hash's even
            // spread: each coarse grid takes the owners of `stride` fine ones.
            let stride = PHASES / coarse.grids.clamp(1, PHASES);
            return TickGrid::shared().phase(slot - slot % stride, PHASES);
        }
        TickGrid::shared().phase(slot, PHASES)
    }

    /// This grid shifted by `slot` / `slots` of a period.
    pub fn phase(self, slot: u32, slots: u32) -> Self {
        let shift = self.period * (slot % slots.max(1)) / slots.max(1);
        TickGrid::new(self.epoch + shift, self.period)
    }

    /// Which of the `PHASES` fine grids this is (its shift from the shared epoch).
    #[cfg(test)]
    fn slot(&self) -> u32 {
        let shift = self.epoch - TickGrid::shared().epoch;
        (shift.as_nanos() * u128::from(PHASES) / self.period.as_nanos()) as u32
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

/// A session's fine phase: `hash(id) mod PHASES`.
fn slot_of(session_id: &str) -> u32 {
    // FNV-1a: stable across runs and builds, unlike std's randomly keyed hasher.
    let hash = session_id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash % PHASES
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
        let mut per_phase = [0usize; PHASES as usize];
        for id in &ids {
            per_phase[TickGrid::for_session(id).slot() as usize] += 1;
        }
        assert!(per_phase.iter().all(|&n| n >= 5), "{per_phase:?}");
    }

    /// How many of `ids` land on each fine grid as owners.
    fn owners_per_phase(
        ids: &[String],
        cheap: bool,
        loop_sessions: usize,
        coarse: CoarseTicks,
    ) -> Vec<usize> {
        let mut per_phase = vec![0usize; PHASES as usize];
        for id in ids {
            per_phase[TickGrid::for_owner(id, cheap, loop_sessions, coarse).slot() as usize] += 1;
        }
        per_phase
    }

    fn phases_in_use(per_phase: &[usize]) -> Vec<usize> {
        (0..per_phase.len()).filter(|&p| per_phase[p] > 0).collect()
    }

    fn session_ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{i:032x}")).collect()
    }

    #[test]
    fn passthrough_owners_of_a_small_loop_share_two_grids_10_ms_apart() {
        let ids = session_ids(200);
        let coarse = owners_per_phase(&ids, true, COARSE_UP_TO, CoarseTicks::default());
        assert_eq!(phases_in_use(&coarse), vec![0, 5], "{coarse:?}");
        assert!(
            coarse[0] >= 60 && coarse[5] >= 60,
            "both in use: {coarse:?}"
        );
        // A coarse grid is one of the fine ones: a loop with PCM sessions too gains no pass.
        for id in &ids {
            let g = TickGrid::for_owner(id, true, 1, CoarseTicks::default());
            assert!((0..PHASES).any(|p| g == TickGrid::shared().phase(p, PHASES)));
            assert_eq!(
                g,
                TickGrid::for_owner(id, true, 1, CoarseTicks::default()),
                "stable"
            );
        }
    }

    #[test]
    fn pcm_owners_and_owners_of_a_large_loop_spread_over_every_grid() {
        let ids = session_ids(200);
        let pcm = owners_per_phase(&ids, false, 1, CoarseTicks::default());
        assert!(pcm.iter().all(|&n| n >= 5), "pcm: {pcm:?}");
        let large = owners_per_phase(&ids, true, COARSE_UP_TO + 1, CoarseTicks::default());
        assert!(large.iter().all(|&n| n >= 5), "large loop: {large:?}");
        for id in &ids {
            assert_eq!(
                TickGrid::for_owner(id, false, 1, CoarseTicks::default()),
                TickGrid::for_session(id)
            );
        }
    }

    #[test]
    fn five_coarse_grids_are_every_other_phase_and_share_owners_evenly() {
        let five = CoarseTicks {
            grids: 5,
            ..CoarseTicks::default()
        };
        let ids = session_ids(5_000);
        let per_phase = owners_per_phase(&ids, true, COARSE_UP_TO, five);
        assert_eq!(
            phases_in_use(&per_phase),
            vec![0, 2, 4, 6, 8],
            "stride 2 (4 ms): {per_phase:?}"
        );
        // Each coarse grid takes the owners of two fine ones: a fifth of them, give or take a
        // tenth of that (1,000 ± 100 of 5,000).
        for p in [0, 2, 4, 6, 8] {
            assert!(
                (900..=1_100).contains(&per_phase[p]),
                "phase {p} uneven: {per_phase:?}"
            );
        }
        // Past `up_to` the setting no longer applies.
        let large = owners_per_phase(&ids, true, COARSE_UP_TO + 1, five);
        assert_eq!(phases_in_use(&large).len(), PHASES as usize, "{large:?}");
    }

    #[test]
    fn one_coarse_grid_puts_every_passthrough_owner_on_the_same_phase() {
        let one = CoarseTicks {
            grids: 1,
            ..CoarseTicks::default()
        };
        let per_phase = owners_per_phase(&session_ids(200), true, 1, one);
        assert_eq!(phases_in_use(&per_phase), vec![0], "{per_phase:?}");
        assert_eq!(per_phase[0], 200);
    }

    #[test]
    fn with_coarse_ticks_off_a_passthrough_owner_gets_its_fine_grid() {
        let off = CoarseTicks {
            up_to: 0,
            ..CoarseTicks::default()
        };
        let ids = session_ids(200);
        for id in &ids {
            // Whatever the loop's size, even an (impossible) empty one.
            for loop_sessions in [0, 1, COARSE_UP_TO] {
                assert_eq!(
                    TickGrid::for_owner(id, true, loop_sessions, off),
                    TickGrid::for_session(id),
                    "{id} in a loop of {loop_sessions}"
                );
            }
        }
        let per_phase = owners_per_phase(&ids, true, 1, off);
        assert!(per_phase.iter().all(|&n| n >= 5), "{per_phase:?}");
    }

    #[test]
    fn the_grid_choices_are_the_divisors_of_the_phases_below_them() {
        let divisors: Vec<u32> = (1..PHASES).filter(|&k| PHASES.is_multiple_of(k)).collect();
        assert_eq!(CoarseTicks::GRID_CHOICES.to_vec(), divisors);
        assert!(CoarseTicks::allows_grids(CoarseTicks::default().grids));
        for bad in [0, 3, 4, PHASES, PHASES * 2] {
            assert!(!CoarseTicks::allows_grids(bad), "{bad}");
        }
    }
}
