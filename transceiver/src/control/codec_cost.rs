//! What a PCM session's codecs cost on this machine, per encoder setting, measured by the
//! process itself: admission counts a session whose backend starts talking at that cost before
//! the CPU window can show it (see `process_load`).
//!
//! Why measured and not a constant: the cost differs several-fold between encoder settings
//! (lowdelay at complexity 0 against voip at 5), and the same machine's codec floor moves
//! between benchmark runs (docs/SESSION_COST.md, "Figures formerly in code comments"). One
//! measurement is a second of audio through a fresh decoder and encoder, a few milliseconds of
//! CPU, once per setting: the default at start-up, before admission watches the CPU, any other
//! on the blocking pool when a backend first asks for it.
//!
//! A measurement is calibration, not load: its CPU (all of it, the synthetic audio included) is
//! counted in [`CodecCosts::calibration_cpu`], which the process CPU window leaves out (from the
//! moment the measurement ends: one under way shows for its few milliseconds). Without
//! that, a fresh transceiver on one core refused its first callers: in a debug build the start-up
//! measurement filled most of the window for its first few hundred milliseconds
//! (`scripts/bench --smoke` failed with every session of its first scenario refused), and a
//! backend cycling through new encoder settings would refuse callers for as long as it did.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::control::process_load::thread_cpu_time;
use crate::media::audio_bridge::{EncoderSettings, StartedTalking};
use crate::metrics::Metrics;

/// A talking PCM session costs the process about this many times its codecs' floor: the codecs
/// run cold between a hundred other sessions' work, and the session also has its RTP, SRTP,
/// str0m and gRPC work. The factor comes from an always-talking PCM load (`loadgen sessions
/// --mode pcm --backend echo`, one core) against the floor of decoding and encoding every frame
/// (`loadgen codec-floor`, the same machine and hour): docs/SESSION_COST.md, "Admission that
/// knows a talking session's encoder".
pub const TALKING_OVER_FLOOR: f64 = 2.0;

/// Until the first measurement is in (the first few milliseconds of the process), a talking
/// session is counted at this many CPU-seconds per session-second: the default encoder's floor
/// on the benchmark machine.
const UNMEASURED: f64 = 0.006;

/// Frames measured per setting: one second of audio each way.
const FRAMES: usize = 50;
/// Frames run first so the measurement starts with the codec's tables in cache.
const WARM_UP: usize = 5;

/// The codec work one PCM session does, named by what changes its cost.
pub type CodecKey = StartedTalking;

#[derive(Debug, Clone, Copy)]
enum Slot {
    Measuring,
    Known(f64),
    Failed,
}

/// Measured costs, one per setting the process has seen (a few dozen at most: three rates,
/// three applications, eleven complexities, one bitrate).
pub struct CodecCosts {
    slots: Mutex<HashMap<CodecKey, Slot>>,
    /// The transceiver's own encoder at 48 kHz: what an unmeasured setting is counted at.
    default: CodecKey,
    /// CPU nanoseconds the measurements took, whole (see the module's docs).
    calibration_nanos: AtomicU64,
    metrics: Arc<Metrics>,
}

impl CodecCosts {
    pub fn new(default_encoder: EncoderSettings, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(CodecCosts {
            slots: Mutex::new(HashMap::new()),
            default: CodecKey {
                rate: 48_000,
                encoder: default_encoder,
            },
            calibration_nanos: AtomicU64::new(0),
            metrics,
        })
    }

    /// Measures the transceiver's default setting on this thread, now. Called at start-up
    /// before the process CPU sampler and the signaling listener start, so the first callers
    /// find the default's cost known and the window free of it.
    pub fn measure_default_now(&self) {
        self.measure_and_store(self.default);
    }

    /// CPU the measurements have taken so far: the process CPU window subtracts it.
    pub fn calibration_cpu(&self) -> Duration {
        Duration::from_nanos(self.calibration_nanos.load(Ordering::Relaxed))
    }

    /// CPU-seconds per session-second that `key`'s codecs cost: measured, or while that is
    /// under way the default setting's figure (or a constant before that is in too).
    pub fn per_session_second(self: &Arc<Self>, key: CodecKey) -> f64 {
        match self.slot_or_measure(key) {
            Slot::Known(cost) => cost,
            Slot::Measuring | Slot::Failed => match self.slot_or_measure(self.default) {
                Slot::Known(cost) => cost,
                Slot::Measuring | Slot::Failed => UNMEASURED,
            },
        }
    }

    fn slot_or_measure(self: &Arc<Self>, key: CodecKey) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(&key) {
            return *slot;
        }
        slots.insert(key, Slot::Measuring);
        drop(slots);
        let costs = Arc::clone(self);
        tokio::task::spawn_blocking(move || costs.measure_and_store(key));
        Slot::Measuring
    }

    /// Measures `key` on this thread, counts the whole of it as calibration CPU, and stores and
    /// publishes the result.
    fn measure_and_store(&self, key: CodecKey) {
        let started = thread_cpu_time();
        let result = measure(key);
        let spent = thread_cpu_time().saturating_sub(started);
        self.calibration_nanos
            .fetch_add(spent.as_nanos() as u64, Ordering::Relaxed);
        let slot = match result {
            Ok(cost) => {
                self.metrics.codec_cost(key.codec_key(), cost.as_secs_f64());
                tracing::info!(
                    rate = key.rate,
                    application = ?key.encoder.application,
                    complexity = key.encoder.complexity,
                    cpu_ms_per_session_second = cost.as_secs_f64() * 1e3,
                    calibration_ms = spent.as_secs_f64() * 1e3,
                    "measured a PCM session's codec cost"
                );
                Slot::Known(cost.as_secs_f64())
            }
            Err(e) => {
                tracing::warn!(rate = key.rate, error = %e, "could not measure the codec cost");
                Slot::Failed
            }
        };
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, slot);
    }

    /// Settings measured or being measured.
    #[cfg(test)]
    fn settings_seen(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// CPU time this thread spends to decode one second of caller audio and encode one second of
/// backend audio with `key`'s settings, on fresh codecs (the measuring thread's own clock, so
/// time waiting for a core is not counted).
pub fn measure(key: CodecKey) -> Result<Duration, opus::Error> {
    let frame = (key.rate / 50) as usize;
    let total = WARM_UP + FRAMES;
    // Caller packets as a browser sends them: SILK speech at 48 kHz (the cost of making them
    // is not measured).
    let mut caller = opus::Encoder::new(48_000, opus::Channels::Mono, opus::Application::Voip)?;
    caller.set_bitrate(opus::Bitrate::Bits(32_000))?;
    let mut packet = vec![0u8; 1500];
    let mut packets = Vec::with_capacity(total);
    for i in 0..total {
        let n = caller.encode(&voiced_frame(i, 960, 48_000), &mut packet)?;
        packets.push(packet[..n].to_vec());
    }
    let backend: Vec<Vec<i16>> = (0..total)
        .map(|i| voiced_frame(i, frame, key.rate))
        .collect();

    let mut decoder = opus::Decoder::new(key.rate, opus::Channels::Mono)?;
    let mut encoder = key.encoder.encoder(key.rate)?;
    let mut pcm = vec![0i16; frame];
    let mut spent = Duration::ZERO;
    for i in 0..total {
        let started = thread_cpu_time();
        std::hint::black_box(decoder.decode(&packets[i], &mut pcm, false)?);
        std::hint::black_box(encoder.encode(&backend[i], &mut packet)?);
        if i >= WARM_UP {
            spent += thread_cpu_time().saturating_sub(started);
        }
    }
    // FRAMES is a second of audio: `spent` is already per session-second.
    Ok(spent)
}

/// Frame `i` (20 ms) of a synthetic voiced sound at `rate`: a 140 Hz voice with its harmonics
/// to 3.5 kHz under a slow syllable-rate envelope, the kind of signal SILK spends its effort on
/// (a pure tone or silence would cost it less than speech does).
fn voiced_frame(i: usize, len: usize, rate: u32) -> Vec<i16> {
    let rate = f64::from(rate);
    (0..len)
        .map(|n| {
            let t = (i * len + n) as f64 / rate;
            let f0 = 140.0 * (1.0 + 0.05 * (2.0 * std::f64::consts::PI * 3.0 * t).sin());
            let voice: f64 = (1..=25)
                .map(|h| (2.0 * std::f64::consts::PI * f0 * h as f64 * t).sin() / h as f64)
                .sum();
            let envelope = 0.55 + 0.45 * (2.0 * std::f64::consts::PI * 4.0 * t).sin();
            (voice * envelope * 6_000.0) as i16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::audio_bridge::OpusApplication;

    fn key(rate: u32, application: OpusApplication, complexity: i32) -> CodecKey {
        CodecKey {
            rate,
            encoder: EncoderSettings {
                bitrate: 32_000,
                complexity,
                application,
            },
        }
    }

    fn median_of_3(k: CodecKey) -> f64 {
        let mut v: Vec<f64> = (0..3).map(|_| measure(k).unwrap().as_secs_f64()).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    }

    #[test]
    fn a_sessions_codecs_cost_something_and_the_cheap_encoder_costs_less() {
        let default = median_of_3(key(48_000, OpusApplication::Voip, 5));
        let cheap = median_of_3(key(48_000, OpusApplication::Lowdelay, 0));
        // A second of decoding and encoding is real work, and far less than a second.
        assert!(default > 0.0005 && default < 0.5, "{default}");
        // CELT-only at complexity 0 is far cheaper than SILK at 5 (docs/BENCHMARKS.md, encoder
        // matrix); a loaded machine may narrow the gap, never close it this far.
        assert!(
            cheap < default * 0.8,
            "lowdelay c0 {cheap} vs voip c5 {default}"
        );
    }

    /// Start-up: the default is measured on the calling thread (no runtime: an unmeasured
    /// setting would need one to spawn its measurement), and all of it is calibration CPU.
    #[test]
    fn the_default_is_measured_at_once_and_counted_as_calibration() {
        let default = key(48_000, OpusApplication::Voip, 5);
        let costs = CodecCosts::new(default.encoder, Arc::new(Metrics::new()));
        assert_eq!(costs.calibration_cpu(), Duration::ZERO);
        costs.measure_default_now();
        let cost = costs.per_session_second(default);
        assert!(cost > 0.0 && cost < 0.5, "{cost}");
        assert_ne!(cost, UNMEASURED);
        // The measured frames are part of the calibration, with the codecs' set-up and the
        // synthetic audio on top.
        let calibration = costs.calibration_cpu().as_secs_f64();
        assert!(calibration >= cost, "{calibration} < {cost}");
    }

    #[test]
    fn every_rate_the_bridge_accepts_can_be_measured() {
        for rate in [16_000, 24_000, 48_000] {
            let cost = measure(key(rate, OpusApplication::Voip, 5)).unwrap();
            assert!(cost > Duration::ZERO, "{rate}");
        }
    }

    /// A backend that attaches with a new encoder setting every time (every rate, application
    /// and complexity an attach accepts, twice over) costs one measurement per setting: 99 at
    /// most, each a few milliseconds of CPU, once in the process's life, and the table stops
    /// there.
    #[test]
    fn a_backend_cycling_every_encoder_setting_is_measured_once_per_setting() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(4)
            .build()
            .unwrap();
        let metrics = Arc::new(Metrics::new());
        let default = key(48_000, OpusApplication::Voip, 5).encoder;
        let costs = CodecCosts::new(default, Arc::clone(&metrics));
        let every: Vec<CodecKey> = [16_000, 24_000, 48_000]
            .into_iter()
            .flat_map(|rate| {
                [
                    OpusApplication::Voip,
                    OpusApplication::Audio,
                    OpusApplication::Lowdelay,
                ]
                .into_iter()
                .flat_map(move |app| (0..=10).map(move |c| key(rate, app, c)))
            })
            .collect();
        assert_eq!(every.len(), 99);
        let _guard = rt.enter();
        // While measurements are under way, every answer is a sane stand-in.
        for k in every.iter().chain(every.iter()) {
            let cost = costs.per_session_second(*k);
            assert!(cost > 0.0 && cost < 0.5, "{cost}");
        }
        assert_eq!(costs.settings_seen(), 99);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let known = || {
            let slots = costs.slots.lock().unwrap();
            slots.values().all(|s| matches!(s, Slot::Known(_)))
        };
        while !known() {
            assert!(std::time::Instant::now() < deadline, "measurements stuck");
            std::thread::sleep(Duration::from_millis(20));
        }
        // One gauge per setting, and a second round answers from the table: no new setting,
        // no new measurement.
        let series = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("voxgate_codec_cpu_seconds{"))
            .count();
        assert_eq!(series, 99);
        let measured: Vec<f64> = every.iter().map(|k| costs.per_session_second(*k)).collect();
        let again: Vec<f64> = every.iter().map(|k| costs.per_session_second(*k)).collect();
        assert_eq!(measured, again);
        assert_eq!(costs.settings_seen(), 99);
        // The cheapest setting measured cheaper than the most expensive one.
        let cheapest = costs.per_session_second(key(16_000, OpusApplication::Lowdelay, 0));
        let dearest = costs.per_session_second(key(48_000, OpusApplication::Voip, 10));
        assert!(cheapest < dearest, "{cheapest} vs {dearest}");
    }

    #[test]
    fn the_voiced_signal_is_loud_and_not_a_constant() {
        let f = voiced_frame(3, 960, 48_000);
        assert_eq!(f.len(), 960);
        let peak = f.iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!(peak > 3_000, "{peak}");
        assert!(f.windows(2).any(|w| w[0] != w[1]));
    }
}
