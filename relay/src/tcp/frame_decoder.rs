//! RFC 4571 framing, incoming side: a TCP byte stream cut into frames, each a 2-byte
//! big-endian length followed by that many bytes (RFC 6544 carries STUN, DTLS, RTP and RTCP
//! this way). Sans-IO: the caller reads from its socket into [`FrameDecoder::spare`], tells
//! the decoder how much arrived with [`FrameDecoder::filled`], then takes frames with
//! [`FrameDecoder::next_frame`] until it says `None`.
//!
//! One buffer per connection, allocated once, of twice the longest frame (with its prefix):
//! frames are handed out as slices of it, partial frames stay where they are until the end of
//! the buffer is reached, then move to the front. Nothing is allocated per frame, and a peer
//! dripping one byte at a time costs one byte of buffer per byte.

/// Bytes of the RFC 4571 length prefix.
pub const PREFIX_LEN: usize = 2;

/// Why the stream cannot be decoded further (the connection must close).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length prefix announced more than the configured maximum frame.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLong {
        /// Announced length.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
}

/// Incremental RFC 4571 decoder over one bounded buffer.
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
    /// A decoder for frames of at most `max_frame` bytes (at most 65535: the prefix is 16 bits).
    pub fn new(max_frame: usize) -> Self {
        let max_frame = max_frame.min(usize::from(u16::MAX));
        Self {
            buf: vec![0u8; 2 * (PREFIX_LEN + max_frame)].into_boxed_slice(),
            start: 0,
            end: 0,
            max_frame,
            failed: None,
        }
    }

    /// Where the next read goes. Never empty once every complete frame has been taken with
    /// [`next_frame`](Self::next_frame): an incomplete frame holds at most `2 + max_frame`
    /// bytes, half the buffer.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.end == self.buf.len() && self.start > 0 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in frames {
            out.extend_from_slice(&(f.len() as u16).to_be_bytes());
            out.extend_from_slice(f);
        }
        out
    }

    /// Feeds `stream` in chunks of the given sizes (cycled), collecting frames.
    fn decode_chunked(
        d: &mut FrameDecoder,
        stream: &[u8],
        chunks: &[usize],
    ) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < stream.len() {
            let want = chunks[i % chunks.len()].max(1);
            i += 1;
            let spare = d.spare();
            assert!(
                !spare.is_empty(),
                "spare must never be empty after draining"
            );
            let n = want.min(spare.len()).min(stream.len() - at);
            spare[..n].copy_from_slice(&stream[at..at + n]);
            d.filled(n);
            at += n;
            while let Some(f) = d.next_frame()? {
                out.push(f.to_vec());
            }
        }
        Ok(out)
    }

    #[test]
    fn frames_dripped_one_byte_at_a_time_come_out_whole() {
        let frames = vec![b"stun".to_vec(), vec![0x16; 1200], vec![], vec![0x80; 3]];
        let mut d = FrameDecoder::new(1500);
        let got = decode_chunked(&mut d, &encode(&frames), &[1]).unwrap();
        assert_eq!(got, frames);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn a_partial_frame_waits_for_the_rest() {
        let mut d = FrameDecoder::new(100);
        d.spare()[..3].copy_from_slice(&[0, 4, b'a']);
        d.filled(3);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(d.buffered(), 3);
        d.spare()[..3].copy_from_slice(b"bcd");
        d.filled(3);
        assert_eq!(d.next_frame(), Ok(Some(&b"abcd"[..])));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn an_oversized_prefix_is_an_error_before_any_payload_arrives() {
        let mut d = FrameDecoder::new(1500);
        d.spare()[..2].copy_from_slice(&1501u16.to_be_bytes());
        d.filled(2);
        let e = FrameError::TooLong {
            len: 1501,
            max: 1500,
        };
        assert_eq!(d.next_frame(), Err(e));
        assert_eq!(d.next_frame(), Err(e), "the error sticks");
    }

    #[test]
    fn a_frame_of_exactly_the_maximum_is_accepted() {
        let frame = vec![7u8; 1500];
        let mut d = FrameDecoder::new(1500);
        let got = decode_chunked(&mut d, &encode(&[frame.clone(), frame.clone()]), &[4000]);
        assert_eq!(got.unwrap(), vec![frame.clone(), frame]);
    }

    #[test]
    fn the_buffer_is_twice_the_longest_frame_and_never_grows() {
        let mut d = FrameDecoder::new(100);
        assert_eq!(d.spare().len(), 204);
        let frames: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 100]).collect();
        let got = decode_chunked(&mut d, &encode(&frames), &[150, 33, 204]).unwrap();
        assert_eq!(got, frames);
        assert!(d.spare().len() <= 204);
    }

    proptest! {
        #[test]
        fn any_chunking_of_a_valid_stream_yields_the_same_frames(
            frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
            chunks in prop::collection::vec(1usize..700, 1..10),
        ) {
            let mut d = FrameDecoder::new(300);
            let got = decode_chunked(&mut d, &encode(&frames), &chunks).unwrap();
            prop_assert_eq!(got, frames);
            prop_assert_eq!(d.buffered(), 0);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_frames_stay_within_the_maximum(
            bytes in prop::collection::vec(any::<u8>(), 0..5000),
            chunks in prop::collection::vec(1usize..600, 1..8),
            max in 1usize..2048,
        ) {
            let mut d = FrameDecoder::new(max);
            let mut at = 0;
            let mut i = 0;
            'feed: while at < bytes.len() {
                let spare = d.spare();
                prop_assert!(!spare.is_empty());
                let n = chunks[i % chunks.len()].min(spare.len()).min(bytes.len() - at);
                i += 1;
                spare[..n].copy_from_slice(&bytes[at..at + n]);
                d.filled(n);
                at += n;
                loop {
                    match d.next_frame() {
                        Ok(Some(f)) => prop_assert!(f.len() <= max),
                        Ok(None) => break,
                        Err(FrameError::TooLong { len, .. }) => {
                            prop_assert!(len > max);
                            break 'feed;
                        }
                    }
                }
            }
        }
    }
}
