//! What a client says: a test signal turned into one Opus packet per 20 ms.
//!
//! Two modes. *Live* encodes every frame as it is sent (what a real client does). *Looped*
//! encodes one second up front and replays it, so a load generator with a thousand sessions
//! spends its CPU on the network path instead of on libopus; a tone with an integer frequency
//! loops without a phase jump.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::opus_codec::OpusFrameEncoder;
use crate::signal::{SignalSource, FRAME_SAMPLES};

/// Frames in the pre-encoded loop (one second).
const LOOP_FRAMES: usize = 50;
/// Frames encoded and thrown away before the loop is recorded. A fresh encoder's first frames
/// are its start-up (frames of up to 211 bytes, some in hybrid mode, before it settles on
/// 128-byte CELT frames for these tones). A loop of them would restart the caller's stream every
/// second, which no caller's encoder does. (What it changes in decoding cost is small, as
/// `loadgen codec-floor` shows; the point is that the transceiver decodes what callers send.)
const WARM_UP_FRAMES: usize = 50;
/// Distinct loops kept for reuse (the load generator uses 16 tones; tests a handful).
const LOOP_CACHE_MAX: usize = 4096;

type Loop = Arc<[Arc<[u8]>]>;
/// What a loop is kept under: the source's `SignalSource::key`.
type LoopKey = (u64, u64, u64);

/// Loops already encoded in this process, by the source that made them. Encoding one is 50
/// frames of Opus work: a load generator opening many sessions a second would spend a large
/// share of its core on it, the core that must also send every session's audio on time.
fn loop_cache() -> &'static Mutex<HashMap<LoopKey, Loop>> {
    static CACHE: OnceLock<Mutex<HashMap<LoopKey, Loop>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Produces the Opus payload of each uplink RTP packet.
pub struct UplinkAudio {
    mode: Mode,
}

enum Mode {
    Live {
        source: SignalSource,
        encoder: OpusFrameEncoder,
        frame: Vec<i16>,
    },
    Looped {
        packets: Loop,
        next: usize,
    },
}

impl UplinkAudio {
    /// Encodes each frame of `source` on demand.
    pub fn live(source: SignalSource) -> Result<Self, opus::Error> {
        Ok(UplinkAudio {
            mode: Mode::Live {
                source,
                encoder: OpusFrameEncoder::new()?,
                frame: vec![0; FRAME_SAMPLES],
            },
        })
    }

    /// Encodes one second of `source` (or reuses the same source's second, encoded before
    /// in this process) and replays it forever.
    pub fn looped(mut source: SignalSource) -> Result<Self, opus::Error> {
        let key = source.key();
        let cached = loop_cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let packets = match cached {
            Some(p) => p,
            None => {
                let mut encoder = OpusFrameEncoder::new()?;
                // The loop is a steady second, not the encoder's first: see `WARM_UP_FRAMES`.
                for _ in 0..WARM_UP_FRAMES {
                    encoder.encode(&source.next_frame())?;
                }
                let mut packets = Vec::with_capacity(LOOP_FRAMES);
                for _ in 0..LOOP_FRAMES {
                    let frame = source.next_frame();
                    packets.push(Arc::from(encoder.encode(&frame)?));
                }
                let packets: Loop = packets.into();
                let mut cache = loop_cache().lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() < LOOP_CACHE_MAX {
                    cache.insert(key, packets.clone());
                }
                packets
            }
        };
        Ok(UplinkAudio {
            mode: Mode::Looped { packets, next: 0 },
        })
    }

    /// The payload of the next 20 ms packet.
    pub fn next_packet(&mut self) -> Result<Arc<[u8]>, opus::Error> {
        match &mut self.mode {
            Mode::Live {
                source,
                encoder,
                frame,
            } => {
                source.fill(frame);
                Ok(Arc::from(encoder.encode(frame)?))
            }
            Mode::Looped { packets, next } => {
                let p = packets[*next].clone();
                *next = (*next + 1) % packets.len();
                Ok(p)
            }
        }
    }
}

#[cfg(test)]
mod tests;
