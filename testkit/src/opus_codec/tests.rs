use super::*;
use crate::signal::{dominant_frequency, rms, SignalSource};

#[test]
fn opus_round_trip_keeps_a_1khz_tone() {
    let mut source = SignalSource::sine(1000.0, 0.3);
    let mut enc = OpusFrameEncoder::new().unwrap();
    let mut dec = OpusFrameDecoder::new().unwrap();
    let mut decoded = Vec::new();
    for _ in 0..50 {
        let frame = source.next_frame();
        let packet = enc.encode(&frame).unwrap().to_vec();
        assert!(!packet.is_empty() && packet.len() <= MAX_PACKET);
        decoded.extend_from_slice(dec.decode(&packet).unwrap());
    }
    assert_eq!(decoded.len(), 50 * FRAME_SAMPLES);
    let freq = dominant_frequency(&decoded, SAMPLE_RATE);
    assert!((freq - 1000.0).abs() <= 5.0, "decoded tone at {freq} Hz");
    // 0.3 of full scale is about 6950 RMS; the codec keeps the level within a few dB.
    let level = rms(&decoded[FRAME_SAMPLES * 10..]);
    assert!((4000.0..10000.0).contains(&level), "decoded rms {level}");
}

#[test]
fn concealment_yields_one_frame() {
    let mut enc = OpusFrameEncoder::new().unwrap();
    let mut dec = OpusFrameDecoder::new().unwrap();
    let mut source = SignalSource::sine(440.0, 0.3);
    let packet = enc.encode(&source.next_frame()).unwrap().to_vec();
    dec.decode(&packet).unwrap();
    assert_eq!(dec.conceal().unwrap().len(), FRAME_SAMPLES);
}
