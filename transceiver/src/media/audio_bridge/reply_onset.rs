//! The reply's onset on the downlink: after the caller pauses, the first loud frame sent after
//! [`QUIET_BEFORE_ONSET`] of downlink quiet, with when the backend's audio holding it was queued
//! (for `media::turn_timing`'s split of a turn).
//!
//! Armed by the session when the caller pauses and disarmed when it speaks again, so it works
//! only between the two (about a second per turn). While armed it keeps when each queued run of
//! audio entered the session's downlink queue (the gRPC edge's stamp, `QueuedDownlink`; a short
//! ring; positions in samples played, the pacer's count), and looks at
//! each frame sent: loud when its mean square reaches [`LOUD_DBFS`] (PCM owners; the web
//! client's threshold), always for a passthrough owner's packets (they are not decoded). The
//! quiet gap keeps an echo of the caller's own speech tail, or a reply that overlapped the
//! speech, from counting as the answer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Downlink quiet (nothing sent, or only quiet frames) before a loud frame is a reply's onset.
pub const QUIET_BEFORE_ONSET: Duration = Duration::from_millis(100);
/// A frame is loud at this RMS level or more.
pub const LOUD_DBFS: f64 = -50.0;
/// Queued runs remembered while armed; more are not needed (the onset is in the first ones).
const RUNS: usize = 32;

/// The reply's first loud frame as the downlink pacer sent it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplyOnset {
    /// When the backend's audio holding it was queued at the transceiver.
    pub queued_at: Instant,
    /// When its packet was handed to str0m (to go out in the same loop pass).
    pub sent_at: Instant,
    pub rtp_timestamp: u32,
}

#[derive(Debug, Default)]
pub struct ReplyOnsetWatch {
    armed_at: Option<Instant>,
    last_loud: Option<Instant>,
    /// (position after the run, when it was queued), oldest first.
    runs: VecDeque<(u64, Instant)>,
    found: Option<ReplyOnset>,
}

/// The mean-square threshold of [`LOUD_DBFS`] for 16-bit samples.
fn loud_mean_square() -> f64 {
    let amplitude = 32768.0 * 10f64.powf(LOUD_DBFS / 20.0);
    amplitude * amplitude
}

/// Whether a PCM frame is loud (see [`LOUD_DBFS`]).
pub fn is_loud(pcm: &[i16]) -> bool {
    if pcm.is_empty() {
        return false;
    }
    let sum: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    sum / pcm.len() as f64 >= loud_mean_square()
}

impl ReplyOnsetWatch {
    pub fn arm(&mut self, now: Instant) {
        self.armed_at = Some(now);
        self.last_loud = Some(now);
        self.runs.clear();
        self.runs.reserve(RUNS);
        self.found = None;
    }

    pub fn disarm(&mut self) {
        self.armed_at = None;
        self.runs.clear();
    }

    pub fn armed(&self) -> bool {
        self.armed_at.is_some()
    }

    /// Audio queued at `now`, ending at sample position `end` (samples played + queued).
    pub fn on_queued(&mut self, now: Instant, end: u64) {
        if self.armed() && self.runs.len() < RUNS {
            self.runs.push_back((end, now));
        }
    }

    /// The queue was dropped (a clear): positions of remembered runs mean nothing now.
    pub fn on_cleared(&mut self) {
        self.runs.clear();
    }

    /// A frame sent at `now` holding samples from position `start`; `loud` as the pacer
    /// judged it. Returns whether it was the onset (the watch disarms).
    pub fn on_sent(&mut self, now: Instant, start: u64, rtp_timestamp: u32, loud: bool) -> bool {
        let (Some(armed_at), Some(last_loud)) = (self.armed_at, self.last_loud) else {
            return false;
        };
        while self.runs.front().is_some_and(|&(end, _)| end <= start) {
            self.runs.pop_front();
        }
        if !loud {
            return false;
        }
        if now.saturating_duration_since(last_loud) < QUIET_BEFORE_ONSET {
            self.last_loud = Some(now);
            return false;
        }
        // Queued before the watch was armed (the backend answered early): the arming bounds it.
        let queued_at = self.runs.front().map_or(armed_at, |&(_, at)| at);
        self.found = Some(ReplyOnset {
            queued_at,
            sent_at: now,
            rtp_timestamp,
        });
        self.disarm();
        true
    }

    pub fn take(&mut self) -> Option<ReplyOnset> {
        self.found.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_loud_frame_after_quiet_is_the_onset_with_its_runs_queue_time() {
        let t0 = Instant::now();
        let mut w = ReplyOnsetWatch::default();
        w.arm(t0);
        // Quiet for 300 ms, then the reply is queued in two runs at t0+300 and t0+310.
        w.on_queued(t0 + 300 * MS, 960);
        w.on_queued(t0 + 310 * MS, 1920);
        assert!(
            !w.on_sent(t0 + 305 * MS, 0, 100, false),
            "a quiet lead-in is not the onset"
        );
        assert!(w.on_sent(t0 + 325 * MS, 960, 1060, true));
        let onset = w.take().unwrap();
        assert_eq!(
            onset.queued_at,
            t0 + 310 * MS,
            "the run holding the loud frame"
        );
        assert_eq!((onset.sent_at, onset.rtp_timestamp), (t0 + 325 * MS, 1060));
        assert!(!w.armed());
        assert!(!w.on_sent(t0 + 400 * MS, 1920, 0, true), "found once");
    }

    #[test]
    fn an_echo_of_the_speech_tail_is_not_a_reply() {
        let t0 = Instant::now();
        let mut w = ReplyOnsetWatch::default();
        w.arm(t0);
        for i in 0..5 {
            assert!(!w.on_sent(t0 + i * 20 * MS, 0, 0, true), "tail frame {i}");
        }
        // 80 ms after the tail: still too close.
        assert!(!w.on_sent(t0 + 160 * MS, 0, 0, true));
        assert!(w.on_sent(t0 + 300 * MS, 0, 0, true));
        assert_eq!(
            w.take().unwrap().queued_at,
            t0,
            "queued before arming: the arming time"
        );
    }

    #[test]
    fn disarmed_or_cleared_it_finds_nothing_and_remembers_boundedly() {
        let t0 = Instant::now();
        let mut w = ReplyOnsetWatch::default();
        assert!(!w.on_sent(t0 + 500 * MS, 0, 0, true), "never armed");
        w.arm(t0);
        for i in 0..100 {
            w.on_queued(t0, i * 960);
        }
        assert_eq!(w.runs.len(), RUNS);
        w.on_cleared();
        assert!(w.runs.is_empty());
        w.disarm();
        assert!(!w.on_sent(t0 + 500 * MS, 0, 0, true));
        assert!(w.take().is_none());
    }

    #[test]
    fn loudness_is_the_web_clients_rms_threshold() {
        let tone = |amp: f64| -> Vec<i16> {
            (0..960)
                .map(|i| (amp * (i as f64 * 0.1).sin()) as i16)
                .collect()
        };
        // RMS of a sine is amplitude / √2: −50 dBFS RMS is an amplitude of about 146.
        assert!(is_loud(&tone(200.0)));
        assert!(!is_loud(&tone(100.0)));
        assert!(!is_loud(&[0; 960]));
        assert!(!is_loud(&[]));
    }
}
