//! The passthrough downlink's queue: Opus packets copied back to back into one byte queue, so
//! it holds at most [`MAX_QUEUED_OPUS_FRAMES`] × 1500 bytes whatever buffers the backend's
//! messages arrived in (a `Bytes` kept from a message would pin the message's whole receive
//! buffer).

use std::collections::VecDeque;
use std::time::Duration;

use super::frame::FRAME;

/// Downlink audio the loop holds, PCM or Opus; beyond it, backend messages wait in the channel
/// (and gRPC flow control pushes back on the backend).
pub const MAX_QUEUED_DOWNLINK: Duration = Duration::from_secs(30);
/// Passthrough Opus packets (20 ms each) in [`MAX_QUEUED_DOWNLINK`].
pub const MAX_QUEUED_OPUS_FRAMES: usize =
    (MAX_QUEUED_DOWNLINK.as_millis() / FRAME.as_millis()) as usize;

#[derive(Default)]
pub struct OpusQueue {
    bytes: VecDeque<u8>,
    lens: VecDeque<u16>,
}

impl OpusQueue {
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_full(&self) -> bool {
        self.lens.len() >= MAX_QUEUED_OPUS_FRAMES
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.lens.clear();
    }

    /// Queues one packet of at most `MAX_OPUS_PACKET` bytes (the caller checked).
    pub fn push(&mut self, packet: &[u8]) {
        self.bytes.extend(packet);
        self.lens.push_back(packet.len() as u16);
    }

    /// Moves the oldest packet into `out`; returns its length.
    pub fn pop_into(&mut self, out: &mut [u8]) -> Option<usize> {
        let n = usize::from(self.lens.pop_front()?);
        for (dst, src) in out.iter_mut().zip(self.bytes.drain(..n)) {
            *dst = src;
        }
        Some(n)
    }
}
