//! Opus at the client's edges: 20 ms PCM16 frames in, RTP payloads out, and back.
//!
//! Thin wrappers around `opus` (libopus) fixed to what a WebRTC voice client uses: 48 kHz mono,
//! `Application::Voip`, one 20 ms frame per packet. Buffers are owned and reused.

use opus::{Application, Channels};

use crate::signal::{FRAME_SAMPLES, SAMPLE_RATE};

/// Largest Opus packet we produce (RFC 6716 allows 1275 bytes per frame).
const MAX_PACKET: usize = 1275;
/// Longest Opus frame a decoder can return: 120 ms at 48 kHz.
const MAX_FRAME_SAMPLES: usize = 5760;

/// Encodes 20 ms mono PCM16 frames into Opus packets.
pub struct OpusFrameEncoder {
    enc: opus::Encoder,
    out: Vec<u8>,
}

impl OpusFrameEncoder {
    /// A 48 kHz mono VoIP encoder with libopus' default bitrate.
    pub fn new() -> Result<Self, opus::Error> {
        Ok(OpusFrameEncoder {
            enc: opus::Encoder::new(SAMPLE_RATE, Channels::Mono, Application::Voip)?,
            out: vec![0; MAX_PACKET],
        })
    }

    /// Encodes one frame (normally [`FRAME_SAMPLES`] samples); the returned packet borrows an
    /// internal buffer that the next call overwrites.
    pub fn encode(&mut self, pcm: &[i16]) -> Result<&[u8], opus::Error> {
        let n = self.enc.encode(pcm, &mut self.out)?;
        Ok(&self.out[..n])
    }
}

/// Decodes Opus packets into 48 kHz mono PCM16, with packet-loss concealment for gaps.
pub struct OpusFrameDecoder {
    dec: opus::Decoder,
    out: Vec<i16>,
}

impl OpusFrameDecoder {
    /// A 48 kHz mono decoder.
    pub fn new() -> Result<Self, opus::Error> {
        Ok(OpusFrameDecoder {
            dec: opus::Decoder::new(SAMPLE_RATE, Channels::Mono)?,
            out: vec![0; MAX_FRAME_SAMPLES],
        })
    }

    /// Decodes one packet; the returned samples borrow an internal buffer.
    pub fn decode(&mut self, packet: &[u8]) -> Result<&[i16], opus::Error> {
        if packet.is_empty() {
            // An empty slice means "lost" to libopus; an empty payload is not a packet.
            return Ok(&[]);
        }
        let n = self.dec.decode(packet, &mut self.out, false)?;
        Ok(&self.out[..n])
    }

    /// Synthesises one 20 ms frame for a lost packet (libopus PLC).
    pub fn conceal(&mut self) -> Result<&[i16], opus::Error> {
        let n = self
            .dec
            .decode(&[], &mut self.out[..FRAME_SAMPLES], false)?;
        Ok(&self.out[..n])
    }
}

#[cfg(test)]
mod tests;
