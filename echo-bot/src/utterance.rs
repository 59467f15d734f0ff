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
mod tests;
