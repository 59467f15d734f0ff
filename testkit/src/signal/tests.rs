use super::*;

fn tone(freq: f32, secs: f32) -> Vec<i16> {
    SignalSource::sine(freq, 0.5).take_samples((secs * SAMPLE_RATE as f32) as usize)
}

#[test]
fn dominant_frequency_finds_clean_tones_within_5_hz() {
    for freq in [200.0f32, 440.0, 1000.0, 1500.0, 1234.5, 2000.0] {
        let found = dominant_frequency(&tone(freq, 1.0), SAMPLE_RATE);
        assert!(
            (found - freq).abs() <= 5.0,
            "tone {freq} Hz detected as {found} Hz"
        );
    }
}

#[test]
fn dominant_frequency_works_on_short_buffers() {
    let found = dominant_frequency(&tone(440.0, 0.1), SAMPLE_RATE);
    assert!((found - 440.0).abs() <= 5.0, "got {found}");
}

#[test]
fn dominant_frequency_of_silence_is_zero() {
    assert_eq!(dominant_frequency(&[0i16; 4800], SAMPLE_RATE), 0.0);
    assert_eq!(dominant_frequency(&[], SAMPLE_RATE), 0.0);
}

#[test]
fn sine_amplitude_sets_rms() {
    let pcm = SignalSource::sine(1000.0, 1.0).take_samples(48_000);
    let expected = f32::from(i16::MAX) / 2f32.sqrt();
    assert!((rms(&pcm) - expected).abs() < 50.0, "rms {}", rms(&pcm));
    assert_eq!(rms(&SignalSource::silence().take_samples(960)), 0.0);
}

#[test]
fn frames_continue_phase_across_calls() {
    let mut framed = SignalSource::sine(440.0, 0.3);
    let mut joined = Vec::new();
    for _ in 0..5 {
        joined.extend_from_slice(&framed.next_frame());
    }
    let whole = SignalSource::sine(440.0, 0.3).take_samples(5 * FRAME_SAMPLES);
    assert_eq!(joined, whole);
}

/// Deterministic broadband signal: a correlation peak on it is unique.
fn noise(n: usize) -> Vec<i16> {
    let mut x: u32 = 0x1234_5678;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 16) as i16 / 4
        })
        .collect()
}

#[test]
fn correlation_finds_delayed_copy() {
    let a = noise(12_000);
    let mut b = vec![0i16; 100];
    b.extend(a.iter().map(|&s| s / 2));
    let (lag, c) = best_alignment(&a, &b, 480);
    assert_eq!(lag, 100);
    assert!(c > 0.99, "correlation {c}");
    assert!(correlation_after_alignment(&a, &b, 480) > 0.99);

    // And the other direction: a is the delayed one.
    let (lag, c) = best_alignment(&b, &a, 480);
    assert_eq!(lag, -100);
    assert!(c > 0.99);
}

#[test]
fn correlation_of_shifted_tone_is_one_and_of_different_tones_is_low() {
    let a = tone(440.0, 0.25);
    let shifted = a[37..].to_vec();
    assert!(correlation_after_alignment(&a, &shifted, 960) > 0.99);

    let other = tone(1000.0, 0.25);
    let c = correlation_after_alignment(&a, &other, 960);
    assert!(c < 0.2, "different tones correlate at {c}");
}

#[test]
fn correlation_with_silence_is_zero() {
    let a = tone(440.0, 0.1);
    assert_eq!(correlation_after_alignment(&a, &vec![0; a.len()], 100), 0.0);
}
