//! Encoder quality beside its cost: real speech, encoded and decoded with given downlink
//! encoder settings, gives the encoder's CPU per frame and how far the decoded speech's
//! spectrum is from the source's.
//!
//! The speech is synthetic, as a TTS backend's is: `espeak-ng` speaks [`SPEECH_TEXT`]
//! (22,050 Hz) and `sox` resamples it to the backend rate, both installed by `scripts/setup`.
//! Quality is the log-spectral distance ([`log_spectral_distance`]): per 20 ms frame (Hann
//! window, FFT), `sqrt(mean over bins of (10·log10(P_src / P_dec))²)`, averaged over the
//! source's non-silent frames. 0 dB is identical; a few dB is a good speech codec at 32 kbit/s.

use std::io::{ErrorKind, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use serde::{Deserialize, Serialize};

use crate::codec_floor::{Application, EncoderSettings, BACKEND_RATES};
use crate::proc_stat::thread_cpu_time;
use crate::stats::median;

/// What the speech source says: three sentences of the kind a voice agent speaks.
pub const SPEECH_TEXT: &str = "Thank you for calling. Please hold while I connect your call to \
    the next available agent. Your order number is four two seven, arriving on Thursday.";

/// espeak-ng speaks at 22,050 Hz, so the source has nothing above 11,025 Hz: bins above it
/// would compare the codec's noise with the resampler's.
const SPEECH_BAND_HZ: f64 = 11_025.0;

/// A frame is silent below this fraction of the loudest frame's energy (−40 dB).
const SILENCE: f64 = 1e-4;

/// Bins are compared above this fraction of the frame's strongest source bin (−60 dB): the
/// epsilon that keeps spectral valleys and empty bins from dominating the distance.
const FLOOR: f64 = 1e-6;

/// Settings of the quality matrix: today's default first, then the cheaper ones (voip's
/// complexities between 5 and 0 too: a cheaper default would be one of them).
pub const MATRIX: [(Application, i32); 7] = [
    (Application::Voip, 5),
    (Application::Voip, 3),
    (Application::Voip, 1),
    (Application::Voip, 0),
    (Application::Audio, 5),
    (Application::Lowdelay, 5),
    (Application::Lowdelay, 0),
];

#[derive(Debug, thiserror::Error)]
pub enum QualityError {
    #[error("{0} missing")]
    ToolMissing(&'static str),
    #[error("{tool} failed: {detail}")]
    Tool { tool: &'static str, detail: String },
    #[error("opus: {0}")]
    Opus(#[from] opus::Error),
    #[error("the source has no frame above the silence threshold")]
    Silent,
}

/// One encoder setting at one rate: its cost and its quality.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QualityPoint {
    pub sample_rate: u32,
    pub application: Application,
    pub complexity: i32,
    pub bitrate: i32,
    /// 20 ms frames of speech coded.
    pub frames: usize,
    /// Encoder thread CPU per frame, median of the repeats.
    pub encode_us_per_frame: f64,
    /// Log-spectral distance of decoded from source speech.
    pub lsd_db: f64,
}

/// The quality matrix of one suite run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct QualityMatrix {
    pub points: Vec<QualityPoint>,
    /// Why nothing was measured, e.g. "espeak-ng missing".
    pub skipped: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CodecQualityArgs {
    /// Downlink encoder bitrate (the transceiver's --opus-bitrate).
    #[arg(long, default_value_t = 32_000)]
    pub bitrate: i32,
    /// Encodings timed per point; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

/// Runs `tool` with `args`, feeding it `input`, and returns its stdout.
fn pipe(tool: &'static str, args: &[&str], input: &[u8]) -> Result<Vec<u8>, QualityError> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => QualityError::ToolMissing(tool),
            _ => QualityError::Tool {
                tool,
                detail: e.to_string(),
            },
        })?;
    let mut stdin = child.stdin.take();
    let out = std::thread::scope(|sc| {
        // Written from a thread of its own: a tool that fills its stdout pipe before reading
        // all its input would otherwise wait for us while we wait for it.
        sc.spawn(move || {
            if let Some(s) = stdin.as_mut() {
                let _ = s.write_all(input);
            }
            drop(stdin);
        });
        child.wait_with_output()
    })
    .map_err(|e| QualityError::Tool {
        tool,
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(QualityError::Tool {
            tool,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(out.stdout)
}

/// [`SPEECH_TEXT`] spoken by espeak-ng, as a WAV file's bytes.
pub fn spoken() -> Result<Vec<u8>, QualityError> {
    pipe("espeak-ng", &["--stdout", SPEECH_TEXT], &[])
}

/// The WAV `speech` resampled by sox to `rate`, as mono 16-bit samples.
pub fn resampled(speech: &[u8], rate: u32) -> Result<Vec<i16>, QualityError> {
    let rate = rate.to_string();
    let raw = pipe(
        "sox",
        &[
            "-q", "-t", "wav", "-", "-t", "raw", "-e", "signed", "-b", "16", "-c", "1", "-L", "-r",
            &rate, "-",
        ],
        speech,
    )?;
    Ok(raw
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// Speech through an encoder and a decoder.
struct Coded {
    /// Decoded samples, the encoder's lookahead included at the front.
    decoded: Vec<i16>,
    /// How far the decoded speech lags the source, in samples.
    lookahead: usize,
    frames: usize,
    /// Encoder thread CPU per frame, one value per repeat.
    encode_us: Vec<f64>,
}

/// Encodes `speech` (at `rate`) with `settings` `repeats` times, timing the encoder, and
/// decodes the last encoding.
fn code(
    speech: &[i16],
    rate: u32,
    settings: &EncoderSettings,
    repeats: usize,
) -> Result<Coded, QualityError> {
    let n = (rate / 50) as usize;
    // Whole frames, plus one of silence that flushes the encoder's lookahead out.
    let frames = speech.len().div_ceil(n) + 1;
    let mut src = speech.to_vec();
    src.resize(frames * n, 0);
    // Packets in one buffer allocated up front: nothing but the encoder is timed.
    const MAX: usize = 1500;
    let mut bytes = vec![0u8; frames * MAX];
    let mut lens = vec![0usize; frames];
    let mut encode_us = Vec::new();
    let mut lookahead = 0;
    for _ in 0..repeats.max(1) {
        let mut enc = settings.encoder(rate)?;
        lookahead = usize::try_from(enc.get_lookahead()?).unwrap_or(0);
        let t = thread_cpu_time();
        for ((pcm, out), len) in src
            .chunks_exact(n)
            .zip(bytes.chunks_exact_mut(MAX))
            .zip(lens.iter_mut())
        {
            *len = enc.encode(pcm, out)?;
        }
        encode_us.push((thread_cpu_time() - t).as_secs_f64() * 1e6 / frames as f64);
    }
    let mut dec = opus::Decoder::new(rate, opus::Channels::Mono)?;
    let mut decoded = vec![0i16; frames * n];
    for ((packet, len), out) in bytes
        .chunks_exact(MAX)
        .zip(&lens)
        .zip(decoded.chunks_exact_mut(n))
    {
        dec.decode(&packet[..*len], out, false)?;
    }
    Ok(Coded {
        decoded,
        lookahead,
        frames,
        encode_us,
    })
}

/// The cost and quality of `settings` on `speech` (at `rate`): the encoder timed over
/// `repeats` encodings, the decoded speech aligned by the encoder's lookahead.
pub fn measure(
    speech: &[i16],
    rate: u32,
    settings: &EncoderSettings,
    repeats: usize,
) -> Result<QualityPoint, QualityError> {
    let c = code(speech, rate, settings, repeats)?;
    let aligned = c.decoded.get(c.lookahead..).unwrap_or_default();
    let lsd =
        log_spectral_distance(speech, aligned, rate, SPEECH_BAND_HZ).ok_or(QualityError::Silent)?;
    Ok(QualityPoint {
        sample_rate: rate,
        application: settings.application,
        complexity: settings.complexity,
        bitrate: settings.bitrate,
        frames: c.frames,
        encode_us_per_frame: median(&c.encode_us).unwrap_or(0.0),
        lsd_db: lsd,
    })
}

/// Every setting of [`MATRIX`] at every backend rate, on the same spoken sentences.
pub fn matrix(bitrate: i32, repeats: usize) -> Result<Vec<QualityPoint>, QualityError> {
    let wav = spoken()?;
    let mut points = Vec::new();
    for rate in BACKEND_RATES {
        let speech = resampled(&wav, rate)?;
        for (application, complexity) in MATRIX {
            let settings = EncoderSettings {
                bitrate,
                complexity,
                application,
            };
            points.push(measure(&speech, rate, &settings, repeats)?);
        }
    }
    Ok(points)
}

/// Power spectra of 20 ms Hann-windowed frames at `rate`, up to `band_hz`.
struct Spectra {
    fft: Arc<dyn Fft<f64>>,
    window: Vec<f64>,
    bins: usize,
    buf: Vec<Complex<f64>>,
}

impl Spectra {
    fn new(rate: u32, band_hz: f64) -> Spectra {
        let n = (rate / 50) as usize;
        let window = (0..n)
            .map(|i| 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos())
            .collect();
        let bins = ((band_hz * n as f64 / f64::from(rate)) as usize).min(n / 2) + 1;
        Spectra {
            fft: FftPlanner::new().plan_fft_forward(n),
            window,
            bins,
            buf: vec![Complex::default(); n],
        }
    }

    /// The power of `frame`'s bins into `out`.
    fn power(&mut self, frame: &[i16], out: &mut Vec<f64>) {
        for ((b, &s), w) in self.buf.iter_mut().zip(frame).zip(&self.window) {
            *b = Complex::new(f64::from(s) * w, 0.0);
        }
        self.fft.process(&mut self.buf);
        out.clear();
        out.extend(self.buf[..self.bins].iter().map(|c| c.norm_sqr()));
    }
}

/// Log-spectral distance in dB between `src` and `dec` (aligned, same `rate`), over bins up
/// to `band_hz`: the mean over non-silent source frames (energy above [`SILENCE`] of the
/// loudest) of each frame's RMS difference of the log power spectra, with powers floored at
/// [`FLOOR`] of the frame's strongest source bin. `None` if no frame is loud enough.
pub fn log_spectral_distance(src: &[i16], dec: &[i16], rate: u32, band_hz: f64) -> Option<f64> {
    let n = (rate / 50) as usize;
    let energy = |f: &[i16]| f.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>();
    let frames = src.len().min(dec.len()) / n;
    let loudest = src
        .chunks_exact(n)
        .take(frames)
        .map(energy)
        .fold(0.0, f64::max);
    let mut spectra = Spectra::new(rate, band_hz);
    let (mut ps, mut pd) = (Vec::new(), Vec::new());
    let mut sum = 0.0;
    let mut counted = 0usize;
    for (s, d) in src.chunks_exact(n).zip(dec.chunks_exact(n)).take(frames) {
        if loudest <= 0.0 || energy(s) < SILENCE * loudest {
            continue;
        }
        spectra.power(s, &mut ps);
        spectra.power(d, &mut pd);
        let eps = FLOOR * ps.iter().copied().fold(0.0, f64::max) + f64::MIN_POSITIVE;
        let mean_sq = ps
            .iter()
            .zip(&pd)
            .map(|(a, b)| (10.0 * ((a + eps) / (b + eps)).log10()).powi(2))
            .sum::<f64>()
            / ps.len() as f64;
        sum += mean_sq.sqrt();
        counted += 1;
    }
    (counted > 0).then(|| sum / counted as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Two seconds of a speech-like signal at `rate`: a 140 Hz harmonic series whose loudness
    /// and brightness change every 100 ms, with pauses.
    fn voiced(rate: u32) -> Vec<i16> {
        (0..2 * rate)
            .map(|i| {
                let t = f64::from(i) / f64::from(rate);
                let syllable = (t * 10.0) as u32;
                if syllable % 5 == 4 {
                    return 0;
                }
                let tilt = 0.5 + 0.1 * f64::from(syllable % 4);
                let v: f64 = (1..30)
                    .map(|h| {
                        let f = 140.0 * f64::from(h);
                        tilt.powi(h) * (std::f64::consts::TAU * f * t).sin()
                    })
                    .sum();
                (v * 6000.0) as i16
            })
            .collect()
    }

    fn with_noise(x: &[i16], amplitude: f64) -> Vec<i16> {
        let mut rng = StdRng::seed_from_u64(7);
        x.iter()
            .map(|&s| (f64::from(s) + amplitude * rng.random_range(-1.0..1.0)) as i16)
            .collect()
    }

    #[test]
    fn a_signal_is_at_zero_distance_from_itself() {
        let x = voiced(16_000);
        let d = log_spectral_distance(&x, &x, 16_000, 8_000.0).unwrap();
        assert!(d.abs() < 1e-9, "{d}");
    }

    #[test]
    fn distance_grows_with_distortion() {
        let x = voiced(16_000);
        let light = log_spectral_distance(&x, &with_noise(&x, 30.0), 16_000, 8_000.0).unwrap();
        let heavy = log_spectral_distance(&x, &with_noise(&x, 3000.0), 16_000, 8_000.0).unwrap();
        assert!(light > 0.1, "some distance: {light}");
        assert!(heavy > light + 5.0, "heavy {heavy} dB, light {light} dB");
    }

    #[test]
    fn silence_has_no_distance() {
        assert!(log_spectral_distance(&[0; 3200], &[0; 3200], 16_000, 8_000.0).is_none());
    }

    /// The lag in 0..=960 samples at which `dec` best matches `src` (over its first 12,000
    /// samples).
    fn best_lag(src: &[i16], dec: &[i16]) -> usize {
        (0..=960)
            .max_by_key(|&lag| {
                src[..12_000]
                    .iter()
                    .zip(&dec[lag..])
                    .map(|(&a, &b)| i64::from(a) * i64::from(b))
                    .sum::<i64>()
            })
            .unwrap()
    }

    #[test]
    fn decoded_speech_lags_by_the_encoders_lookahead() {
        let x = voiced(24_000);
        for application in [Application::Voip, Application::Lowdelay] {
            let settings = EncoderSettings {
                application,
                ..EncoderSettings::BENCH
            };
            let c = code(&x, 24_000, &settings, 1).unwrap();
            assert_eq!(c.frames, 101, "2 s and the flush frame");
            assert!(c.encode_us[0] > 0.0);
            let lag = best_lag(&x, &c.decoded);
            // SILK's own filters shift the waveform by a few samples more; a wrong alignment
            // would be off by a pitch period (171 samples) or more.
            assert!(
                lag.abs_diff(c.lookahead) <= 8,
                "{application:?}: best lag {lag}, lookahead {}",
                c.lookahead
            );
        }
    }

    #[test]
    fn spoken_speech_through_each_application_is_measured() {
        let wav = spoken().expect("espeak-ng (scripts/setup installs it)");
        let speech = resampled(&wav, 16_000).expect("sox (scripts/setup installs it)");
        assert!(speech.len() > 16_000 * 3, "seconds of speech");
        for application in [Application::Voip, Application::Lowdelay] {
            let settings = EncoderSettings {
                application,
                ..EncoderSettings::BENCH
            };
            let p = measure(&speech, 16_000, &settings, 1).unwrap();
            assert!(
                p.lsd_db > 0.0 && p.lsd_db < 15.0,
                "{application:?}: {} dB",
                p.lsd_db
            );
        }
    }

    #[test]
    fn a_missing_tool_is_named() {
        let e = pipe("voxgate-no-such-tool", &[], &[]).unwrap_err();
        assert_eq!(e.to_string(), "voxgate-no-such-tool missing");
    }
}
