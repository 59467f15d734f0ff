//! The bridge's codec settings: which PCM rates an owner may ask for, and the downlink
//! encoder's settings (the transceiver's flags, and what an owner chose of them).

use crate::metrics::CodecKey;

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("unsupported sample rate {0} (use 16000, 24000 or 48000)")]
    SampleRate(u32),
    #[error("opus: {0}")]
    Opus(#[from] opus::Error),
}

pub fn valid_sample_rate(rate: u32) -> Result<u32, BridgeError> {
    match rate {
        0 => Ok(48_000),
        16_000 | 24_000 | 48_000 => Ok(rate),
        r => Err(BridgeError::SampleRate(r)),
    }
}

/// The downlink encoder's libopus application (`--opus-application`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum OpusApplication {
    /// SILK for speech at low rates, hybrid above; the default.
    #[default]
    Voip,
    /// Tuned for fidelity to the input rather than speech intelligibility.
    Audio,
    /// RESTRICTED_LOWDELAY: CELT only, no SILK and no speech analysis; the cheapest encoder,
    /// meant for synthetic (TTS) speech.
    Lowdelay,
}

impl OpusApplication {
    /// The flag's value: `voip`, `audio` or `lowdelay`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpusApplication::Voip => "voip",
            OpusApplication::Audio => "audio",
            OpusApplication::Lowdelay => "lowdelay",
        }
    }

    pub fn to_opus(self) -> opus::Application {
        match self {
            OpusApplication::Voip => opus::Application::Voip,
            OpusApplication::Audio => opus::Application::Audio,
            OpusApplication::Lowdelay => opus::Application::LowDelay,
        }
    }
}

/// Downlink encoder settings (`--opus-bitrate`, `--opus-complexity`, `--opus-application`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EncoderSettings {
    pub bitrate: i32,
    pub complexity: i32,
    pub application: OpusApplication,
}

/// An owner's own choice of downlink encoder (its `Attach.encoder`): what it leaves `None`
/// keeps the transceiver's setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderChoice {
    pub application: Option<OpusApplication>,
    /// 0 to 10 (checked where the attach is parsed).
    pub complexity: Option<i32>,
}

impl EncoderSettings {
    /// These settings with `choice` applied.
    pub fn chosen(self, choice: EncoderChoice) -> EncoderSettings {
        EncoderSettings {
            bitrate: self.bitrate,
            complexity: choice.complexity.unwrap_or(self.complexity),
            application: choice.application.unwrap_or(self.application),
        }
    }

    /// A mono encoder at `rate` with these settings, as every PCM session's downlink has.
    pub fn encoder(&self, rate: u32) -> Result<opus::Encoder, opus::Error> {
        let mut enc = opus::Encoder::new(rate, opus::Channels::Mono, self.application.to_opus())?;
        enc.set_bitrate(opus::Bitrate::Bits(self.bitrate))?;
        enc.set_complexity(self.complexity)?;
        // In-band FEC is SILK's (LBRR): a CELT-only low-delay encoder has none to add.
        if self.application != OpusApplication::Lowdelay {
            enc.set_inband_fec(true)?;
        }
        Ok(enc)
    }
}

/// A PCM owner's backend played its first frame: from now on the session costs its encoder
/// (admission counts it at that cost before the CPU window shows it; see
/// `control::process_load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StartedTalking {
    pub rate: u32,
    pub encoder: EncoderSettings,
}

impl StartedTalking {
    /// How the metrics label this session's codecs.
    pub fn codec_key(&self) -> CodecKey {
        CodecKey {
            rate: self.rate,
            application: self.encoder.application.as_str(),
            complexity: self.encoder.complexity,
        }
    }
}
