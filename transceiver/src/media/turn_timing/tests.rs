use super::*;

const LOUD: Option<i8> = Some(-20);
const QUIET: Option<i8> = Some(-127);
const FRAME: Duration = Duration::from_millis(20);

/// A caller's packets on a fake clock: each arrives at `t` and reaches the backend 1 ms later.
struct Caller {
    timer: TurnTimer,
    t: Instant,
    watch: Vec<OnsetWatch>,
}

impl Caller {
    fn new() -> Self {
        Caller {
            timer: TurnTimer::default(),
            t: Instant::now(),
            watch: Vec::new(),
        }
    }

    fn packets(&mut self, level: Option<i8>, n: u32) {
        for _ in 0..n {
            let handled = self.t + Duration::from_millis(1);
            if let Some(w) = self.timer.on_uplink_level(level, self.t, handled) {
                self.watch.push(w);
            }
            self.t += FRAME;
        }
    }

    /// The reply's onset: queued `backend` after `at`, sent 5 ms later.
    fn onset(&mut self, at: Instant, backend_ms: u64, ts: u32) -> ReplyOnset {
        let queued_at = at + Duration::from_millis(backend_ms);
        let onset = ReplyOnset {
            queued_at,
            sent_at: queued_at + Duration::from_millis(5),
            rtp_timestamp: ts,
        };
        self.timer.on_reply_onset(onset);
        onset
    }
}

fn report(heard_ms: f64, ts: Option<u32>) -> String {
    serde_json::json!({
        "type": "turn.report",
        "speech_end_to_heard_ms": heard_ms,
        "rtp_timestamp": ts,
        "jitter_buffer_ms": 40.0,
        "playout_ms": 10.0,
        "rtt_ms": 30.0,
    })
    .to_string()
}

#[test]
fn a_turn_splits_into_parts_that_sum_to_its_total() {
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    let last_loud = c.t - FRAME;
    c.packets(QUIET, 5);
    assert_eq!(
        c.watch,
        [OnsetWatch::Arm],
        "the first quiet packet arms the pacer"
    );
    // The backend answers 600 ms after it got the last speech packet (at last_loud + 1 ms).
    c.onset(last_loud + Duration::from_millis(1), 600, 48_000);
    assert_eq!(c.timer.turns_seen(), 1);

    // The browser heard it 700 ms after its microphone went quiet; RTCP says 20 ms RTT.
    let split = c
        .timer
        .on_client_report(report(700.0, Some(48_000 + 960)).as_bytes(), Some(20.0))
        .expect("matched");
    assert_eq!(split.turn, 1);
    assert!((split.transceiver_up_ms - 1.0).abs() < 1e-9);
    assert!((split.backend_ms - 600.0).abs() < 1e-9);
    assert!((split.transceiver_down_ms - 5.0).abs() < 1e-9);
    assert_eq!((split.network_up_ms, split.network_down_ms), (10.0, 10.0));
    assert_eq!(split.rtt_source, "rtcp");
    assert_eq!(
        (split.jitter_buffer_ms, split.playout_ms),
        (40.0, Some(10.0))
    );
    // 700 − 606 (the transceiver's span) − 20 (RTT) − 40 (jitter buffer).
    assert!((split.capture_send_ms - 34.0).abs() < 1e-9);
    let sum: f64 = split.parts().iter().map(|(_, ms, _)| ms).sum();
    assert!(
        (sum - split.total_ms).abs() < 1e-9,
        "{sum} vs {}",
        split.total_ms
    );
    assert_eq!(split.total_ms, 710.0);
    let json: serde_json::Value = serde_json::from_str(&split.to_client_json()).unwrap();
    assert_eq!(json["type"], "turn.latency");
    assert_eq!(json["parts"].as_array().unwrap().len(), 8);
    assert_eq!(json["parts"][3]["name"], "backend");
    assert_eq!(json["parts"][3]["source"], "measured");
    assert_eq!(json["parts"][0]["source"], "estimated");
    assert_eq!(json["parts"][6]["source"], "client");
    assert_eq!(c.timer.splits().count(), 1);
}

#[test]
fn a_breath_is_not_a_turn_and_a_reply_heard_in_it_is_forgotten() {
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    c.packets(QUIET, 5); // 100 ms: less than the hangover
    let t = c.t;
    c.onset(t, 0, 1000);
    c.packets(LOUD, 10);
    c.packets(QUIET, 20);
    assert_eq!(c.timer.turns_seen(), 0, "the onset came during a breath");
    assert_eq!(c.watch, [OnsetWatch::Arm, OnsetWatch::Arm]);
    // The speech goes on after the breath, the pacer looking again (the second Arm).
    c.packets(LOUD, 3);
    c.packets(LOUD, 3);
    assert_eq!(c.watch.last(), Some(&OnsetWatch::Disarm));
}

#[test]
fn a_click_shorter_than_a_spurt_neither_arms_nor_ends_a_turn() {
    let mut c = Caller::new();
    c.packets(LOUD, MIN_SPURT_PACKETS - 1);
    c.packets(QUIET, 30);
    assert!(c.watch.is_empty());
    let t = c.t;
    c.onset(t, 0, 0);
    assert_eq!(c.timer.turns_seen(), 0);
}

#[test]
fn a_click_after_the_end_of_speech_does_not_cancel_the_turn() {
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    c.packets(QUIET, 15);
    c.packets(LOUD, 2);
    c.packets(QUIET, 5);
    let t = c.t;
    c.onset(t, 0, 0);
    assert_eq!(c.timer.turns_seen(), 1);
}

#[test]
fn a_reply_inside_the_hangover_counts_once_the_quiet_lasts() {
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    let end = c.t - FRAME;
    c.packets(QUIET, 3);
    c.onset(end, 80, 7);
    assert_eq!(c.timer.turns_seen(), 0, "the pause is not a turn's end yet");
    c.packets(QUIET, 20);
    assert_eq!(c.timer.turns_seen(), 1);
}

#[test]
fn a_caller_silent_between_spurts_ends_its_turn_at_the_onset() {
    // DTX: no packets while quiet. The first quiet packet (the spurt's last) arms, and the
    // reply, far enough after the last speech, completes the turn on its own.
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    let end = c.t - FRAME;
    c.packets(QUIET, 1);
    c.onset(end, 400, 0);
    assert_eq!(c.timer.turns_seen(), 1);
}

#[test]
fn packets_without_an_audio_level_make_no_turns() {
    let mut c = Caller::new();
    c.packets(None, 50);
    let t = c.t;
    c.onset(t, 0, 0);
    assert!(c.watch.is_empty());
    assert_eq!(c.timer.turns_seen(), 0);
}

/// One complete turn whose onset has RTP timestamp `ts`; returns the caller.
fn one_turn(ts: u32) -> Caller {
    let mut c = Caller::new();
    c.packets(LOUD, 20);
    let end = c.t - FRAME;
    c.packets(QUIET, 15);
    c.onset(end, 300, ts);
    c
}

#[test]
fn every_bad_report_is_dropped_and_counted_by_reason() {
    let mut c = one_turn(5_000);
    let long = format!(r#"{{"type":"turn.report","pad":"{}"}}"#, "x".repeat(600));
    let cases: Vec<(String, ReportDrop)> = vec![
        ("not json".into(), ReportDrop::Malformed),
        (long, ReportDrop::Malformed),
        (
            r#"{"type":"chat","speech_end_to_heard_ms":1}"#.into(),
            ReportDrop::Malformed,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":900,"extra":1}"#.into(),
            ReportDrop::Malformed,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":"900"}"#.into(),
            ReportDrop::Malformed,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":-5}"#.into(),
            ReportDrop::Implausible,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":1e300}"#.into(),
            ReportDrop::Implausible,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":900,"jitter_buffer_ms":36000000}"#
                .into(),
            ReportDrop::Implausible,
        ),
        (
            r#"{"type":"turn.report","speech_end_to_heard_ms":900,"rtt_ms":-1}"#.into(),
            ReportDrop::Implausible,
        ),
        // Before the onset, and past the window after it.
        (report(900.0, Some(4_000)), ReportDrop::Unmatched),
        (
            report(900.0, Some(5_000 + MATCH_WINDOW_TICKS + 1)),
            ReportDrop::Unmatched,
        ),
        // Shorter than the transceiver's own 305 ms from the last speech packet to the reply.
        (report(200.0, Some(5_000)), ReportDrop::Inconsistent),
        (report(900.0, Some(5_960)), ReportDrop::Repeated),
    ];
    for (text, why) in &cases {
        assert_eq!(
            c.timer.on_client_report(text.as_bytes(), None).err(),
            Some(*why),
            "{text}"
        );
    }
    let dropped = c.timer.take_counts().expect("counted").dropped;
    let expect = |r: ReportDrop| cases.iter().filter(|(_, w)| *w == r).count() as u64;
    for r in ReportDrop::ALL {
        assert_eq!(dropped[r as usize], expect(r), "{}", r.as_str());
    }
    assert_eq!(c.timer.take_counts(), None, "taken");
    assert_eq!(c.timer.snapshot().reports_dropped, cases.len() as u64);
    assert_eq!(
        c.timer.splits().count(),
        0,
        "nothing dropped became a split"
    );
}

#[test]
fn a_turn_is_reported_once() {
    let mut c = one_turn(10);
    let ok = c
        .timer
        .on_client_report(report(900.0, Some(10)).as_bytes(), None);
    assert!(ok.is_ok());
    let again = c
        .timer
        .on_client_report(report(900.0, Some(10)).as_bytes(), None);
    assert_eq!(again.err(), Some(ReportDrop::Repeated));
}

#[test]
fn the_rtt_is_rtcps_else_the_clients_else_none() {
    let mut c = one_turn(10);
    let s = c
        .timer
        .on_client_report(report(900.0, Some(10)).as_bytes(), None)
        .unwrap();
    assert_eq!((s.rtt_source, s.network_up_ms), ("client", 15.0));
    let mut c = one_turn(10);
    let bare = r#"{"type":"turn.report","speech_end_to_heard_ms":900,"rtp_timestamp":10}"#;
    let s = c.timer.on_client_report(bare.as_bytes(), None).unwrap();
    assert_eq!(
        (s.rtt_source, s.network_up_ms, s.playout_ms),
        ("none", 0.0, None)
    );
    assert_eq!(
        s.parts().len(),
        7,
        "no playout part without the browser's figure"
    );
}

#[test]
fn only_the_last_few_turns_are_kept_and_a_report_matches_its_own() {
    let mut c = Caller::new();
    for i in 0..10u32 {
        c.packets(LOUD, 20);
        let end = c.t - FRAME;
        c.packets(QUIET, 15);
        c.onset(end, 300, i * 100_000);
        c.packets(QUIET, 50);
    }
    assert_eq!(c.timer.turns_seen(), 10);
    assert_eq!(c.timer.turns.len(), KEPT_TURNS);
    let old = c
        .timer
        .on_client_report(report(900.0, Some(100)).as_bytes(), None);
    assert_eq!(old.err(), Some(ReportDrop::Unmatched), "turn 1 is gone");
    let s = c
        .timer
        .on_client_report(report(900.0, Some(800_000 + 1920)).as_bytes(), None)
        .unwrap();
    assert_eq!(s.turn, 9);
    // A report without a timestamp is the newest turn's.
    let s = c
        .timer
        .on_client_report(report(900.0, None).as_bytes(), None)
        .unwrap();
    assert_eq!(s.turn, 10);
    for i in 0..10 {
        let _ = c
            .timer
            .on_client_report(report(900.0, Some(i)).as_bytes(), None);
    }
    assert!(c.timer.splits().count() <= KEPT_TURNS);
}

#[test]
fn drop_reasons_are_labelled_in_the_metrics_order() {
    let ours = ReportDrop::ALL.map(ReportDrop::as_str);
    assert_eq!(ours, crate::metrics::TURN_REPORT_DROPS);
    for (i, r) in ReportDrop::ALL.into_iter().enumerate() {
        assert_eq!(r as usize, i);
    }
}
