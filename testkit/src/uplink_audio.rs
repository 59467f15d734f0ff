//! What a client says: a test signal turned into one Opus packet per 20 ms.
//!
//! Two modes. *Live* encodes every frame as it is sent (what a real client does). *Looped*
//! encodes one second up front and replays it, so a load generator with a thousand sessions
//! spends its CPU on the network path instead of on libopus; a tone with an integer frequency
//! loops without a phase jump.

use std::sync::Arc;

use crate::opus_codec::OpusFrameEncoder;
use crate::signal::{SignalSource, FRAME_SAMPLES};

/// Frames in the pre-encoded loop (one second).
const LOOP_FRAMES: usize = 50;

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
        packets: Vec<Arc<[u8]>>,
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

    /// Encodes one second of `source` now and replays it forever.
    pub fn looped(mut source: SignalSource) -> Result<Self, opus::Error> {
        let mut encoder = OpusFrameEncoder::new()?;
        let mut packets = Vec::with_capacity(LOOP_FRAMES);
        for _ in 0..LOOP_FRAMES {
            let frame = source.next_frame();
            packets.push(Arc::from(encoder.encode(&frame)?));
        }
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
mod tests {
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
    fn looped_uplink_repeats_after_one_second() {
        let mut looped = UplinkAudio::looped(SignalSource::sine(700.0, 0.3)).unwrap();
        let first = looped.next_packet().unwrap();
        for _ in 1..LOOP_FRAMES {
            looped.next_packet().unwrap();
        }
        assert_eq!(looped.next_packet().unwrap(), first);
    }
}
