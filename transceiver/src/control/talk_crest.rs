//! Room admission keeps for the crest of its PCM sessions' talking.
//!
//! A PCM session costs more while its backend talks (its encoder runs) than while it listens,
//! and backends talk and fall silent on their own. When they do so independently, the number
//! talking at once wanders like a coin count: with a core's worth of PCM sessions, each talking
//! half the time in turns of its own (`loadgen sessions --mode pcm --backend duty
//! --duty-random-gaps`), it wandered widely from one second to the next (docs/SESSION_COST.md,
//! "The 10/s overshoot, and talkers' crest"). The CPU window sees only the present count, so a
//! caller admitted while few talked finds the process past its limit once more do.
//!
//! So admission counts the talking sessions not as the window found them but at their crest:
//! `n·p + CREST_SIGMAS·√(n·p·(1−p))` of the `n` sessions that have talked, `p` the share of them
//! talking at once over the last [`SHARE_TIME_CONSTANT`], each at what its turns add
//! ([`TALK_SWING_OVER_FLOOR`] × its codecs' measured cost). What that adds over the window's own
//! count is [`TalkCrest::headroom`]: at the mean one sigma (`√(n/4)` sessions when half of them
//! talk), more in a trough, nothing at a crest. Independent talkers pass one sigma one second
//! in six and two sigmas one in forty; at the default limit of 0.85 two sigmas stay well under
//! the whole core.
//!
//! It does not help where the talkers keep a fixed rota (the benchmark's default duty backend:
//! their count hardly moves), nor against the machine's own drift: on a shared VM the same
//! work's CPU time moves from second to second (the same section of docs/SESSION_COST.md).
//!
//! Sans-IO: the control plane feeds it the talkers it learns of and samples of the loops'
//! count of PCM frames encoded (one per talking session per 20 ms).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::control::process_load::{RateWindow, WINDOW};
use crate::media::session::SessionId;

/// How long the share of sessions talking at once is averaged over (an exponential average):
/// several of a conversation's turns, so that one turn (or the first second every new session's
/// backend talks for) does not read as the long-run share.
pub const SHARE_TIME_CONSTANT: Duration = Duration::from_secs(10);

/// How far above the mean count of talkers admission plans for, in standard deviations.
pub const CREST_SIGMAS: f64 = 1.0;

/// What one more session talking adds to the process's CPU, as a multiple of its codecs'
/// measured floor (`codec_cost`). Less than a whole talking session's cost
/// (`codec_cost::TALKING_OVER_FLOOR`, 2): its decoding, packets and gRPC work go on while it
/// listens; what starts and stops with its turns is the encoder and the downlink packets.
/// A fit of the process's CPU against the talkers counted over the same second, at a constant
/// PCM session count with independent turns, came out below the floor, but the machine's own
/// drift dilutes it (its residuals were as large as the talkers' swing), so the floor itself is
/// counted (docs/SESSION_COST.md, "The 10/s overshoot, and talkers' crest").
pub const TALK_SWING_OVER_FLOOR: f64 = 1.0;

/// PCM frames a session encodes per second while it talks (20 ms frames).
const FRAMES_PER_TALKING_SECOND: f64 = 50.0;

#[derive(Debug)]
pub struct TalkCrest {
    /// Each PCM session whose backend has talked, with its cost while talking (a share of the
    /// usable cores).
    costs: HashMap<SessionId, f64>,
    /// The sum of `costs`' values.
    cost_sum: f64,
    /// Bound on `costs` (the registry's session bound).
    cap: usize,
    /// Frames encoded per second over the last [`WINDOW`].
    frames: RateWindow,
    /// Sessions talking at once, averaged over the window.
    talking: f64,
    /// Long-run share of the sessions in `costs` talking at once, and when it was last moved.
    share: Option<(f64, Instant)>,
}

impl TalkCrest {
    pub fn new(cap: usize) -> Self {
        TalkCrest {
            costs: HashMap::new(),
            cost_sum: 0.0,
            cap: cap.max(1),
            frames: RateWindow::new(WINDOW),
            talking: 0.0,
            share: None,
        }
    }

    /// Session `id`'s backend talked; while it talks the session costs `cost`.
    pub fn talked(&mut self, id: SessionId, cost: f64) {
        if !self.costs.contains_key(&id) && self.costs.len() >= self.cap {
            return;
        }
        if let Some(old) = self.costs.insert(id, cost) {
            self.cost_sum -= old;
        }
        self.cost_sum += cost;
    }

    /// Session `id` ended.
    pub fn ended(&mut self, id: SessionId) {
        if let Some(old) = self.costs.remove(&id) {
            self.cost_sum -= old;
        }
        if self.costs.is_empty() {
            // No drift of the floating-point sum outlives the sessions.
            self.cost_sum = 0.0;
        }
    }

    /// The loops had encoded `frames` PCM frames in all at `now` (a counter that only grows).
    pub fn sample(&mut self, now: Instant, frames: u64) {
        let Some(per_second) = self.frames.sample(now, frames) else {
            return;
        };
        self.talking = per_second / FRAMES_PER_TALKING_SECOND;
        let n = self.costs.len();
        if n == 0 {
            self.share = None;
            return;
        }
        let now_share = (self.talking / n as f64).min(1.0);
        self.share = Some(match self.share {
            None => (now_share, now),
            Some((share, at)) => {
                let dt = now.saturating_duration_since(at).as_secs_f64();
                let alpha = 1.0 - (-dt / SHARE_TIME_CONSTANT.as_secs_f64()).exp();
                (share + alpha * (now_share - share), now)
            }
        });
    }

    /// Sessions talking at once over the last window.
    pub fn talking(&self) -> f64 {
        self.talking
    }

    /// The long-run share of the sessions that have talked that talk at once.
    pub fn share(&self) -> f64 {
        self.share.map_or(0.0, |(s, _)| s)
    }

    /// Sessions that have talked and not ended.
    pub fn talkers(&self) -> usize {
        self.costs.len()
    }

    /// What the talkers' crest adds to the CPU window's ratio (a share of the usable cores):
    /// the talkers beyond those the window saw, at their mean cost. Nothing while the window
    /// sees a crest of its own.
    pub fn headroom(&self) -> f64 {
        let n = self.costs.len();
        if n == 0 {
            return 0.0;
        }
        let n_f = n as f64;
        let p = self.share().clamp(0.0, 1.0);
        let crest = n_f * p + CREST_SIGMAS * (n_f * p * (1.0 - p)).sqrt();
        let mean_cost = (self.cost_sum / n_f).max(0.0);
        mean_cost * (crest - self.talking).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// `n` talkers at `cost` each, and `secs` of samples every 100 ms with `talking` of them
    /// encoding; returns the crest and the next instant and frame count.
    fn steady(
        crest: &mut TalkCrest,
        t0: Instant,
        frames: u64,
        talking: f64,
        secs: u64,
    ) -> (Instant, u64) {
        let mut f = frames;
        let mut t = t0;
        for _ in 0..secs * 10 {
            t += ms(100);
            f += (talking * 5.0).round() as u64;
            crest.sample(t, f);
        }
        (t, f)
    }

    /// 100 sessions that have talked, at 0.01 of the cores each, and a first sample.
    fn hundred_talkers() -> (TalkCrest, Instant) {
        let mut c = TalkCrest::new(1000);
        for i in 0..100 {
            c.talked(SessionId(i), 0.01);
        }
        let t0 = Instant::now();
        c.sample(t0, 0);
        (c, t0)
    }

    #[test]
    fn the_window_counts_talkers_from_frames_encoded() {
        let mut c = TalkCrest::new(1000);
        let t0 = Instant::now();
        c.sample(t0, 0);
        // 40 sessions encoding for a second: 2,000 frames.
        steady(&mut c, t0, 0, 40.0, 2);
        assert!(close(c.talking(), 40.0), "{}", c.talking());
    }

    #[test]
    fn a_trough_gets_the_room_the_mean_and_a_sigma_need() {
        let (mut c, t0) = hundred_talkers();
        // Half of them talk, long enough for the share to settle at 0.5...
        let (t, f) = steady(&mut c, t0, 0, 50.0, 60);
        assert!((c.share() - 0.5).abs() < 0.01, "{}", c.share());
        // ...and at the mean the crest is one sigma (5 sessions) above it.
        assert!((c.headroom() - 0.05).abs() < 0.002, "{}", c.headroom());
        // Then a trough of 40 for a second: the window shows 10 fewer, and admission keeps
        // their room too (the share has barely moved).
        steady(&mut c, t, f, 40.0, 1);
        assert!((c.headroom() - 0.15).abs() < 0.01, "{}", c.headroom());
    }

    #[test]
    fn a_crest_the_window_already_shows_adds_nothing() {
        let (mut c, t0) = hundred_talkers();
        let (t, f) = steady(&mut c, t0, 0, 50.0, 60);
        steady(&mut c, t, f, 70.0, 1);
        assert_eq!(c.headroom(), 0.0);
    }

    #[test]
    fn the_share_follows_a_change_within_its_time_constant() {
        let (mut c, t0) = hundred_talkers();
        let (t, f) = steady(&mut c, t0, 0, 80.0, 30);
        assert!((c.share() - 0.8).abs() < 0.01, "{}", c.share());
        // Backends that talk less from now on: after one time constant the share has moved
        // about 63 % of the way, after five it is there.
        let (t, f) = steady(&mut c, t, f, 20.0, SHARE_TIME_CONSTANT.as_secs());
        assert!((c.share() - 0.42).abs() < 0.03, "{}", c.share());
        steady(&mut c, t, f, 20.0, 4 * SHARE_TIME_CONSTANT.as_secs());
        assert!((c.share() - 0.2).abs() < 0.01, "{}", c.share());
    }

    #[test]
    fn ended_sessions_leave_and_costs_are_means() {
        let mut c = TalkCrest::new(1000);
        c.talked(SessionId(1), 0.01);
        c.talked(SessionId(2), 0.03);
        c.talked(SessionId(2), 0.03); // reported twice: counted once
        assert_eq!(c.talkers(), 2);
        let t0 = Instant::now();
        c.sample(t0, 0);
        // Neither talks now, both did all along: the crest is both of them at their mean cost.
        c.share = Some((1.0, t0));
        assert!(close(c.headroom(), 0.04), "{}", c.headroom());
        c.ended(SessionId(2));
        c.ended(SessionId(2));
        assert_eq!(c.talkers(), 1);
        assert!(close(c.headroom(), 0.01), "{}", c.headroom());
        c.ended(SessionId(1));
        assert_eq!(c.headroom(), 0.0);
        assert_eq!(c.cost_sum, 0.0);
    }

    #[test]
    fn talkers_are_bounded_and_samples_too() {
        let mut c = TalkCrest::new(3);
        for i in 0..10 {
            c.talked(SessionId(i), 0.01);
        }
        assert_eq!(c.talkers(), 3, "no more talkers than sessions can exist");
        let t0 = Instant::now();
        for i in 0..1000 {
            c.sample(t0 + ms(10 * i), i * 10);
        }
        assert!(c.frames.len() <= 102, "{}", c.frames.len());
    }

    #[test]
    fn no_talkers_no_headroom_and_a_counter_that_stalls_reads_as_silence() {
        let mut c = TalkCrest::new(10);
        let t0 = Instant::now();
        c.sample(t0, 500);
        // The same instant twice spans no time: ignored rather than divided by.
        c.sample(t0, 900);
        assert_eq!(c.talking(), 0.0);
        c.sample(t0 + ms(100), 500);
        assert_eq!(c.talking(), 0.0);
        assert_eq!(c.headroom(), 0.0);
    }
}
