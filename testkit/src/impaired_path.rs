//! One direction of a bad network, Sans-IO: seeded random loss of RTP datagrams and a fixed
//! one-way delay. [`ImpairedProxy`](crate::ImpairedProxy) runs one per direction between a
//! browser and the transceiver.
//!
//! Loss applies to RTP only (classified in clear, as [`LossInjector`] does): STUN, DTLS and
//! RTCP always pass. Losing RTCP too would only thin out the receiver reports both ends compute
//! their statistics from and make a test wait longer for them; the loss a caller hears, and
//! that the statistics must find, is media loss. Delay applies to every datagram, so the ICE
//! checks' round trip grows with the media's. The delay is the same for every datagram, so the
//! queue is first in, first out and the order is kept: the path adds no jitter of its own.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::loss_injector::LossInjector;

/// What one direction does to the datagrams crossing it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Impairment {
    /// Probability (0–1) that an RTP datagram is dropped.
    pub loss: f64,
    /// Added one-way delay.
    pub delay: Duration,
}

/// One direction's delay line and loss (see the module docs).
#[derive(Debug)]
pub struct ImpairedPath {
    loss: LossInjector,
    delay: Duration,
    /// Datagrams on their way: when each leaves, which flow it belongs to, its bytes.
    queue: VecDeque<(Instant, usize, Vec<u8>)>,
    /// Buffers of datagrams already released, reused for the next ones.
    spare: Vec<Vec<u8>>,
}

impl ImpairedPath {
    /// The same seed drops the same datagrams.
    pub fn new(impairment: Impairment, seed: u64) -> Self {
        ImpairedPath {
            loss: LossInjector::new(impairment.loss, seed),
            delay: impairment.delay,
            queue: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// A datagram of `flow` arrives at `now`: dropped (false) or queued to leave after the
    /// delay (true).
    pub fn push(&mut self, now: Instant, flow: usize, datagram: &[u8]) -> bool {
        if self.loss.should_drop(datagram) {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(datagram);
        self.queue.push_back((now + self.delay, flow, buf));
        true
    }

    /// When the next queued datagram is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.queue.front().map(|(at, _, _)| *at)
    }

    /// Hands every datagram due by `now` to `send` (its flow and bytes), oldest first.
    pub fn release_due(&mut self, now: Instant, mut send: impl FnMut(usize, &[u8])) {
        while self.queue.front().is_some_and(|(at, _, _)| *at <= now) {
            let (_, flow, buf) = self.queue.pop_front().expect("a front");
            send(flow, &buf);
            self.spare.push(buf);
        }
    }

    /// RTP datagrams that arrived so far.
    pub fn rtp_seen(&self) -> u64 {
        self.loss.rtp_seen()
    }

    /// RTP datagrams dropped so far.
    pub fn rtp_dropped(&self) -> u64 {
        self.loss.dropped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTP header (version 2, payload type 111) and a little payload.
    fn rtp(seq: u16) -> Vec<u8> {
        let mut d = vec![0x80, 111];
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(&[0; 8]);
        d.extend_from_slice(&[0xab; 40]);
        d
    }

    /// A STUN binding request's first bytes.
    fn stun() -> Vec<u8> {
        let mut d = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        d.extend_from_slice(&[7; 12]);
        d
    }

    #[test]
    fn holds_each_datagram_for_the_delay_and_keeps_the_order() {
        let t0 = Instant::now();
        let delay = Duration::from_millis(40);
        let mut path = ImpairedPath::new(Impairment { loss: 0.0, delay }, 1);
        assert!(path.push(t0, 0, &rtp(1)));
        assert!(path.push(t0 + Duration::from_millis(5), 1, &stun()));
        assert_eq!(path.poll_timeout(), Some(t0 + delay));

        let mut out = Vec::new();
        path.release_due(t0 + delay - Duration::from_millis(1), |f, d| {
            out.push((f, d.to_vec()))
        });
        assert!(out.is_empty(), "released early");
        path.release_due(t0 + delay, |f, d| out.push((f, d.to_vec())));
        assert_eq!(out, vec![(0, rtp(1))]);
        path.release_due(t0 + Duration::from_secs(1), |f, d| {
            out.push((f, d.to_vec()))
        });
        assert_eq!(out[1], (1, stun()));
        assert_eq!(path.poll_timeout(), None);
    }

    #[test]
    fn no_delay_releases_at_once() {
        let t0 = Instant::now();
        let mut path = ImpairedPath::new(Impairment::default(), 1);
        assert!(path.push(t0, 3, &rtp(9)));
        let mut n = 0;
        path.release_due(t0, |f, _| {
            assert_eq!(f, 3);
            n += 1
        });
        assert_eq!(n, 1);
    }

    #[test]
    fn drops_about_the_fraction_of_rtp_and_never_stun() {
        let t0 = Instant::now();
        let mut path = ImpairedPath::new(
            Impairment {
                loss: 0.1,
                delay: Duration::ZERO,
            },
            7,
        );
        let mut kept = 0;
        for i in 0..10_000u16 {
            kept += usize::from(path.push(t0, 0, &rtp(i)));
            assert!(path.push(t0, 0, &stun()), "STUN dropped");
            path.release_due(t0, |_, _| {});
        }
        assert_eq!(path.rtp_seen(), 10_000);
        assert_eq!(path.rtp_dropped() as usize, 10_000 - kept);
        // 10 % of 10,000: 1,000 with a standard deviation of 30.
        assert!(
            (880..=1120).contains(&path.rtp_dropped()),
            "{} dropped",
            path.rtp_dropped()
        );
        // Buffers are reused: never more than the two in flight at a time.
        assert!(path.spare.len() <= 2, "{} spare buffers", path.spare.len());
    }

    #[test]
    fn the_same_seed_drops_the_same_datagrams() {
        let t0 = Instant::now();
        let run = |seed| {
            let mut p = ImpairedPath::new(
                Impairment {
                    loss: 0.3,
                    delay: Duration::ZERO,
                },
                seed,
            );
            (0..200u16)
                .map(|i| p.push(t0, 0, &rtp(i)))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
