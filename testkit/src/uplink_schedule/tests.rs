use super::*;

const SECOND: Duration = Duration::from_secs(1);

/// Writes every frame due by `now`; returns their (due, RTP time).
fn pump(s: &mut UplinkSchedule, now: Instant) -> Vec<(Instant, u64)> {
    let mut written = Vec::new();
    while let Some((due, rtp)) = s.poll_frame(now) {
        s.frame_written(due);
        written.push((due, rtp));
    }
    written
}

#[test]
fn frames_come_every_20_ms_on_a_960_tick_clock_until_send_for_ends() {
    let t0 = Instant::now();
    let mut s = UplinkSchedule::new(Duration::from_millis(100));
    assert!(pump(&mut s, t0).is_empty(), "not started");
    s.start(t0);
    let frames = pump(&mut s, t0 + Duration::from_millis(50));
    let expected: Vec<_> = (0..3u32)
        .map(|k| (t0 + FRAME_DURATION * k, 960 * u64::from(k)))
        .collect();
    assert_eq!(frames, expected);
    assert_eq!(s.next_at(), Some(t0 + Duration::from_millis(60)));
    let end = t0 + Duration::from_millis(100);
    assert_eq!(
        pump(&mut s, end).len(),
        2,
        "frames due at 60 and 80 ms, then the end"
    );
    assert!(!s.is_running());
    assert_eq!(s.frames_written(), 5);
}

#[test]
fn a_late_wakeup_skips_to_the_current_frame_and_counts_what_it_skipped() {
    let t0 = Instant::now();
    let mut s = UplinkSchedule::new(Duration::MAX);
    s.start(t0);
    assert_eq!(pump(&mut s, t0).len(), 1);
    // 60 ms late is within the catch-up allowance: the four frames due (20 to 80 ms) come
    // out at once.
    let frames = pump(&mut s, t0 + Duration::from_millis(80));
    assert_eq!(frames.len(), 4);
    // Half a second of stall: no burst, one frame at the current slot, the rest skipped.
    let late = t0 + Duration::from_millis(600);
    let frames = pump(&mut s, late);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(late - frames[0].0 <= MAX_CATCH_UP);
    assert_eq!(s.frames_skipped(), 25);
    assert_eq!(
        frames[0].1,
        960 * (5 + 25),
        "the RTP clock counts skipped frames too"
    );
}

#[test]
fn stop_and_a_zero_length_start_leave_nothing_due() {
    let t0 = Instant::now();
    let mut s = UplinkSchedule::new(Duration::ZERO);
    s.start(t0);
    assert!(!s.is_running() && pump(&mut s, t0 + SECOND).is_empty());
    s.set_send_for(SECOND);
    s.start(t0);
    assert!(s.is_running());
    s.stop();
    assert!(pump(&mut s, t0 + SECOND).is_empty());
}
