//! RFC 4571 framing for ICE over TCP (RFC 6544), Sans-IO: bytes in, frames out, and the
//! bounded queue of frames waiting for a slow socket.
//!
//! # Wire format
//!
//! A TCP stream of ICE-TCP is a sequence of frames, each a 2-byte big-endian length followed
//! by that many bytes (one STUN message, DTLS record flight, or SRTP/SRTCP packet, exactly what
//! a UDP datagram would carry):
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 2 | LENGTH, u16 big-endian |
//! | 2 | LENGTH | the datagram |
//!
//! [`FrameDecoder`] reassembles frames from any chunking of the stream into one fixed buffer
//! (no allocation after construction) and refuses a length above its limit. [`WriteQueue`]
//! holds already-framed bytes that the socket did not take, up to a byte bound: past it the
//! oldest whole frames that have not started going out are dropped (and counted), so a peer
//! that stops reading costs bounded memory and never blocks the loop.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

/// Bytes of the RFC 4571 length prefix.
pub const LENGTH_PREFIX: usize = 2;

/// Why a stream is not valid RFC 4571 framing for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length prefix announces more than the configured maximum.
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// A zero-length frame (carries nothing a datagram could).
    #[error("empty frame")]
    Empty,
}

/// Incremental decoder of length-prefixed frames over one fixed buffer.
///
/// Use: write received bytes into [`FrameDecoder::spare`], [`FrameDecoder::commit`] how many,
/// then take frames with [`FrameDecoder::next_frame`] until it returns `None`.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Box<[u8]>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    max_frame: usize,
}

impl FrameDecoder {
    /// A decoder for frames of at most `max_frame` bytes; it reads up to `read_room` bytes at a
    /// time beyond one whole frame.
    pub fn new(max_frame: usize, read_room: usize) -> Self {
        FrameDecoder {
            buf: vec![0; LENGTH_PREFIX + max_frame + read_room].into_boxed_slice(),
            start: 0,
            end: 0,
            max_frame,
        }
    }

    /// Free space to read into. Moves unconsumed bytes to the front first, so there is always
    /// room for at least the rest of the largest frame.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were written at the start of [`FrameDecoder::spare`].
    pub fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The next complete frame's payload, or `None` until more bytes arrive. An error means the
    /// stream is unusable (the caller closes the connection).
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let have = &self.buf[self.start..self.end];
        let Some(&[hi, lo]) = have.first_chunk::<2>() else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if len > self.max_frame {
            return Err(FrameError::TooLarge(len));
        }
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if have.len() < LENGTH_PREFIX + len {
            return Ok(None);
        }
        let from = self.start + LENGTH_PREFIX;
        self.start = from + len;
        Ok(Some(&self.buf[from..from + len]))
    }

    /// Bytes received but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Feeds `bytes` and hands every completed frame to `on_frame` (for tests and simple
    /// callers; the loop reads into [`FrameDecoder::spare`] directly).
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        mut on_frame: impl FnMut(&[u8]),
    ) -> Result<(), FrameError> {
        while !bytes.is_empty() {
            let spare = self.spare();
            let n = spare.len().min(bytes.len());
            spare[..n].copy_from_slice(&bytes[..n]);
            self.commit(n);
            bytes = &bytes[n..];
            while let Some(frame) = self.next_frame()? {
                on_frame(frame);
            }
        }
        Ok(())
    }
}

/// The 2-byte prefix of a frame of `len` bytes; `None` when it cannot be framed.
pub fn length_prefix(len: usize) -> Option<[u8; LENGTH_PREFIX]> {
    u16::try_from(len)
        .ok()
        .filter(|l| *l > 0)
        .map(u16::to_be_bytes)
}

/// What [`WriteQueue::send`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sent {
    /// Older frames dropped to make room.
    pub dropped: u64,
    /// Whether this frame itself was dropped (larger than the whole queue).
    pub refused: bool,
}

/// Frames waiting for one TCP socket, bounded in bytes.
///
/// The frame being written (possibly half out) lives in `current`, never dropped (that would
/// corrupt the stream); whole frames behind it live in `queued` and the oldest of them go first
/// when a new frame does not fit.
#[derive(Debug)]
pub struct WriteQueue {
    /// The framed bytes being written, and how many of them went out.
    current: Vec<u8>,
    current_sent: usize,
    queued: VecDeque<u8>,
    limit: usize,
}

impl WriteQueue {
    /// A queue that holds at most `limit` bytes of framed data behind the frame in flight.
    pub fn new(limit: usize) -> Self {
        WriteQueue {
            current: Vec::new(),
            current_sent: 0,
            queued: VecDeque::new(),
            limit,
        }
    }

    /// Whether everything handed in has been written.
    pub fn is_empty(&self) -> bool {
        self.current_sent >= self.current.len() && self.queued.is_empty()
    }

    /// Bytes waiting (in flight and queued).
    pub fn len(&self) -> usize {
        self.current.len() - self.current_sent + self.queued.len()
    }

    /// Frames `payload` and writes it to `out` at once when nothing waits, else queues it.
    /// Never blocks: `out` is non-blocking, and what it does not take is kept.
    pub fn send<W: Write>(&mut self, out: &mut W, payload: &[u8]) -> io::Result<Sent> {
        let Some(prefix) = length_prefix(payload.len()) else {
            return Ok(Sent {
                refused: true,
                ..Sent::default()
            });
        };
        let mut sent = Sent::default();
        if self.is_empty() {
            // The common case: straight to the socket, no copy.
            let n = match out.write_vectored(&[IoSlice::new(&prefix), IoSlice::new(payload)]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            if n == LENGTH_PREFIX + payload.len() {
                return Ok(sent);
            }
            self.current.clear();
            self.current.extend_from_slice(&prefix);
            self.current.extend_from_slice(payload);
            self.current_sent = n;
            return Ok(sent);
        }
        let framed = LENGTH_PREFIX + payload.len();
        if framed > self.limit {
            sent.refused = true;
            return Ok(sent);
        }
        while self.queued.len() + framed > self.limit {
            self.drop_oldest();
            sent.dropped += 1;
        }
        self.queued.extend(prefix);
        self.queued.extend(payload);
        self.flush(out)?;
        Ok(sent)
    }

    /// Writes as much as `out` takes. Returns whether everything went out.
    pub fn flush<W: Write>(&mut self, out: &mut W) -> io::Result<bool> {
        loop {
            if self.current_sent >= self.current.len() && !self.next_current() {
                return Ok(true);
            }
            match out.write(&self.current[self.current_sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.current_sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the oldest queued frame into `current`; false when none is queued.
    fn next_current(&mut self) -> bool {
        let Some(len) = self.front_frame_len() else {
            return false;
        };
        self.current.clear();
        self.current.extend(self.queued.drain(..len));
        self.current_sent = 0;
        true
    }

    fn front_frame_len(&self) -> Option<usize> {
        let hi = *self.queued.front()?;
        let lo = *self.queued.get(1)?;
        Some(LENGTH_PREFIX + usize::from(u16::from_be_bytes([hi, lo])))
    }

    fn drop_oldest(&mut self) {
        let len = self.front_frame_len().unwrap_or(self.queued.len());
        self.queued.drain(..len.min(self.queued.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = length_prefix(payload.len()).unwrap().to_vec();
        v.extend_from_slice(payload);
        v
    }

    fn decode_all(d: &mut FrameDecoder, bytes: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        d.push(bytes, |f| out.push(f.to_vec()))?;
        Ok(out)
    }

    #[test]
    fn frames_split_across_reads_come_out_whole() {
        let mut d = FrameDecoder::new(1500, 512);
        let mut stream = frame(b"hello");
        stream.extend(frame(&[7; 1500]));
        let (a, b) = stream.split_at(3);
        let mut got = decode_all(&mut d, a).unwrap();
        assert!(got.is_empty());
        got.extend(decode_all(&mut d, b).unwrap());
        assert_eq!(got, vec![b"hello".to_vec(), vec![7; 1500]]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn an_oversized_length_prefix_is_an_error_before_any_payload() {
        let mut d = FrameDecoder::new(1500, 512);
        assert_eq!(
            decode_all(&mut d, &[0x05, 0xDD]),
            Err(FrameError::TooLarge(1501))
        );
        let mut d = FrameDecoder::new(1500, 512);
        assert_eq!(decode_all(&mut d, &[0, 0]), Err(FrameError::Empty));
    }

    /// A writer that takes at most `room` bytes, then says WouldBlock.
    struct Choked {
        taken: Vec<u8>,
        room: usize,
    }

    impl Write for Choked {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_the_oldest_whole_frames_and_keeps_the_stream_valid() {
        let mut q = WriteQueue::new(100);
        let mut out = Choked {
            taken: Vec::new(),
            room: 5,
        };
        // The first frame goes half out and must survive whole.
        assert_eq!(q.send(&mut out, &[1; 10]).unwrap(), Sent::default());
        let mut dropped = 0;
        for i in 2..=20u8 {
            dropped += q.send(&mut out, &[i; 30]).unwrap().dropped;
        }
        assert!(q.len() <= 100 + 12, "bounded: {}", q.len());
        assert_eq!(
            dropped,
            19 - 3,
            "room for three 32-byte frames behind the first"
        );
        out.room = usize::MAX;
        assert!(q.flush(&mut out).unwrap());
        let mut d = FrameDecoder::new(1500, 0);
        let frames = decode_all(&mut d, &out.taken).unwrap();
        assert_eq!(
            frames,
            vec![vec![1; 10], vec![18; 30], vec![19; 30], vec![20; 30]]
        );
    }

    #[test]
    fn a_frame_larger_than_the_queue_is_refused_not_queued() {
        let mut q = WriteQueue::new(16);
        let mut out = Choked {
            taken: Vec::new(),
            room: 0,
        };
        q.send(&mut out, &[1; 4]).unwrap();
        assert!(q.send(&mut out, &[2; 64]).unwrap().refused);
        assert_eq!(q.len(), 6);
    }

    proptest! {
        /// Any chunking of a stream yields the same frames.
        #[test]
        fn any_chunking_yields_the_same_frames(
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..300), 0..20),
            cuts in prop::collection::vec(1usize..64, 1..200),
        ) {
            let stream: Vec<u8> = payloads.iter().flat_map(|p| frame(p)).collect();
            let mut d = FrameDecoder::new(300, 64);
            let mut got = Vec::new();
            let mut rest = &stream[..];
            let mut i = 0;
            while !rest.is_empty() {
                let n = cuts[i % cuts.len()].min(rest.len());
                got.extend(decode_all(&mut d, &rest[..n]).unwrap());
                rest = &rest[n..];
                i += 1;
            }
            prop_assert_eq!(got, payloads);
        }

        /// Garbage never panics, and every frame it yields respects the limit.
        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
            let mut d = FrameDecoder::new(1500, 256);
            let _ = d.push(&bytes, |f| assert!(!f.is_empty() && f.len() <= 1500));
        }
    }
}
