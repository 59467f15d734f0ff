use super::*;
use proptest::prelude::*;

fn encode(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|f| encode_frame(f).unwrap())
        .collect()
}

/// Feeds `stream` in chunks of the given sizes (cycled), taking every frame after each read
/// as a loop does, and checking that a drained decoder always has room for a whole frame.
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
        let room = PREFIX_LEN + d.max_frame();
        let spare = d.spare();
        assert!(
            spare.len() >= room,
            "a drained decoder has room for a whole frame: {} < {room}",
            spare.len()
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

/// Everything `bytes` holds, read at once.
fn decode_all(d: &mut FrameDecoder, bytes: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
    decode_chunked(d, bytes, &[usize::MAX])
}

// ---- Helpers for clients ----------------------------------------------------------------------

#[test]
fn a_frame_is_its_big_endian_length_then_its_bytes() {
    assert_eq!(encode_frame(b"abc").unwrap(), [0, 3, b'a', b'b', b'c']);
    assert_eq!(encode_frame(b"").unwrap(), [0, 0]);
    assert_eq!(length_prefix(0x1234), Ok([0x12, 0x34]));
    assert_eq!(length_prefix(MAX_FRAME), Ok([0xFF, 0xFF]));
    let e = FrameError::TooLong {
        len: MAX_FRAME + 1,
        max: MAX_FRAME,
    };
    assert_eq!(length_prefix(MAX_FRAME + 1), Err(e));
    assert_eq!(encode_frame(&vec![0; MAX_FRAME + 1]), Err(e));
    assert_eq!(e.as_str(), "too_long");
}

#[test]
fn blocking_helpers_read_one_frame_and_leave_the_next() {
    let mut wire = Vec::new();
    write_frame(&mut wire, b"first").unwrap();
    write_frame(&mut wire, b"").unwrap();
    write_frame(&mut wire, b"third").unwrap();
    let mut r = &wire[..];
    assert_eq!(read_frame(&mut r).unwrap(), b"first");
    assert_eq!(read_frame(&mut r).unwrap(), b"");
    assert_eq!(read_frame(&mut r).unwrap(), b"third");
    let e = read_frame(&mut r).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    // A truncated frame is an error, not a short payload.
    let mut r = &[0u8, 5, b'a', b'b'][..];
    assert_eq!(
        read_frame(&mut r).unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
    let e = write_frame(&mut wire, &vec![0; MAX_FRAME + 1]).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

// ---- FrameDecoder -------------------------------------------------------------------------------

#[test]
fn frames_dripped_one_byte_at_a_time_come_out_whole() {
    let frames = vec![b"stun".to_vec(), vec![0x16; 1200], vec![], vec![0x80; 3]];
    let mut d = FrameDecoder::new(1500);
    let got = decode_chunked(&mut d, &encode(&frames), &[1]).unwrap();
    assert_eq!(got, frames);
    assert_eq!(d.buffered(), 0);
}

#[test]
fn frames_split_across_reads_come_out_whole() {
    let mut d = FrameDecoder::new(1500);
    let stream = encode(&[b"hello".to_vec(), vec![7; 1500]]);
    let (a, b) = stream.split_at(3);
    let mut got = decode_all(&mut d, a).unwrap();
    assert!(got.is_empty());
    got.extend(decode_all(&mut d, b).unwrap());
    assert_eq!(got, vec![b"hello".to_vec(), vec![7; 1500]]);
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
    // The same through a whole read ([0x05, 0xDD] = 1501).
    let mut d = FrameDecoder::new(1500);
    assert_eq!(decode_all(&mut d, &[0x05, 0xDD]), Err(e));
}

#[test]
fn an_empty_frame_is_framing_not_an_error() {
    // What an empty frame means is the caller's call (a loop closes the connection).
    let mut d = FrameDecoder::new(1500);
    assert_eq!(
        decode_all(&mut d, &[0, 0, 0, 1, 9]),
        Ok(vec![vec![], vec![9]])
    );
}

#[test]
fn a_frame_of_exactly_the_maximum_is_accepted() {
    let frame = vec![7u8; 1500];
    let mut d = FrameDecoder::new(1500);
    let got = decode_chunked(&mut d, &encode(&[frame.clone(), frame.clone()]), &[4000]);
    assert_eq!(got.unwrap(), vec![frame.clone(), frame]);
}

#[test]
fn the_longest_frame_is_what_sixteen_bits_can_announce() {
    let mut d = FrameDecoder::new(usize::MAX);
    assert_eq!(d.max_frame(), MAX_FRAME);
    let frame = vec![3u8; MAX_FRAME];
    let got = decode_chunked(&mut d, &encode(&[frame.clone(), vec![1]]), &[10_000]);
    assert_eq!(got.unwrap(), vec![frame, vec![1]]);
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
        chunks in prop_oneof![
            // Reads of any size, several frames or a frame and a half at a time.
            prop::collection::vec(1usize..700, 1..10),
            // Many small reads, as a slow client's segments arrive.
            prop::collection::vec(1usize..64, 1..200),
        ],
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
            prop_assert!(spare.len() >= PREFIX_LEN + max);
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

    /// Garbage read all at once never panics either.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut d = FrameDecoder::new(1500);
        if let Ok(frames) = decode_all(&mut d, &bytes) {
            prop_assert!(frames.iter().all(|f| f.len() <= 1500));
        }
    }
}

// ---- WriteQueue, Sans-IO core -------------------------------------------------------------------

fn contents(q: &WriteQueue) -> Vec<u8> {
    let (a, b) = q.as_slices();
    [a, b].concat()
}

#[test]
fn frames_are_queued_behind_their_length_prefix() {
    let mut q = WriteQueue::new(100);
    assert_eq!(q.push(b"abc", 0), 0);
    assert_eq!(q.push(b"", 0), 0);
    assert_eq!(contents(&q), [0, 3, b'a', b'b', b'c', 0, 0]);
}

#[test]
fn past_the_budget_the_oldest_frames_are_dropped() {
    let mut q = WriteQueue::new(12);
    q.push(b"1111", 0);
    q.push(b"2222", 0);
    assert_eq!(q.push(b"3333", 0), 1);
    assert_eq!(
        contents(&q),
        [0, 4, b'2', b'2', b'2', b'2', 0, 4, b'3', b'3', b'3', b'3']
    );
    assert!(q.len() <= 12);
}

#[test]
fn a_partly_written_frame_is_kept_and_the_next_one_dropped() {
    let mut q = WriteQueue::new(12);
    q.push(b"1111", 0);
    q.push(b"2222", 0);
    q.consume(3); // "\0\x04" and one '1' are on the wire
    assert_eq!(q.push(b"3333", 0), 1);
    assert_eq!(
        contents(&q),
        [b'1', b'1', b'1', 0, 4, b'3', b'3', b'3', b'3']
    );
    assert_eq!(q.consume(3), 1);
    assert_eq!(contents(&q), [0, 4, b'3', b'3', b'3', b'3']);
    assert_eq!(q.consume(6), 1);
    assert!(q.is_empty());
}

#[test]
fn a_frame_larger_than_the_budget_is_dropped_alone() {
    let mut q = WriteQueue::new(8);
    q.push(b"12", 0);
    assert_eq!(q.push(&[9; 20], 0), 1);
    assert_eq!(contents(&q), [0, 2, b'1', b'2']);
    // Too long to frame at all: dropped the same way, never a wrong prefix.
    let mut q = WriteQueue::new(usize::MAX);
    assert_eq!(q.push(&vec![0; MAX_FRAME + 1], 0), 1);
    assert!(q.is_empty());
}

#[test]
fn the_tail_of_a_partial_direct_write_is_queued_without_its_head() {
    let mut q = WriteQueue::new(100);
    assert_eq!(q.push(b"hello", 3), 0);
    assert_eq!(contents(&q), b"ello");
    q.push(b"x", 0);
    q.consume(4);
    assert_eq!(contents(&q), [0, 1, b'x']);
    // Only the second prefix byte went out.
    let mut q = WriteQueue::new(100);
    assert_eq!(q.push(b"ab", 1), 0);
    assert_eq!(contents(&q), [2, b'a', b'b']);
    assert_eq!(q.consume(3), 1);
    // Even over budget, a started frame is never dropped.
    let mut q = WriteQueue::new(4);
    assert_eq!(q.push(&[1; 10], 1), 0);
    assert_eq!(q.len(), 11);
    assert_eq!(q.push(b"y", 0), 1, "the new frame cannot fit behind it");
}

#[test]
fn memory_stays_within_the_budget_under_a_flood() {
    let mut q = WriteQueue::new(1000);
    let mut dropped = 0;
    for i in 0..10_000u32 {
        dropped += q.push(&i.to_be_bytes().repeat(30), 0);
        assert!(q.len() <= 1000);
        if i % 7 == 0 {
            q.consume(5);
        }
    }
    assert!(dropped > 9000);
    assert!(q.bytes.capacity() <= 2048, "{}", q.bytes.capacity());
}

// ---- WriteQueue against a writer ----------------------------------------------------------------

/// A non-blocking writer that takes at most `room` bytes, then answers `full`: an error
/// (WouldBlock unless a test says otherwise), or with `None` a write of zero bytes.
struct Choked {
    taken: Vec<u8>,
    room: usize,
    full: Option<io::ErrorKind>,
}

impl Choked {
    fn new(room: usize) -> Self {
        Self::failing(room, Some(io::ErrorKind::WouldBlock))
    }

    fn failing(room: usize, full: Option<io::ErrorKind>) -> Self {
        Choked {
            taken: Vec::new(),
            room,
            full,
        }
    }
}

impl Write for Choked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.room == 0 {
            return self.full.map_or(Ok(0), |kind| Err(kind.into()));
        }
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(self.room - n);
            self.taken.extend_from_slice(&b[..take]);
            n += take;
        }
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `send` to a writer that does not fail.
fn send_ok(q: &mut WriteQueue, out: &mut Choked, payload: &[u8]) -> Sent {
    let (sent, r) = q.send(out, payload);
    r.unwrap();
    sent
}

/// `flush` to a writer that does not fail.
fn flush_ok(q: &mut WriteQueue, out: &mut Choked) -> Sent {
    let (sent, r) = q.flush(out);
    r.unwrap();
    sent
}

#[test]
fn with_nothing_waiting_a_frame_goes_straight_out() {
    let mut q = WriteQueue::new(100);
    let mut out = Choked::new(usize::MAX);
    let sent = send_ok(&mut q, &mut out, b"hello");
    assert_eq!(
        sent,
        Sent {
            bytes: 7,
            frames: 1,
            dropped: 0
        }
    );
    assert!(q.is_empty());
    assert_eq!(out.taken, encode_frame(b"hello").unwrap());
}

#[test]
fn a_full_queue_drops_the_oldest_whole_frames_and_keeps_the_stream_valid() {
    let mut q = WriteQueue::new(100);
    let mut out = Choked::new(5);
    // The first frame goes half out and must survive whole.
    let sent = send_ok(&mut q, &mut out, &[1; 10]);
    assert_eq!(
        sent,
        Sent {
            bytes: 5,
            frames: 0,
            dropped: 0
        }
    );
    let mut dropped = 0;
    for i in 2..=20u8 {
        let sent = send_ok(&mut q, &mut out, &[i; 30]);
        dropped += sent.dropped;
        assert!(q.len() <= 100, "bounded: {}", q.len());
    }
    assert_eq!(
        dropped,
        19 - 2,
        "room for two 32-byte frames behind the 7 bytes still owed"
    );
    out.room = usize::MAX;
    let sent = flush_ok(&mut q, &mut out);
    assert_eq!(sent.frames, 3);
    assert!(q.is_empty());
    let frames = decode_all(&mut FrameDecoder::new(1500), &out.taken).unwrap();
    assert_eq!(frames, vec![vec![1; 10], vec![19; 30], vec![20; 30]]);
}

#[test]
fn a_frame_larger_than_the_queue_is_refused_not_queued() {
    let mut q = WriteQueue::new(16);
    let mut out = Choked::new(0);
    let sent = send_ok(&mut q, &mut out, &[1; 4]);
    assert_eq!(sent, Sent::default());
    let sent = send_ok(&mut q, &mut out, &[2; 64]);
    assert_eq!(sent.dropped, 1);
    assert_eq!(q.len(), 6);
    // Too long to frame at all, with nothing waiting: refused the same way.
    let mut q = WriteQueue::new(usize::MAX);
    let sent = send_ok(
        &mut q,
        &mut Choked::new(usize::MAX),
        &vec![0; MAX_FRAME + 1],
    );
    assert_eq!(sent.dropped, 1);
    assert!(q.is_empty());
}

#[test]
fn a_failing_writer_ends_the_connection_and_what_went_out_before_is_reported() {
    let mut q = WriteQueue::new(100);
    let mut out = Choked::failing(0, Some(io::ErrorKind::BrokenPipe));
    let (sent, r) = q.send(&mut out, b"x");
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(sent, Sent::default());

    let mut q = WriteQueue::new(100);
    q.push(b"abc", 0);
    q.push(b"def", 0);
    let mut out = Choked::failing(6, Some(io::ErrorKind::ConnectionReset));
    let (sent, r) = q.flush(&mut out);
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(sent.bytes, 6);
    assert_eq!(sent.frames, 1);

    // A writer that takes nothing is a dead connection, not a reason to spin.
    let mut q = WriteQueue::new(100);
    q.push(b"abc", 0);
    let (_, r) = q.flush(&mut Choked::failing(0, None));
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WriteZero);
}

#[derive(Debug, Clone)]
enum Op {
    Send(Vec<u8>),
    Writable(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..200).prop_map(Op::Send),
        1 => (0usize..400).prop_map(Op::Writable),
    ]
}

proptest! {
    /// Whatever the writer takes and whatever is dropped, the peer sees a valid stream of
    /// whole frames, in order, each one that was sent; the queue stays within its budget
    /// (plus the one frame that may be partly out); and every frame is accounted for once.
    #[test]
    fn any_slow_reader_sees_whole_frames_in_order_and_memory_stays_bounded(
        ops in prop::collection::vec(op(), 0..200),
        budget in 0usize..600,
        first_room in 0usize..50,
    ) {
        let mut q = WriteQueue::new(budget);
        let mut out = Choked::new(first_room);
        let mut sent_payloads = Vec::new();
        let (mut written, mut dropped, mut bytes) = (0u64, 0u64, 0usize);
        for (i, op) in ops.into_iter().enumerate() {
            let sent = match op {
                Op::Send(mut p) => {
                    // Tag each payload so the order can be checked.
                    p.splice(0..0, (i as u16).to_be_bytes());
                    let (sent, r) = q.send(&mut out, &p);
                    prop_assert!(r.is_ok());
                    sent_payloads.push(p);
                    sent
                }
                Op::Writable(room) => {
                    out.room = room;
                    let (sent, r) = q.flush(&mut out);
                    prop_assert!(r.is_ok());
                    sent
                }
            };
            written += sent.frames;
            dropped += sent.dropped;
            bytes += sent.bytes;
            prop_assert!(q.len() <= budget.max(PREFIX_LEN + 2 + 200));
        }
        out.room = usize::MAX;
        let (sent, r) = q.flush(&mut out);
        prop_assert!(r.is_ok());
        written += sent.frames;
        bytes += sent.bytes;
        prop_assert_eq!(bytes, out.taken.len());
        let got = decode_all(&mut FrameDecoder::new(MAX_FRAME), &out.taken).unwrap();
        prop_assert_eq!(got.len() as u64, written);
        prop_assert_eq!(written + dropped, sent_payloads.len() as u64);
        // `got` is `sent_payloads` with the dropped ones left out, in order.
        let mut rest = sent_payloads.iter();
        for frame in &got {
            prop_assert!(rest.any(|p| p == frame), "out of order or corrupted");
        }
    }
}
