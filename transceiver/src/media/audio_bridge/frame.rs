//! The bridge's unit of audio, shared by both directions: one 20 ms Opus frame.

use std::time::Duration;

/// One Opus frame: 20 ms.
pub const FRAME: Duration = Duration::from_millis(20);
/// RTP clock ticks per frame (48 kHz clock for Opus).
pub const RTP_TICKS_PER_FRAME: u32 = 960;
/// Largest Opus packet sent or taken from a backend (RFC 6716 allows 1275 bytes per frame).
pub const MAX_OPUS_PACKET: usize = 1500;

/// PCM samples in one frame at `rate` Hz.
pub fn frame_samples(rate: u32) -> usize {
    (rate / 50) as usize
}

/// `samples` at `rate` Hz, in milliseconds.
pub fn ms(samples: u64, rate: u32) -> u64 {
    samples * 1000 / u64::from(rate)
}

/// `buf` grown to at least `len` (zeros): scratch buffers are allocated on first use, and
/// after that this is a length check. A session no backend owns needs none, a passthrough one
/// only its packet buffer, so they are not allocated up front.
pub fn scratch<T: Copy + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    if buf.len() < len {
        buf.resize(len, T::default());
    }
    &mut buf[..len]
}
