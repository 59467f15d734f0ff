use super::*;
use crate::opus_codec::OpusFrameDecoder;
use crate::signal::{dominant_frequency, SAMPLE_RATE};

fn decode_all(uplink: &mut UplinkAudio, frames: usize) -> Vec<i16> {
    let mut dec = OpusFrameDecoder::new().unwrap();
    let mut pcm = Vec::new();
    for _ in 0..frames {
        let p = uplink.next_packet().unwrap();
        pcm.extend_from_slice(dec.decode(&p).unwrap());
    }
    pcm
}

#[test]
fn live_and_looped_uplinks_carry_the_tone() {
    let mut live = UplinkAudio::live(SignalSource::sine(700.0, 0.3)).unwrap();
    let mut looped = UplinkAudio::looped(SignalSource::sine(700.0, 0.3)).unwrap();
    for pcm in [decode_all(&mut live, 120), decode_all(&mut looped, 120)] {
        let f = dominant_frequency(&pcm, SAMPLE_RATE);
        assert!((f - 700.0).abs() <= 5.0, "got {f}");
    }
}

#[test]
fn looped_uplinks_of_one_source_share_one_encoding() {
    let mut a = UplinkAudio::looped(SignalSource::sine(431.0, 0.3)).unwrap();
    let mut b = UplinkAudio::looped(SignalSource::sine(431.0, 0.3)).unwrap();
    let mut c = UplinkAudio::looped(SignalSource::sine(432.0, 0.3)).unwrap();
    let (pa, pb, pc) = (
        a.next_packet().unwrap(),
        b.next_packet().unwrap(),
        c.next_packet().unwrap(),
    );
    assert!(Arc::ptr_eq(&pa, &pb), "same source, same packets");
    assert!(!Arc::ptr_eq(&pa, &pc), "another tone is encoded on its own");
}

/// The loop is a steady second of the stream a live caller sends, not an encoder's
/// start-up replayed every second: the same Opus mode (TOC configuration) as a live
/// encoder's, and no oversized start-up frames.
#[test]
fn looped_uplink_is_a_steady_second_not_the_encoders_start() {
    for hz in [200.0, 440.0, 950.0] {
        let mut live = UplinkAudio::live(SignalSource::sine(hz, 0.3)).unwrap();
        let steady: Vec<Arc<[u8]>> = (0..2 * LOOP_FRAMES)
            .map(|_| live.next_packet().unwrap())
            .skip(LOOP_FRAMES)
            .collect();
        let mut looped = UplinkAudio::looped(SignalSource::sine(hz, 0.3)).unwrap();
        let packets: Vec<Arc<[u8]>> = (0..LOOP_FRAMES)
            .map(|_| looped.next_packet().unwrap())
            .collect();
        let config = |p: &Arc<[u8]>| p[0] >> 3;
        let largest_steady = steady.iter().map(|p| p.len()).max().unwrap();
        for (i, p) in packets.iter().enumerate() {
            assert_eq!(config(p), config(&steady[i]), "{hz} Hz, frame {i}");
            assert!(
                p.len() <= largest_steady,
                "{hz} Hz, frame {i}: {} bytes",
                p.len()
            );
        }
    }
}

#[test]
fn looped_uplink_repeats_after_one_second() {
    let mut looped = UplinkAudio::looped(SignalSource::sine(700.0, 0.3)).unwrap();
    let first = looped.next_packet().unwrap();
    for _ in 1..LOOP_FRAMES {
        looped.next_packet().unwrap();
    }
    assert_eq!(looped.next_packet().unwrap(), first);
}
