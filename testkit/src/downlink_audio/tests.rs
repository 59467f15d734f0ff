use super::*;
use crate::opus_codec::OpusFrameEncoder;
use crate::signal::{dominant_frequency, SignalSource, FRAME_SAMPLES, SAMPLE_RATE};

fn packets(n: usize) -> Vec<Vec<u8>> {
    let mut source = SignalSource::sine(1000.0, 0.3);
    let mut enc = OpusFrameEncoder::new().unwrap();
    (0..n)
        .map(|_| enc.encode(&source.next_frame()).unwrap().to_vec())
        .collect()
}

#[test]
fn gaps_are_counted_and_concealed_to_keep_the_timeline() {
    let mut down = DownlinkAudio::new(true, 100, 48_000 * 5).unwrap();
    let now = Instant::now();
    for (i, p) in packets(50).iter().enumerate() {
        let seq = 1000 + i as u64;
        if seq % 10 == 3 {
            continue; // lost in the network
        }
        down.on_frame(now, seq, seq, p);
    }
    let c = down.counters();
    assert_eq!(c.packets, 45);
    assert_eq!(c.packets_lost, 5);
    assert_eq!(c.frames_decoded, 45);
    assert_eq!(c.frames_concealed, 5);
    assert_eq!(down.pcm().len(), 50 * FRAME_SAMPLES);
    let f = dominant_frequency(down.pcm(), SAMPLE_RATE);
    assert!((f - 1000.0).abs() <= 5.0, "got {f}");
    assert_eq!(down.arrival_times().len(), 45);
}

#[test]
fn duplicates_are_not_decoded_twice() {
    let mut down = DownlinkAudio::new(true, 10, 48_000).unwrap();
    let p = packets(2);
    let now = Instant::now();
    down.on_frame(now, 5, 5, &p[0]);
    down.on_frame(now, 5, 5, &p[0]);
    down.on_frame(now, 6, 6, &p[1]);
    let c = down.counters();
    assert_eq!(
        (c.packets, c.late_or_duplicate, c.frames_decoded),
        (3, 1, 2)
    );
    assert_eq!(c.packets_lost, 0);
}

#[test]
fn counting_only_mode_keeps_no_pcm() {
    let mut down = DownlinkAudio::new(false, 10, 48_000).unwrap();
    for (i, p) in packets(3).iter().enumerate() {
        down.on_frame(Instant::now(), i as u64, i as u64, p);
    }
    assert_eq!(down.counters().packets, 3);
    assert_eq!(down.counters().frames_decoded, 0);
    assert!(down.pcm().is_empty());
}
