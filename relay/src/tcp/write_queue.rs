//! RFC 4571 framing, outgoing side: the bytes a TCP connection still owes its client, bounded.
//!
//! A reply is written to the socket at once when nothing is queued; only what the kernel does
//! not take waits here. When a new frame would push the queue past its byte budget, the
//! **oldest** whole frames go first (counted): for live voice a late packet is worth less than
//! a fresh one, and the relay must never wait for a slow reader. A frame already partly
//! written is never dropped (the stream would lose its framing). Every frame is treated the
//! same, STUN and DTLS included: both retransmit on their own timers, and a client that reads
//! nothing for a whole queue's worth of audio is not completing a handshake anyway.
//!
//! Sans-IO: [`WriteQueue::as_slices`] is what to hand `write_vectored`,
//! [`WriteQueue::consume`] is what the kernel took. The buffer grows on demand up to the
//! budget and is never larger (no allocation once it has grown).

use std::collections::VecDeque;

use super::frame_decoder::PREFIX_LEN;

/// Pending outgoing frames of one connection.
pub struct WriteQueue {
    bytes: VecDeque<u8>,
    /// Length (prefix included) of each queued frame, oldest first.
    frames: VecDeque<usize>,
    /// Bytes of the oldest frame already written.
    head_written: usize,
    budget: usize,
}

impl WriteQueue {
    /// A queue holding at most `budget` bytes (prefixes included).
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

    /// Queues `payload` behind its 2-byte length, dropping the oldest frames as needed to
    /// stay within the budget. `skip` bytes of the framed payload were already written
    /// (the tail of a partial direct write). Returns how many frames were dropped (the new
    /// one included, if it cannot fit at all).
    pub fn push(&mut self, payload: &[u8], skip: usize) -> u64 {
        let prefix = u16::try_from(payload.len())
            .unwrap_or(u16::MAX)
            .to_be_bytes();
        let framed = PREFIX_LEN + payload.len();
        let skip = skip.min(framed);
        let pending = framed - skip;
        if skip == 0 && pending > self.budget {
            return 1;
        }
        let mut dropped = 0;
        while self.bytes.len() + pending > self.budget && self.drop_oldest_whole_frame() {
            dropped += 1;
        }
        if skip == 0 && self.bytes.len() + pending > self.budget {
            return dropped + 1;
        }
        // A partly written frame must be queued whole (it may overshoot the budget once).
        if self.frames.is_empty() {
            self.head_written = skip;
        }
        self.frames.push_back(framed);
        for &b in prefix.iter().chain(payload).skip(skip) {
            self.bytes.push_back(b);
        }
        dropped
    }

    /// The queued bytes, in order, as at most two slices.
    pub fn as_slices(&self) -> (&[u8], &[u8]) {
        self.bytes.as_slices()
    }

    /// The kernel took the first `n` queued bytes; returns how many frames are now written
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

    /// Drops the oldest frame that has not started going out; `false` if there is none.
    fn drop_oldest_whole_frame(&mut self) -> bool {
        let (index, offset) = if self.head_written > 0 {
            // The head is partly written: the victim is the frame after it.
            (1, self.frames[0] - self.head_written)
        } else {
            (0, 0)
        };
        let Some(len) = self.frames.remove(index) else {
            return false;
        };
        self.bytes.drain(offset..offset + len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn the_tail_of_a_partial_direct_write_is_queued_without_its_head() {
        let mut q = WriteQueue::new(100);
        assert_eq!(q.push(b"hello", 3), 0);
        assert_eq!(contents(&q), b"ello");
        q.push(b"x", 0);
        q.consume(4);
        assert_eq!(contents(&q), [0, 1, b'x']);
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
}
