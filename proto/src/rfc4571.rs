//! RFC 4571 framing, the byte stream of ICE over TCP (RFC 6544): the one implementation the
//! relay, the transceiver, the test kit and the load generator all use.
//!
//! # Wire format
//!
//! A TCP connection of ICE-TCP carries a sequence of frames, each a 2-byte big-endian length
//! followed by that many bytes: one STUN message, DTLS record flight or SRTP/SRTCP packet,
//! exactly what a UDP datagram would carry.
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 2 | LENGTH, u16 big-endian (0 to 65535) |
//! | 2 | LENGTH | the datagram |
//!
//! A zero-length frame is valid framing; whether it means anything is the caller's call (the
//! relay forwards it, a transceiver loop closes the connection as garbage).
//!
//! # Pieces and their guarantees
//!
//! * [`FrameDecoder`], incoming: Sans-IO. The caller reads its socket into
//!   [`spare`](FrameDecoder::spare), says how much arrived with
//!   [`filled`](FrameDecoder::filled) and takes frames with
//!   [`next_frame`](FrameDecoder::next_frame) until `None`. One buffer per connection,
//!   allocated once at twice the longest frame (with its prefix); frames are handed out as
//!   slices of it, so nothing is allocated or copied per frame. Any chunking works, one byte
//!   at a time included (a byte costs a byte of buffer). A length prefix above the configured
//!   maximum is refused with [`FrameError::TooLong`] before any of its payload is buffered,
//!   and the error sticks: the stream cannot be resynchronised, the connection must close.
//! * [`WriteQueue`], outgoing: the bytes a connection still owes its peer, bounded by a byte
//!   budget. A frame goes straight to the socket when nothing waits; only what the kernel does
//!   not take is queued. When a new frame would push the queue past its budget, the **oldest
//!   whole frames** are dropped and counted (for live media a late packet is worth less than a
//!   fresh one, and a loop must never wait for a slow reader). A frame already partly written
//!   is never dropped, so the stream keeps its framing. The core is Sans-IO
//!   ([`push`](WriteQueue::push), [`as_slices`](WriteQueue::as_slices),
//!   [`consume`](WriteQueue::consume)); [`send`](WriteQueue::send) and
//!   [`flush`](WriteQueue::flush) drive it against any non-blocking [`Write`] and report what
//!   happened ([`Sent`]) for the caller's counters. The buffer grows on demand up to the
//!   budget and is not reallocated once it has.
//! * [`length_prefix`] and [`encode_frame`] for clients that frame their own buffers, and
//!   [`read_frame`] / [`write_frame`], blocking one-frame helpers over any [`Read`] /
//!   [`Write`] for tests and tools (the media loops use the two types above).
//!
//! ```
//! use voxgate_proto::rfc4571::{encode_frame, FrameDecoder};
//!
//! let stream = [encode_frame(b"stun").unwrap(), encode_frame(b"dtls").unwrap()].concat();
//! let mut d = FrameDecoder::new(1500);
//! let mut got = Vec::new();
//! for byte in stream {
//!     d.spare()[0] = byte; // a socket read of one byte
//!     d.filled(1);
//!     while let Some(frame) = d.next_frame().unwrap() {
//!         got.push(frame.to_vec());
//!     }
//! }
//! assert_eq!(got, [b"stun".to_vec(), b"dtls".to_vec()]);
//! ```

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};

/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 2;

/// Longest payload the 16-bit prefix can announce.
pub const MAX_FRAME: usize = u16::MAX as usize;

/// Why bytes are not (or cannot become) a frame for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length above the maximum: announced by a peer's prefix, or a payload too long to
    /// frame.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLong {
        /// Announced (or attempted) length.
        len: usize,
        /// The limit it broke.
        max: usize,
    },
}

impl FrameError {
    /// Short snake_case label for drop and close counters.
    pub fn as_str(&self) -> &'static str {
        match self {
            FrameError::TooLong { .. } => "too_long",
        }
    }
}

/// The prefix of a frame carrying `len` bytes.
pub fn length_prefix(len: usize) -> Result<[u8; PREFIX_LEN], FrameError> {
    u16::try_from(len)
        .map(u16::to_be_bytes)
        .map_err(|_| FrameError::TooLong {
            len,
            max: MAX_FRAME,
        })
}

/// `payload` behind its prefix, as a new buffer (clients and tests; the loops never build one).
pub fn encode_frame(payload: &[u8]) -> Result<Vec<u8>, FrameError> {
    let prefix = length_prefix(payload.len())?;
    let mut out = Vec::with_capacity(PREFIX_LEN + payload.len());
    out.extend_from_slice(&prefix);
    out.extend_from_slice(payload);
    Ok(out)
}

/// Blocking: reads exactly one frame from `r` and returns its payload. Never reads a byte of
/// the next frame, so it can be called again on the same stream.
pub fn read_frame(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut prefix = [0u8; PREFIX_LEN];
    r.read_exact(&mut prefix)?;
    let mut payload = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// Blocking: writes `payload` as one frame (one `write_all`). A payload too long to frame is
/// an [`io::ErrorKind::InvalidInput`] error and writes nothing.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    let framed =
        encode_frame(payload).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    w.write_all(&framed)
}

/// Incremental decoder of one connection's frames over one bounded buffer.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Box<[u8]>,
    /// First byte not yet handed out.
    start: usize,
    /// End of the bytes received.
    end: usize,
    max_frame: usize,
    failed: Option<FrameError>,
}

impl FrameDecoder {
    /// A decoder for frames of at most `max_frame` bytes (at most [`MAX_FRAME`]: the prefix is
    /// 16 bits). Allocates its buffer, `2 × (2 + max_frame)` bytes, here and never again.
    pub fn new(max_frame: usize) -> Self {
        let max_frame = max_frame.min(MAX_FRAME);
        Self {
            buf: vec![0u8; 2 * (PREFIX_LEN + max_frame)].into_boxed_slice(),
            start: 0,
            end: 0,
            max_frame,
            failed: None,
        }
    }

    /// The longest frame accepted.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Where the next read goes. Once every complete frame has been taken with
    /// [`next_frame`](Self::next_frame) it holds at least a whole longest frame: an incomplete
    /// frame is shorter than `2 + max_frame`, half the buffer, and it is moved to the front
    /// when the free tail gets shorter than that (at most once per half buffer consumed).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 && self.buf.len() - self.end < PREFIX_LEN + self.max_frame {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were written at the start of [`spare`](Self::spare).
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The next complete frame's payload, `None` until more bytes arrive, or the error that
    /// ends the stream (returned again on every later call).
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let pending = &self.buf[self.start..self.end];
        let Some((prefix, rest)) = pending.split_first_chunk::<PREFIX_LEN>() else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes(*prefix));
        if len > self.max_frame {
            let e = FrameError::TooLong {
                len,
                max: self.max_frame,
            };
            self.failed = Some(e);
            return Err(e);
        }
        if rest.len() < len {
            return Ok(None);
        }
        let at = self.start + PREFIX_LEN;
        self.start = at + len;
        if self.start == self.end {
            // Everything taken: the next read starts at the front, no copy needed.
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(&self.buf[at..at + len]))
    }

    /// Bytes received but not yet handed out as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }
}

/// What [`WriteQueue::send`] or [`WriteQueue::flush`] did, for the caller's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sent {
    /// Bytes the writer took (prefixes included).
    pub bytes: usize,
    /// Frames that are now written whole.
    pub frames: u64,
    /// Frames dropped: queued ones (oldest first) to make room, and the new one itself if it
    /// could not be queued at all (longer than the budget, or than [`MAX_FRAME`]).
    pub dropped: u64,
}

/// Pending outgoing frames of one connection, at most `budget` bytes (prefixes included; a
/// partly written frame is kept whole even if it alone overshoots).
#[derive(Debug)]
pub struct WriteQueue {
    bytes: VecDeque<u8>,
    /// Length (prefix included) of each queued frame, oldest first.
    frames: VecDeque<usize>,
    /// Bytes of the oldest frame already written.
    head_written: usize,
    budget: usize,
}

impl WriteQueue {
    /// A queue holding at most `budget` bytes. Nothing is allocated until something waits.
    pub fn new(budget: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            frames: VecDeque::new(),
            head_written: 0,
            budget,
        }
    }

    /// Nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Queues `payload` behind its prefix, dropping the oldest frames as needed to stay
    /// within the budget. `skip` bytes of the framed payload were already written (the tail
    /// of a partial direct write; such a frame is queued whole, even over the budget).
    /// Returns how many frames were dropped, the new one included if it cannot fit at all.
    pub fn push(&mut self, payload: &[u8], skip: usize) -> u64 {
        let Ok(prefix) = length_prefix(payload.len()) else {
            return 1;
        };
        let framed = PREFIX_LEN + payload.len();
        let skip = skip.min(framed);
        let pending = framed - skip;
        if pending == 0 {
            return 0; // already written whole
        }
        if skip == 0 && pending > self.budget {
            return 1;
        }
        let mut dropped = 0;
        while self.bytes.len() + pending > self.budget && self.drop_oldest_whole_frame() {
            dropped += 1;
        }
        if skip == 0 && self.bytes.len() + pending > self.budget {
            // Only a partly written frame is left, and this one does not fit behind it.
            return dropped + 1;
        }
        if self.frames.is_empty() {
            self.head_written = skip;
        }
        self.frames.push_back(framed);
        if skip < PREFIX_LEN {
            self.bytes.extend(&prefix[skip..]);
            self.bytes.extend(payload);
        } else {
            self.bytes.extend(&payload[skip - PREFIX_LEN..]);
        }
        dropped
    }

    /// The queued bytes, in order, as at most two slices (for `write_vectored`).
    pub fn as_slices(&self) -> (&[u8], &[u8]) {
        self.bytes.as_slices()
    }

    /// The writer took the first `n` queued bytes; returns how many frames are now written
    /// whole.
    pub fn consume(&mut self, n: usize) -> u64 {
        let n = n.min(self.bytes.len());
        self.bytes.drain(..n);
        self.head_written += n;
        let mut done = 0;
        while let Some(&head) = self.frames.front() {
            if self.head_written < head {
                break;
            }
            self.head_written -= head;
            self.frames.pop_front();
            done += 1;
        }
        if self.frames.is_empty() {
            self.head_written = 0;
        }
        done
    }

    /// Frames `payload` for `out`: written at once (one vectored write, no copy) when nothing
    /// waits, else queued behind what does, then as much written as `out` takes. Never
    /// blocks: `out` is non-blocking and what it does not take is kept. An error is the
    /// connection's end; what happened before it is still reported.
    pub fn send<W: Write>(&mut self, out: &mut W, payload: &[u8]) -> (Sent, io::Result<()>) {
        if !self.is_empty() {
            let dropped = self.push(payload, 0);
            let (mut sent, result) = self.flush(out);
            sent.dropped = dropped;
            return (sent, result);
        }
        let Ok(prefix) = length_prefix(payload.len()) else {
            return (
                Sent {
                    dropped: 1,
                    ..Sent::default()
                },
                Ok(()),
            );
        };
        let written = loop {
            match out.write_vectored(&[IoSlice::new(&prefix), IoSlice::new(payload)]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return (Sent::default(), Err(e)),
            }
        };
        let mut sent = Sent {
            bytes: written,
            ..Sent::default()
        };
        if written >= PREFIX_LEN + payload.len() {
            sent.frames = 1;
        } else {
            sent.dropped = self.push(payload, written);
        }
        (sent, Ok(()))
    }

    /// Writes as much of the queue as `out` takes (until it would block). A writer that
    /// takes nothing ([`io::ErrorKind::WriteZero`]) or fails ends the connection; what was
    /// written before is still reported.
    pub fn flush<W: Write>(&mut self, out: &mut W) -> (Sent, io::Result<()>) {
        let mut sent = Sent::default();
        while !self.is_empty() {
            let (a, b) = self.as_slices();
            match out.write_vectored(&[IoSlice::new(a), IoSlice::new(b)]) {
                Ok(0) => return (sent, Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    sent.bytes += n;
                    sent.frames += self.consume(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (sent, Err(e)),
            }
        }
        (sent, Ok(()))
    }

    /// Drops the oldest frame that has not started going out; `false` if there is none.
    fn drop_oldest_whole_frame(&mut self) -> bool {
        let (index, offset) = match self.frames.front() {
            // The head is partly written: the victim is the frame after it.
            Some(&head) if self.head_written > 0 => (1, head - self.head_written),
            _ => (0, 0),
        };
        let Some(len) = self.frames.remove(index) else {
            return false;
        };
        self.bytes.drain(offset..offset + len);
        true
    }
}

#[cfg(test)]
mod tests;
