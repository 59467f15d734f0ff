//! The echo bot's whole conversational logic, Sans-IO: caller audio frames and a clock go in,
//! what to say (or to stop saying) comes out.
//!
//! An energy VAD classifies each frame as voiced when its RMS level reaches `speech_db` dBFS.
//! Hysteresis keeps clicks from counting as speech and short pauses from ending it:
//!
//! ```text
//!            onset_frames voiced in a row              silence of `silence` (frames or a stall)
//!   Idle ─────────────────────────────────► Speaking ─────────────────────────────────► Idle
//!    ▲        (Clear first if a reply is     │   emits PlayUtterance(voiced audio)
//!    │         still playing: barge-in)      │
//!    │                                       │ utterance reaches `max_utterance`
//!    │   silence of `silence`                ▼   emits PlayUtterance(what was heard)
//!    └──────────────────────────────── Draining (the caller is still talking: ignore it)
//! ```
//!
//! With `continuous`, an utterance cut at `max_utterance` goes on in `Speaking` instead of
//! `Draining`: long speech comes back piece by piece, each piece queued behind the last, so a
//! caller who talks on hears an unbroken reply delayed by `max_utterance` (a delay line). Tests
//! use it for a downlink that flows for as long as the uplink does.
//!
//! Whether a reply is still playing is the machine's own estimate (when a reply was handed out
//! plus its length), stretched by the transceiver's `PlaybackProgress.queued_ms`
//! ([`Utterances::handle_progress`]). Time inside the stream is counted in samples, so a test
//! feeding frames gets the same answer whatever the wall clock does; `now` only matters for
//! playback and for an uplink that stalls (no frames at all, e.g. a client that stops
//! sending in silence), which [`Utterances::poll_timeout`] / [`Utterances::handle_timeout`]
//! treat as silence.

use std::time::{Duration, Instant};

/// Tuning of the VAD and of utterances.
#[derive(Debug, Clone, PartialEq)]
pub struct VadConfig {
    /// Sample rate of the frames (and of the replies), in Hz.
    pub sample_rate_hz: u32,
    /// A frame whose RMS level reaches this many dBFS is voiced.
    pub speech_db: f32,
    /// Consecutive voiced frames that start speech.
    pub onset_frames: u32,
    /// Unvoiced audio (or no audio at all) that ends an utterance.
    pub silence: Duration,
    /// Longest utterance; longer speech is cut and played as it stands.
    pub max_utterance: Duration,
    /// Speech past `max_utterance` is cut into further pieces, each played in turn, instead of
    /// being ignored until the caller pauses.
    pub continuous: bool,
}

impl Default for VadConfig {
    fn default() -> Self {
        VadConfig {
            sample_rate_hz: 48_000,
            speech_db: -45.0,
            onset_frames: 2,
            silence: Duration::from_millis(600),
            max_utterance: Duration::from_secs(15),
            continuous: false,
        }
    }
}

/// What the session should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this audio (PCM16 mono at the configured rate) to the caller.
    PlayUtterance(Vec<i16>),
    /// The caller talks over the reply: drop whatever is still queued for playback.
    Clear,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Speaking,
    Draining,
}

/// The VAD and utterance state machine of one session.
#[derive(Debug)]
pub struct Utterances {
    cfg: VadConfig,
    phase: Phase,
    /// Silence (in samples) that ends an utterance, and the longest utterance (in samples).
    silence_samples: usize,
    max_samples: usize,
    /// Idle: the voiced frames of the current onset run. Speaking: the utterance so far.
    heard: Vec<i16>,
    voiced_run: u32,
    /// Speaking: length of `heard` at the end of its last voiced frame (trailing silence is
    /// trimmed from the reply).
    voiced_len: usize,
    /// Unvoiced samples since the last voiced frame (Speaking, Draining).
    silent_samples: usize,
    last_frame_at: Option<Instant>,
    /// When the reply handed out last is expected to have finished playing.
    playing_until: Option<Instant>,
}

impl Utterances {
    /// A machine in the idle state. `onset_frames` below 1 counts as 1.
    pub fn new(cfg: VadConfig) -> Self {
        let rate = u128::from(cfg.sample_rate_hz);
        let samples =
            |d: Duration| usize::try_from(d.as_micros() * rate / 1_000_000).unwrap_or(usize::MAX);
        Utterances {
            silence_samples: samples(cfg.silence).max(1),
            max_samples: samples(cfg.max_utterance).max(1),
            cfg: VadConfig {
                onset_frames: cfg.onset_frames.max(1),
                ..cfg
            },
            phase: Phase::Idle,
            heard: Vec::new(),
            voiced_run: 0,
            voiced_len: 0,
            silent_samples: 0,
            last_frame_at: None,
            playing_until: None,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &VadConfig {
        &self.cfg
    }

    /// Whether the caller is in the middle of an utterance (speech started, not yet ended).
    pub fn is_speaking(&self) -> bool {
        self.phase == Phase::Speaking
    }

    /// Whether a reply handed out earlier is (estimated to be) still playing at `now`.
    pub fn is_playing(&self, now: Instant) -> bool {
        self.playing_until.is_some_and(|t| now < t)
    }

    /// One frame of caller audio (PCM16 mono at the configured rate, any length; the
    /// transceiver sends 20 ms) received at `now`.
    pub fn handle_frame(&mut self, now: Instant, pcm: &[i16]) -> Option<Action> {
        self.last_frame_at = Some(now);
        let voiced = level_dbfs(pcm) >= self.cfg.speech_db;
        match self.phase {
            Phase::Idle => {
                if !voiced {
                    self.voiced_run = 0;
                    self.heard.clear();
                    return None;
                }
                self.voiced_run += 1;
                self.heard.extend_from_slice(pcm);
                if self.voiced_run < self.cfg.onset_frames {
                    return None;
                }
                self.phase = Phase::Speaking;
                self.voiced_run = 0;
                self.voiced_len = self.heard.len();
                self.silent_samples = 0;
                if self.is_playing(now) {
                    self.playing_until = None;
                    return Some(Action::Clear);
                }
                self.check_max(now)
            }
            Phase::Speaking => {
                self.heard.extend_from_slice(pcm);
                if voiced {
                    self.voiced_len = self.heard.len();
                    self.silent_samples = 0;
                } else {
                    self.silent_samples += pcm.len();
                    if self.silent_samples >= self.silence_samples {
                        return Some(self.finish(now, Phase::Idle));
                    }
                }
                self.check_max(now)
            }
            Phase::Draining => {
                if voiced {
                    self.silent_samples = 0;
                } else {
                    self.silent_samples += pcm.len();
                    if self.silent_samples >= self.silence_samples {
                        self.phase = Phase::Idle;
                    }
                }
                None
            }
        }
    }

    /// The transceiver reported `queued_ms` of reply audio still waiting at `now`.
    pub fn handle_progress(&mut self, now: Instant, queued_ms: u64) {
        // A report of 0 may predate the latest reply's arrival at the transceiver; the own
        // estimate ends on its own, so only a longer queue moves anything.
        if queued_ms > 0 {
            let until = now + Duration::from_millis(queued_ms);
            self.playing_until = Some(self.playing_until.map_or(until, |t| t.max(until)));
        }
    }

    /// When [`Utterances::handle_timeout`] must be called if no frame arrives before then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.phase == Phase::Idle {
            return None;
        }
        let left = self.silence_samples.saturating_sub(self.silent_samples) as u64;
        let left =
            Duration::from_micros(left * 1_000_000 / u64::from(self.cfg.sample_rate_hz.max(1)));
        self.last_frame_at.map(|t| t + left)
    }

    /// Time passes with no frames: an uplink that stalls as long as the silence window ends
    /// the utterance.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Action> {
        if self.poll_timeout().is_none_or(|t| now < t) {
            return None;
        }
        match self.phase {
            Phase::Speaking => Some(self.finish(now, Phase::Idle)),
            Phase::Draining => {
                self.phase = Phase::Idle;
                None
            }
            Phase::Idle => None,
        }
    }

    fn check_max(&mut self, now: Instant) -> Option<Action> {
        let next = if self.cfg.continuous {
            Phase::Speaking
        } else {
            Phase::Draining
        };
        (self.heard.len() >= self.max_samples).then(|| self.finish(now, next))
    }

    /// Ends the utterance: hands out its voiced part and counts it as playing from `now`.
    fn finish(&mut self, now: Instant, next: Phase) -> Action {
        self.heard.truncate(self.voiced_len);
        let reply = std::mem::take(&mut self.heard);
        let rate = u64::from(self.cfg.sample_rate_hz.max(1));
        let length = Duration::from_micros(reply.len() as u64 * 1_000_000 / rate);
        let start = self.playing_until.map_or(now, |t| t.max(now));
        self.playing_until = Some(start + length);
        self.phase = next;
        self.voiced_len = 0;
        self.silent_samples = 0;
        self.voiced_run = 0;
        Action::PlayUtterance(reply)
    }
}

/// RMS level of `pcm` in dBFS (0 = a full-scale square wave, a full-scale sine is about -3);
/// negative infinity for silence or an empty slice.
pub fn level_dbfs(pcm: &[i16]) -> f32 {
    if pcm.is_empty() {
        return f32::NEG_INFINITY;
    }
    let energy: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    let rms = (energy / pcm.len() as f64).sqrt();
    (20.0 * (rms / 32768.0).log10()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    const FRAME: Duration = Duration::from_millis(20);

    /// Feeds 20 ms frames at the machine's rate with a fake clock, collecting actions.
    struct Feed {
        m: Utterances,
        now: Instant,
        phase: f64,
        actions: Vec<(usize, Action)>,
        frames: usize,
    }

    impl Feed {
        fn new(cfg: VadConfig) -> Self {
            Feed {
                m: Utterances::new(cfg),
                now: Instant::now(),
                phase: 0.0,
                actions: Vec::new(),
                frames: 0,
            }
        }

        fn frame_len(&self) -> usize {
            self.m.config().sample_rate_hz as usize / 50
        }

        /// `n` frames of a 440 Hz sine with peak `amp` (fraction of full scale); 0 = silence.
        fn tone(&mut self, n: usize, amp: f64) {
            let rate = f64::from(self.m.config().sample_rate_hz);
            for _ in 0..n {
                let pcm: Vec<i16> = (0..self.frame_len())
                    .map(|_| {
                        let s = amp * 32767.0 * (2.0 * PI * self.phase).sin();
                        self.phase = (self.phase + 440.0 / rate).fract();
                        s.round() as i16
                    })
                    .collect();
                self.push(&pcm);
            }
        }

        fn silence(&mut self, n: usize) {
            self.tone(n, 0.0);
        }

        fn push(&mut self, pcm: &[i16]) {
            if let Some(a) = self.m.handle_frame(self.now, pcm) {
                self.actions.push((self.frames, a));
            }
            self.frames += 1;
            self.now += FRAME;
        }

        fn plays(&self) -> Vec<(usize, usize)> {
            self.actions
                .iter()
                .filter_map(|(i, a)| match a {
                    Action::PlayUtterance(pcm) => Some((*i, pcm.len())),
                    Action::Clear => None,
                })
                .collect()
        }

        fn clears(&self) -> Vec<usize> {
            self.actions
                .iter()
                .filter(|(_, a)| *a == Action::Clear)
                .map(|(i, _)| *i)
                .collect()
        }
    }

    fn cfg(rate: u32) -> VadConfig {
        VadConfig {
            sample_rate_hz: rate,
            ..VadConfig::default()
        }
    }

    #[test]
    fn level_of_full_scale_sine_is_about_minus_three_dbfs() {
        let pcm: Vec<i16> = (0..960)
            .map(|i| (32767.0 * (2.0 * PI * 1000.0 * f64::from(i) / 48_000.0).sin()) as i16)
            .collect();
        let db = level_dbfs(&pcm);
        assert!((db + 3.01).abs() < 0.1, "{db}");
        assert_eq!(level_dbfs(&[0; 960]), f32::NEG_INFINITY);
        assert_eq!(level_dbfs(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn silence_produces_nothing() {
        let mut f = Feed::new(cfg(48_000));
        f.silence(500);
        assert!(f.actions.is_empty());
        assert_eq!(f.m.poll_timeout(), None);
    }

    #[test]
    fn tone_burst_then_silence_is_exactly_one_utterance_at_every_rate() {
        for rate in [16_000, 24_000, 48_000] {
            let mut f = Feed::new(cfg(rate));
            f.silence(10);
            f.tone(50, 0.3); // 1 s
            f.silence(100); // 2 s
            let frame = rate as usize / 50;
            // Ends after 600 ms = 30 silent frames; the reply is the voiced second, no tail.
            assert_eq!(f.plays(), vec![(10 + 50 + 29, 50 * frame)], "rate {rate}");
            assert!(f.clears().is_empty());
        }
    }

    #[test]
    fn one_voiced_frame_is_not_speech() {
        let mut f = Feed::new(cfg(48_000));
        for _ in 0..20 {
            f.tone(1, 0.5);
            f.silence(3);
        }
        f.silence(50);
        assert!(f.actions.is_empty());
    }

    #[test]
    fn quiet_tone_below_threshold_is_silence() {
        let mut f = Feed::new(cfg(48_000));
        f.tone(100, 0.003); // about -53 dBFS
        f.silence(50);
        assert!(f.actions.is_empty());
    }

    #[test]
    fn short_pause_does_not_split_the_utterance() {
        let mut f = Feed::new(cfg(48_000));
        f.tone(25, 0.3);
        f.silence(20); // 400 ms < 600 ms
        f.tone(25, 0.3);
        f.silence(40);
        assert_eq!(f.plays(), vec![(25 + 20 + 25 + 29, 70 * 960)]);
    }

    #[test]
    fn talking_over_the_reply_clears_it_on_the_second_voiced_frame() {
        let mut f = Feed::new(cfg(48_000));
        f.tone(50, 0.3);
        f.silence(30); // utterance 1 ends at frame 79; its 1 s reply plays until frame 129
        f.silence(10);
        f.tone(50, 0.3); // barge-in at frames 90, 91
        f.silence(40);
        assert_eq!(f.clears(), vec![91]);
        assert_eq!(f.plays(), vec![(79, 50 * 960), (90 + 50 + 29, 50 * 960)]);
    }

    #[test]
    fn speaking_after_the_reply_ended_is_no_barge_in() {
        let mut f = Feed::new(cfg(48_000));
        f.tone(50, 0.3);
        f.silence(30 + 60); // reply (1 s) is over by now
        f.tone(50, 0.3);
        f.silence(40);
        assert!(f.clears().is_empty());
        assert_eq!(f.plays().len(), 2);
    }

    #[test]
    fn queued_progress_extends_playback() {
        let mut f = Feed::new(cfg(48_000));
        f.tone(50, 0.3);
        f.silence(30);
        // The transceiver still has 3 s queued (it started late, or playback is slow).
        f.m.handle_progress(f.now, 3_000);
        f.silence(100); // 2 s later: own estimate is over, the transceiver's is not
        f.tone(10, 0.3);
        assert_eq!(f.clears(), vec![50 + 30 + 100 + 1]);
        // A stale progress of 0 does not cut a reply short.
        let mut g = Feed::new(cfg(48_000));
        g.tone(50, 0.3);
        g.silence(30);
        g.m.handle_progress(g.now, 0);
        g.tone(2, 0.3);
        assert_eq!(g.clears(), vec![81]);
    }

    #[test]
    fn long_speech_is_cut_at_max_and_the_rest_ignored() {
        let mut f = Feed::new(VadConfig {
            max_utterance: Duration::from_secs(2),
            ..cfg(16_000)
        });
        f.tone(250, 0.3); // 5 s of talking
        f.silence(40);
        assert_eq!(f.plays(), vec![(99, 100 * 320)]);
        assert!(f.clears().is_empty(), "talking past the cut is no barge-in");
        // After a pause, speech counts again.
        f.tone(20, 0.3);
        f.silence(40);
        assert_eq!(f.plays().len(), 2);
    }

    #[test]
    fn continuous_mode_plays_long_speech_piece_by_piece_without_gaps() {
        let mut f = Feed::new(VadConfig {
            max_utterance: Duration::from_secs(2),
            continuous: true,
            ..cfg(16_000)
        });
        f.tone(250, 0.3); // 5 s of talking
        f.silence(40);
        // Cut at 2 s and 4 s; the last second ends with the silence (30 frames later).
        assert_eq!(
            f.plays(),
            vec![(99, 100 * 320), (199, 100 * 320), (250 + 29, 50 * 320)]
        );
        assert!(f.clears().is_empty(), "talking on is no barge-in");
        // Each piece is queued behind the one before: the reply is one unbroken stream.
        let first_cut = f.now - FRAME * (290 - 99);
        assert!(f.m.is_playing(first_cut + Duration::from_millis(4_999)));
        assert!(!f.m.is_playing(first_cut + Duration::from_millis(5_001)));
    }

    #[test]
    fn stalled_uplink_ends_the_utterance() {
        let mut f = Feed::new(cfg(24_000));
        f.tone(50, 0.3);
        f.silence(10); // 200 ms of silent frames, then nothing at all
        let last = f.now - FRAME;
        let deadline = f.m.poll_timeout().unwrap();
        assert_eq!(deadline, last + Duration::from_millis(400));
        assert_eq!(
            f.m.handle_timeout(deadline - Duration::from_millis(1)),
            None
        );
        match f.m.handle_timeout(deadline) {
            Some(Action::PlayUtterance(pcm)) => assert_eq!(pcm.len(), 50 * 480),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.m.poll_timeout(), None);
        assert!(f.m.is_playing(deadline));
        assert!(!f.m.is_playing(deadline + Duration::from_secs(1)));
    }
}
