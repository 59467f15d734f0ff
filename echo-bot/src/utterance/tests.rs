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
