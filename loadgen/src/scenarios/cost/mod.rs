//! Transceiver CPU per session against the libopus floor: PCM and passthrough sessions at
//! growing counts, a duty-cycle backend, the server's CPU read from `/proc`; the codec floor
//! measured in process on the same frames.
//!
//! This module holds what the scenario measures and in which modes ([`CostPoint`],
//! [`COST_MODES`]); below it, [`run`] runs the points and the baselines beside them,
//! [`ratios`] turns them into the ratios the targets judge, and [`report`] writes the
//! Targets rows, the section and the "why" notes. Each of them uses this module, never the
//! other way round.

pub mod ratios;
pub mod report;
pub mod run;

use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::codec_floor::{Application, CodecFloor, EncoderSettings};
use crate::relay_load::FlowResult;
use crate::session_load::LoadResult;

/// One point of the transceiver-cost curve.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CostPoint {
    pub mode: String,
    pub sessions: usize,
    pub runs: Vec<LoadResult>,
    /// The baselines of issue 12's ratio targets, each measured right after the run at the
    /// same index of `runs` (`None` where it failed; empty for a point no target pairs).
    /// Measured half an hour apart, the same baseline moves with the machine between full runs
    /// (docs/SESSION_COST.md, "The full run at c3b51eb (lazy scratch buffers), and how far the
    /// machine moves"); seconds apart, a repetition's ratio sees the machine as it was for its
    /// own run.
    pub beside: Vec<Beside>,
}

/// A baseline measured beside one cost run (see [`CostPoint::beside`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Beside {
    /// Target 1's: the bare forwarder flat out (a passthrough point at a target's sessions).
    pub forwarder: Option<FlowResult>,
    /// Target 3's: the codec floor at the point's rate and encoder (a PCM point).
    pub floor: Option<CodecFloor>,
}

/// A kind of cost run: how the backend attaches and how the transceiver encodes.
#[derive(Debug, Clone, Copy)]
pub struct CostMode {
    /// Its name in the plan, the results and the report.
    pub name: &'static str,
    pub audio: AudioMode,
    /// The backend's PCM rate.
    pub sample_rate: u32,
    /// The transceiver's downlink encoder.
    pub encoder: EncoderSettings,
    /// Further transceiver flags.
    pub flags: &'static [&'static str],
    /// The backend carries its sessions on one `Multiplex` stream (false: a `Session` stream
    /// each).
    pub multiplex: bool,
    /// The mode this one is a baseline of: at the same session count the two run interleaved,
    /// repetition by repetition, so the machine's drift over the run falls on both alike.
    pub baseline_of: Option<&'static str>,
}

/// Every kind of cost run the plan may ask for.
pub const COST_MODES: &[CostMode] = &[
    CostMode {
        name: "pcm",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    CostMode {
        name: "passthrough",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // The rates speech models use.
    CostMode {
        name: "pcm16k",
        audio: AudioMode::Pcm,
        sample_rate: 16_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    CostMode {
        name: "pcm24k",
        audio: AudioMode::Pcm,
        sample_rate: 24_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // The cheapest encoder the transceiver ships: how many PCM sessions one loop then holds.
    CostMode {
        name: "pcm-lowdelay-c0",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings {
            bitrate: 32_000,
            complexity: 0,
            application: Application::Lowdelay,
        },
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // What read coalescing (off by default) would save: the loop reads its socket at most once
    // per millisecond under steady traffic.
    CostMode {
        name: "passthrough-coalesced",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: COALESCED,
        multiplex: true,
        baseline_of: Some("passthrough"),
    },
];

/// Every kind of cost run the plan may ask for, continued: the backend on a `Session` stream per
/// call, the baseline of what `Multiplex` saves.
const SESSION_STREAM_MODES: &[CostMode] = &[
    CostMode {
        name: "passthrough-sessions",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: false,
        baseline_of: Some("passthrough"),
    },
    CostMode {
        name: "pcm-sessions",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: false,
        baseline_of: Some("pcm"),
    },
];

/// The transceiver flags that turn read coalescing on, at the window that saved CPU.
pub const COALESCED: &[&str] = &["--read-window-us", "1000"];

/// The cost mode called `name`.
pub fn cost_mode(name: &str) -> Option<&'static CostMode> {
    COST_MODES
        .iter()
        .chain(SESSION_STREAM_MODES)
        .find(|m| m.name == name)
}

/// Arrivals of the point whose admitted sessions are a loop's PCM capacity.
pub const CAPACITY_ARRIVALS: usize = 500;

/// Arrivals per second of the PCM capacity points. Admission reads CPU over the last second,
/// and a session reaches its full cost only once its backend talks (the duty backend: 1 s of
/// every 2). Ramping PCM sessions onto one core faster than that, admission overshot and the
/// backends' uplink audio ran late; 10/s lets admission follow (docs/SESSION_COST.md,
/// "Admission by the whole process's CPU").
pub const CAPACITY_RATE: f64 = 10.0;

/// Whether target 3 reads points of `mode`: PCM with the default encoder (the floor is
/// measured with the same settings).
pub fn target3_mode(mode: &CostMode) -> bool {
    mode.audio == AudioMode::Pcm && mode.encoder == EncoderSettings::BENCH
}

/// The points of `mode` that have runs.
pub fn measured<'a>(cost: &'a [CostPoint], mode: &'a str) -> impl Iterator<Item = &'a CostPoint> {
    cost.iter()
        .filter(move |p| p.mode == mode && !p.runs.is_empty())
}

#[cfg(test)]
pub mod fixtures {
    //! Made-up points and floors for the tests of the modules below.

    use crate::codec_floor::CodecFloor;
    use crate::scenarios::cost::CostPoint;
    use crate::session_load::{LoadResult, ServerUsage};

    pub fn floor(rate: u32, decode: f64, encode: f64) -> CodecFloor {
        CodecFloor {
            sample_rate: rate,
            bitrate: 32_000,
            complexity: 5,
            decode_us_per_frame: decode,
            encode_us_per_frame: encode,
            ..CodecFloor::default()
        }
    }

    /// A point whose run spent `cpu` seconds on 1,000 uplink and 500 downlink frames, with
    /// `admitted` sessions signaled.
    pub fn point(mode: &str, sessions: usize, cpu: f64, admitted: usize) -> CostPoint {
        CostPoint {
            mode: mode.into(),
            sessions,
            runs: vec![LoadResult {
                server: Some(ServerUsage {
                    cpu_secs: cpu,
                    ..ServerUsage::default()
                }),
                window_audio_sent: 1000,
                window_audio_received: 500,
                sessions_signaled: admitted,
                ..LoadResult::default()
            }],
            beside: Vec::new(),
        }
    }
}
