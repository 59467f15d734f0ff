//! Test signals and the analysis that checks them on the far side.
//!
//! Everything here works on 48 kHz mono PCM16, the format the client encodes from and
//! decodes to. The analysis is deliberately simple (no FFT dependency): a Goertzel scan for
//! the dominant frequency, RMS level, and normalised cross-correlation over a lag window.

use std::f64::consts::PI;
use std::time::Duration;

/// Sample rate of every PCM buffer in this crate.
pub const SAMPLE_RATE: u32 = 48_000;
/// Samples in one 20 ms mono frame at [`SAMPLE_RATE`].
pub const FRAME_SAMPLES: usize = 960;
/// Duration of one audio frame (and of one RTP packet of uplink audio).
pub const FRAME_DURATION: Duration = Duration::from_millis(20);

/// An endless source of 48 kHz mono PCM16: a sine of fixed frequency and amplitude, or silence.
///
/// The phase is continuous across frames, so two sources built with the same parameters produce
/// the same samples: a test can rebuild the reference signal the client sent.
#[derive(Debug, Clone)]
pub struct SignalSource {
    freq_hz: f64,
    /// Peak value in PCM16 units.
    peak: f64,
    /// Current phase in cycles, kept in `[0, 1)`.
    phase: f64,
}

impl SignalSource {
    /// What the source will produce from here on, exactly: frequency, peak and phase bits.
    pub fn key(&self) -> (u64, u64, u64) {
        (
            self.freq_hz.to_bits(),
            self.peak.to_bits(),
            self.phase.to_bits(),
        )
    }

    /// A sine of `freq_hz` whose peak is `amplitude` × full scale (`amplitude` in `0.0..=1.0`).
    /// A zero or negative frequency or amplitude gives silence.
    pub fn sine(freq_hz: f32, amplitude: f32) -> Self {
        let valid = freq_hz > 0.0 && amplitude > 0.0;
        SignalSource {
            freq_hz: if valid { f64::from(freq_hz) } else { 0.0 },
            peak: if valid {
                f64::from(amplitude.min(1.0)) * f64::from(i16::MAX)
            } else {
                0.0
            },
            phase: 0.0,
        }
    }

    /// Digital silence.
    pub fn silence() -> Self {
        SignalSource::sine(0.0, 0.0)
    }

    /// Whether this source only produces zeros.
    pub fn is_silent(&self) -> bool {
        self.peak == 0.0
    }

    /// Fills `out` with the next samples.
    pub fn fill(&mut self, out: &mut [i16]) {
        if self.is_silent() {
            out.fill(0);
            return;
        }
        let step = self.freq_hz / f64::from(SAMPLE_RATE);
        for s in out.iter_mut() {
            // Rounding to the nearest PCM16 value; the peak is at most i16::MAX.
            *s = (self.peak * (2.0 * PI * self.phase).sin()).round() as i16;
            self.phase = (self.phase + step).fract();
        }
    }

    /// The next 20 ms frame.
    pub fn next_frame(&mut self) -> [i16; FRAME_SAMPLES] {
        let mut frame = [0i16; FRAME_SAMPLES];
        self.fill(&mut frame);
        frame
    }

    /// The next `n` samples as a vector.
    pub fn take_samples(&mut self, n: usize) -> Vec<i16> {
        let mut v = vec![0i16; n];
        self.fill(&mut v);
        v
    }
}

/// Root mean square of `pcm`, in PCM16 units (a full-scale sine gives about 23170).
/// Zero for an empty slice.
pub fn rms(pcm: &[i16]) -> f32 {
    if pcm.is_empty() {
        return 0.0;
    }
    let energy: f64 = pcm.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    (energy / pcm.len() as f64).sqrt() as f32
}

/// The frequency (Hz) carrying the most energy in `pcm`, searched between 20 Hz and Nyquist.
///
/// Two passes of Goertzel filters over Hann-windowed audio: a coarse 5 Hz grid over a 100 ms
/// window, then a 0.5 Hz grid (±10 Hz around the coarse peak) over up to one second, refined by
/// parabolic interpolation. Clean tones come out within a fraction of a hertz. Analyses the
/// middle of the buffer, so codec start-up and tail effects do not count. Returns 0.0 for
/// silence or fewer than 480 samples.
pub fn dominant_frequency(pcm: &[i16], sample_rate: u32) -> f32 {
    let sr = f64::from(sample_rate);
    let min_len = (sample_rate / 100) as usize;
    if pcm.len() < min_len || pcm.iter().all(|&s| s == 0) {
        return 0.0;
    }
    let nyquist = sr / 2.0;

    let coarse = hann_window(middle(pcm, (sample_rate / 10) as usize));
    let mut best = (0.0f64, 0.0f64);
    let mut f = 20.0;
    while f < nyquist {
        let p = goertzel_power(&coarse, f, sr);
        if p > best.1 {
            best = (f, p);
        }
        f += 5.0;
    }

    let fine = hann_window(middle(pcm, sample_rate as usize));
    let step = 0.5;
    let lo = (best.0 - 10.0).max(step);
    let powers: Vec<(f64, f64)> = (0..=40)
        .map(|k| lo + step * f64::from(k))
        .filter(|&f| f < nyquist)
        .map(|f| (f, goertzel_power(&fine, f, sr)))
        .collect();
    let Some(peak) = powers
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(i, _)| i)
    else {
        return best.0 as f32;
    };
    let (f_peak, p_peak) = powers[peak];
    if peak == 0 || peak + 1 == powers.len() {
        return f_peak as f32;
    }
    // Parabola through the peak and its neighbours, on a log scale (exact for a Gaussian lobe,
    // close enough for Hann).
    let (l, c, r) = (
        powers[peak - 1].1.max(1e-12).ln(),
        p_peak.max(1e-12).ln(),
        powers[peak + 1].1.max(1e-12).ln(),
    );
    let denom = l - 2.0 * c + r;
    let offset = if denom.abs() > f64::EPSILON {
        (0.5 * (l - r) / denom).clamp(-0.5, 0.5)
    } else {
        0.0
    };
    (f_peak + offset * step) as f32
}

/// The lag (in samples) at which `b` best matches `a`, and the normalised correlation there.
///
/// A positive lag means `b` is delayed relative to `a`: `a[i]` lines up with `b[i + lag]`. The
/// correlation is the cosine similarity of the overlapping parts (1.0 = identical shape, any
/// gain), searched over `-max_lag..=max_lag`; lags whose overlap is shorter than half the shorter
/// input are skipped so short overlaps cannot fake a match. Cost is O(`max_lag` × length): keep
/// inputs to a few seconds and `max_lag` to a few hundred milliseconds.
pub fn best_alignment(a: &[i16], b: &[i16], max_lag: usize) -> (isize, f32) {
    let min_overlap = (a.len().min(b.len()) / 2).max(1);
    let max_lag = max_lag.min(isize::MAX as usize) as isize;
    let mut best = (0isize, 0.0f32);
    for lag in -max_lag..=max_lag {
        // a[i] pairs with b[i + lag].
        let a_start = if lag < 0 { lag.unsigned_abs() } else { 0 };
        let b_start = if lag > 0 { lag as usize } else { 0 };
        if a_start >= a.len() || b_start >= b.len() {
            continue;
        }
        let n = (a.len() - a_start).min(b.len() - b_start);
        if n < min_overlap {
            continue;
        }
        let (xa, xb) = (&a[a_start..a_start + n], &b[b_start..b_start + n]);
        let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
        for (&x, &y) in xa.iter().zip(xb) {
            let (x, y) = (f64::from(x), f64::from(y));
            ab += x * y;
            aa += x * x;
            bb += y * y;
        }
        if aa == 0.0 || bb == 0.0 {
            continue;
        }
        let c = (ab / (aa * bb).sqrt()) as f32;
        if c > best.1 {
            best = (lag, c);
        }
    }
    best
}

/// The best normalised correlation of `b` against `a` over lags `-max_lag..=max_lag`
/// (see [`best_alignment`]). About 1.0 when `b` is a delayed, scaled copy of `a`; near 0.0 for
/// unrelated signals (for example two different tones).
pub fn correlation_after_alignment(a: &[i16], b: &[i16], max_lag: usize) -> f32 {
    best_alignment(a, b, max_lag).1
}

/// At most `len` samples from the middle of `pcm`.
fn middle(pcm: &[i16], len: usize) -> &[i16] {
    if pcm.len() <= len {
        return pcm;
    }
    let start = (pcm.len() - len) / 2;
    &pcm[start..start + len]
}

fn hann_window(pcm: &[i16]) -> Vec<f64> {
    let n = pcm.len();
    if n < 2 {
        return pcm.iter().map(|&s| f64::from(s)).collect();
    }
    let denom = (n - 1) as f64;
    pcm.iter()
        .enumerate()
        .map(|(i, &s)| f64::from(s) * (0.5 - 0.5 * (2.0 * PI * i as f64 / denom).cos()))
        .collect()
}

/// Energy of `x` at frequency `freq` (Hz): the squared magnitude of one DFT term at an
/// arbitrary (non-bin) frequency.
fn goertzel_power(x: &[f64], freq: f64, sample_rate: f64) -> f64 {
    let coeff = 2.0 * (2.0 * PI * freq / sample_rate).cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for &v in x {
        let s0 = v + coeff * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    s1 * s1 + s2 * s2 - coeff * s1 * s2
}

#[cfg(test)]
mod tests;
