//! Uplink packet loss on purpose: drops outgoing RTP datagrams with a seeded RNG.
//!
//! str0m numbers RTP packets when it packetizes a written frame, so skipping a frame before the
//! writer would leave no sequence gap and the server would see no loss. Dropping the finished
//! (S)RTP datagram on its way to the socket creates a real gap. The RTP header travels in clear
//! in SRTP, so the datagram can be classified without keys. Only RTP is considered: STUN, DTLS
//! and RTCP always pass, so loss never breaks the handshake or the reports.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Decides, datagram by datagram, which outgoing RTP packets to drop.
#[derive(Debug, Clone)]
pub struct LossInjector {
    fraction: f64,
    rng: StdRng,
    rtp_seen: u64,
    dropped: u64,
}

impl LossInjector {
    /// Drops each RTP datagram with probability `fraction` (clamped to `0.0..=1.0`; NaN is 0).
    /// The same seed gives the same drop pattern.
    pub fn new(fraction: f64, seed: u64) -> Self {
        let fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        LossInjector {
            fraction,
            rng: StdRng::seed_from_u64(seed),
            rtp_seen: 0,
            dropped: 0,
        }
    }

    /// Whether `datagram`, about to be sent, should be dropped instead.
    pub fn should_drop(&mut self, datagram: &[u8]) -> bool {
        if !is_rtp(datagram) {
            return false;
        }
        self.rtp_seen += 1;
        let drop = self.fraction > 0.0 && self.rng.random_bool(self.fraction);
        if drop {
            self.dropped += 1;
        }
        drop
    }

    /// RTP datagrams offered to [`LossInjector::should_drop`] so far.
    pub fn rtp_seen(&self) -> u64 {
        self.rtp_seen
    }

    /// RTP datagrams dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The configured drop probability.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }
}

/// Whether a datagram is RTP (not RTCP): the classifier lives with the other wire formats.
pub use voxgate_proto::rtp_header::is_rtp;

#[cfg(test)]
mod tests;
