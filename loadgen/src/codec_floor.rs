//! The codec floor: what libopus alone costs for the frames one PCM-mode session carries,
//! measured in this process with the thread's CPU clock.
//!
//! Uplink frames are the clients' own (the very packets `loadgen sessions` sends), decoded
//! at the backend's attach rate; downlink frames are the backend's duty-cycle tone, encoded
//! with the transceiver's encoder settings (application, bitrate, complexity, in-band FEC). Per
//! session-second a PCM session decodes 50 frames and encodes `50 × duty` frames, so the
//! floor is `50 × decode + 50 × duty × encode`. Nothing else a transceiver must do (SRTP,
//! RTP, ICE, sockets, gRPC) is in it: it is the cost no implementation can go below.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};
use voxgate_testkit::uplink_audio::UplinkAudio;
use voxgate_testkit::SignalSource;

use crate::proc_stat::thread_cpu_time;
use crate::session_load::signaling::{uplink_tone_hz, UPLINK_AMPLITUDE, UPLINK_TONES};
use crate::stats::median;

/// The transceiver's `--opus-application` values, by the same names.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Application {
    /// SILK for speech (the transceiver's default).
    #[default]
    Voip,
    Audio,
    /// RESTRICTED_LOWDELAY: CELT only.
    Lowdelay,
}

impl Application {
    pub fn to_opus(self) -> opus::Application {
        match self {
            Application::Voip => opus::Application::Voip,
            Application::Audio => opus::Application::Audio,
            Application::Lowdelay => opus::Application::LowDelay,
        }
    }

    /// The value of the transceiver's `--opus-application`.
    pub fn as_arg(self) -> &'static str {
        match self {
            Application::Voip => "voip",
            Application::Audio => "audio",
            Application::Lowdelay => "lowdelay",
        }
    }
}

/// A downlink encoder's settings, as the transceiver's flags set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderSettings {
    pub bitrate: i32,
    pub complexity: i32,
    pub application: Application,
}

impl EncoderSettings {
    /// What the suite starts its transceivers with, unless a run says otherwise (the
    /// transceiver's own defaults).
    pub const BENCH: EncoderSettings = EncoderSettings {
        bitrate: 32_000,
        complexity: 5,
        application: Application::Voip,
    };

    /// A mono encoder at `rate` built the way the transceiver builds its downlink encoder.
    pub fn encoder(&self, rate: u32) -> Result<opus::Encoder, opus::Error> {
        let mut enc = opus::Encoder::new(rate, opus::Channels::Mono, self.application.to_opus())?;
        enc.set_bitrate(opus::Bitrate::Bits(self.bitrate))?;
        enc.set_complexity(self.complexity)?;
        // As in the transceiver: in-band FEC is SILK's, a CELT-only encoder has none.
        if self.application != Application::Lowdelay {
            enc.set_inband_fec(true)?;
        }
        Ok(enc)
    }
}

/// The PCM rates a backend may attach at (libopus codes at each natively).
pub const BACKEND_RATES: [u32; 3] = [16_000, 24_000, 48_000];

#[derive(clap::Args, Debug, Clone)]
pub struct CodecFloorArgs {
    /// Downlink encoder bitrate (the transceiver's --opus-bitrate).
    #[arg(long, default_value_t = 32_000)]
    pub bitrate: i32,
    /// Downlink encoder complexity (the transceiver's --opus-complexity).
    #[arg(long, default_value_t = 5)]
    pub complexity: i32,
    /// Downlink encoder application (the transceiver's --opus-application).
    #[arg(long, value_enum, default_value_t = Application::Voip)]
    pub application: Application,
    /// Backend PCM rate: 16000, 24000 or 48000.
    #[arg(long, default_value_t = 48_000)]
    pub sample_rate: u32,
    /// Fraction of time the downlink plays.
    #[arg(long, default_value_t = 0.5)]
    pub duty: f64,
    /// Frames per measurement.
    #[arg(long, default_value_t = 3000)]
    pub frames: usize,
    /// Measurements; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Decoders and encoders the frames go through in turn (1: the floor, one warm codec;
    /// more: as a transceiver holding that many sessions meets each codec's state again only
    /// after all the others ran).
    #[arg(long, default_value_t = 1)]
    pub codecs: usize,
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// libopus cost per frame and per PCM session-second.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CodecFloor {
    pub sample_rate: u32,
    pub bitrate: i32,
    pub complexity: i32,
    pub application: Application,
    pub duty: f64,
    /// Codec pairs the frames went through in turn (1: the floor).
    pub codecs: usize,
    pub decode_us_per_frame: f64,
    pub encode_us_per_frame: f64,
    /// CPU seconds per session-second: 50 decodes + 50 × duty encodes.
    pub cpu_per_session_sec: f64,
    /// Same with a full-time downlink (an echo backend).
    pub cpu_per_session_sec_full_duplex: f64,
}

impl CodecFloorArgs {
    /// The encoder these arguments describe.
    pub fn settings(&self) -> EncoderSettings {
        EncoderSettings {
            bitrate: self.bitrate,
            complexity: self.complexity,
            application: self.application,
        }
    }
}

pub fn run(a: &CodecFloorArgs) -> anyhow::Result<CodecFloor> {
    if !BACKEND_RATES.contains(&a.sample_rate) {
        bail!(
            "unsupported sample rate {} (use 16000, 24000 or 48000)",
            a.sample_rate
        );
    }
    let frames = a.frames.max(50);
    // Uplink packets exactly as the load generator's clients send them: each client tone's
    // looped second (`UplinkAudio::looped`), 500 frames of one tone, then the next.
    let mut streams = (0..UPLINK_TONES)
        .map(|k| UplinkAudio::looped(SignalSource::sine(uplink_tone_hz(k), UPLINK_AMPLITUDE)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut packets = Vec::with_capacity(frames);
    for i in 0..frames {
        let n = streams.len();
        let stream = &mut streams[i / 500 % n];
        packets.push(stream.next_packet()?);
    }
    // Downlink PCM as the duty-cycle backend plays it, at the attach rate: the 48 kHz tone
    // decimated (exact for 16 and 24 kHz, and a 330 Hz tone has nothing to alias).
    let frame_len = (a.sample_rate / 50) as usize;
    let step = (48_000 / a.sample_rate) as usize;
    let mut down_tone = SignalSource::sine(330.0, 0.25);
    let pcm: Vec<Vec<i16>> = (0..frames)
        .map(|_| {
            down_tone
                .next_frame()
                .iter()
                .step_by(step)
                .copied()
                .collect()
        })
        .collect();

    let mut dec_samples = Vec::new();
    let mut enc_samples = Vec::new();
    let mut out = vec![0i16; 5760];
    let mut bytes = vec![0u8; 1500];
    let n = a.codecs.max(1);
    for _ in 0..a.repeats.max(1) {
        let mut decoders = (0..n)
            .map(|_| opus::Decoder::new(a.sample_rate, opus::Channels::Mono))
            .collect::<Result<Vec<_>, _>>()?;
        let t = thread_cpu_time();
        for (i, p) in packets.iter().enumerate() {
            let decoder = &mut decoders[i % n];
            std::hint::black_box(decoder.decode(p, &mut out[..frame_len], false)?);
        }
        dec_samples.push((thread_cpu_time() - t).as_secs_f64() * 1e6 / frames as f64);

        let mut encoders = (0..n)
            .map(|_| a.settings().encoder(a.sample_rate))
            .collect::<Result<Vec<_>, _>>()?;
        let t = thread_cpu_time();
        for (i, f) in pcm.iter().enumerate() {
            std::hint::black_box(encoders[i % n].encode(f, &mut bytes)?);
        }
        enc_samples.push((thread_cpu_time() - t).as_secs_f64() * 1e6 / frames as f64);
    }
    let decode = median(&dec_samples).unwrap_or(0.0);
    let encode = median(&enc_samples).unwrap_or(0.0);
    Ok(CodecFloor {
        sample_rate: a.sample_rate,
        bitrate: a.bitrate,
        complexity: a.complexity,
        application: a.application,
        duty: a.duty,
        codecs: n,
        decode_us_per_frame: decode,
        encode_us_per_frame: encode,
        cpu_per_session_sec: (50.0 * decode + 50.0 * a.duty * encode) / 1e6,
        cpu_per_session_sec_full_duplex: (50.0 * decode + 50.0 * encode) / 1e6,
    })
}

/// The floor measured at `rate`, if one was.
pub fn floor_at(floors: &[CodecFloor], rate: u32) -> Option<&CodecFloor> {
    floors.iter().find(|f| f.sample_rate == rate)
}
