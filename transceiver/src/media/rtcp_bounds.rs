//! What a caller's RTCP (and RTP) may claim about the network, before any of it becomes a
//! session's quality.
//!
//! Every number str0m's statistics carry comes from the caller: the uplink's jitter from the
//! RTP timestamps it stamps, the downlink's jitter, cumulative loss and highest sequence from
//! its receiver reports, the round trip from the LSR/DLSR it echoes. A hostile or broken
//! client can make each read anything (a forged DLSR gives a round trip of up to 18 hours,
//! a 24-bit loss field 16 million packets). Here each value is checked against what a real
//! network can produce: one outside is dropped (the last plausible value stands) or clamped
//! to the possible, and counted by [`RtcpField`] (`voxgate_rtcp_implausible_total{field}`),
//! so it never reaches the session JSON, the histograms or the backend as truth.
//!
//! Reports for SSRCs the session does not know never get here (str0m drops them), and a flood
//! of RTCP is bounded before it reaches str0m, like any other datagrams, by the session's
//! receive budget.

use std::time::Duration;

pub use crate::metrics::RtcpField;

/// The uplink's statistics, from str0m's `MediaIngressStats`.
#[derive(Debug, Clone, Copy)]
pub struct IngressReport {
    /// Jitter of our last receiver report, RTP units (`None`: implausible).
    pub jitter: Option<u32>,
    /// Fraction lost of our last receiver report.
    pub loss: Option<f32>,
    pub packets: u64,
    pub packets_lost: u64,
}

/// The downlink's statistics, from str0m's `MediaEgressStats`.
#[derive(Debug, Clone, Copy)]
pub struct EgressReport {
    pub rtt: Option<Duration>,
    /// Fraction lost of the client's receiver reports since the last event.
    pub loss: Option<f32>,
    pub packets: u64,
    /// The client's last receiver report.
    pub remote: Option<RemoteReport>,
}

/// The client's last receiver report of our downlink, bounded here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RemoteReport {
    /// Its interarrival jitter, RTP units (`None`: implausible).
    pub jitter: Option<u32>,
    /// Its cumulative loss, and the packets it covers (up to its highest sequence number).
    pub lost: u64,
    pub expected: u64,
}

/// The longest round trip believed: no conversation survives more (the E-model has a call
/// unusable from about 800 ms one way).
pub const MAX_RTT: Duration = Duration::from_secs(10);
/// The largest interarrival jitter believed, in Opus's RTP units (48 kHz): 5 s. A jitter
/// buffer would give up far sooner; a figure beyond it is a clock that lies, not a network.
pub const MAX_JITTER_RTP: u32 = 5 * 48_000;
/// RFC 3550's cumulative loss is a signed 24-bit field: duplicates make it negative, which
/// str0m hands on as a large unsigned number.
const LOST_SIGN_BIT: u64 = 1 << 23;

/// Implausible values seen, by field, since they were last taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Implausible(pub [u32; RtcpField::COUNT]);

impl Implausible {
    fn count(&mut self, field: RtcpField) {
        self.0[field as usize] = self.0[field as usize].saturating_add(1);
    }

    pub fn any(&self) -> bool {
        self.0.iter().any(|n| *n > 0)
    }
}

/// The uplink's statistics (str0m measured them, from the caller's RTP), bounded.
pub fn ingress(st: &str0m::stats::MediaIngressStats, bad: &mut Implausible) -> IngressReport {
    IngressReport {
        jitter: bounded_jitter(st.jitter, bad),
        loss: st.loss,
        packets: st.packets,
        packets_lost: st.packets_lost,
    }
}

/// The downlink's statistics (from the caller's receiver reports), bounded.
pub fn egress(st: &str0m::stats::MediaEgressStats, bad: &mut Implausible) -> EgressReport {
    let rtt = st.rtt.filter(|rtt| {
        let ok = *rtt <= MAX_RTT;
        if !ok {
            bad.count(RtcpField::Rtt);
        }
        ok
    });
    let remote = st.remote.as_ref().map(|r| {
        // Packets sent up to the report's highest sequence number (vendored str0m patch 3,
        // which keeps it within what was sent: a forged sequence number reads as a report
        // covering everything, or nothing, and its loss is then clamped below).
        let expected = r.packets_expected.min(st.packets);
        let mut lost = if r.packets_lost >= LOST_SIGN_BIT {
            0 // negative: duplicates, no loss
        } else {
            r.packets_lost
        };
        if lost > expected {
            bad.count(RtcpField::Lost);
            lost = expected;
        }
        RemoteReport {
            jitter: bounded_jitter(r.jitter, bad),
            lost,
            expected,
        }
    });
    EgressReport {
        rtt,
        loss: st.loss.filter(|l| (0.0..=1.0).contains(l)),
        packets: st.packets,
        remote,
    }
}

fn bounded_jitter(jitter: u32, bad: &mut Implausible) -> Option<u32> {
    if jitter > MAX_JITTER_RTP {
        bad.count(RtcpField::Jitter);
        None
    } else {
        Some(jitter)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use str0m::media::Mid;
    use str0m::stats::{MediaEgressStats, MediaIngressStats, RemoteIngressStats};

    use super::*;

    fn egress_stats(rtt_ms: u64, expected: u64, lost: u64, jitter: u32) -> MediaEgressStats {
        MediaEgressStats {
            mid: Mid::from("0"),
            rid: None,
            bytes: 100_000,
            packets: 1000,
            firs: 0,
            plis: 0,
            nacks: 0,
            rtt: Some(Duration::from_millis(rtt_ms)),
            loss: Some(0.01),
            timestamp: Instant::now(),
            remote: Some(RemoteIngressStats {
                jitter,
                maximum_sequence_number: (20_000 + expected).into(),
                packets_lost: lost,
                packets_expected: expected,
            }),
        }
    }

    #[test]
    fn a_plausible_report_passes_unchanged() {
        let mut bad = Implausible::default();
        let r = egress(&egress_stats(80, 900, 9, 96), &mut bad);
        assert_eq!(r.rtt, Some(Duration::from_millis(80)));
        let remote = r.remote.unwrap();
        assert_eq!(
            (remote.jitter, remote.lost, remote.expected),
            (Some(96), 9, 900)
        );
        assert!(!bad.any());
    }

    #[test]
    fn absurd_values_are_dropped_or_clamped_and_counted() {
        let mut bad = Implausible::default();
        // An hours-long round trip, loss beyond what was sent, a sequence beyond it, jitter
        // of an hour.
        let r = egress(
            &egress_stats(3_600_000, 50_000, 60_000, 3600 * 48_000),
            &mut bad,
        );
        assert_eq!(r.rtt, None);
        let remote = r.remote.unwrap();
        assert_eq!(remote.lost, 1000, "never over 100 %");
        assert_eq!(remote.jitter, None);
        for f in [RtcpField::Rtt, RtcpField::Lost, RtcpField::Jitter] {
            assert_eq!(bad.0[f as usize], 1, "{f:?}: {bad:?}");
        }
    }

    #[test]
    fn a_negative_cumulative_loss_is_duplicates_not_an_attack() {
        let mut bad = Implausible::default();
        let minus_two = (1 << 24) - 2;
        let r = egress(&egress_stats(20, 1000, minus_two, 10), &mut bad);
        assert_eq!(r.remote.unwrap().lost, 0);
        assert!(!bad.any());
    }

    #[test]
    fn uplink_jitter_from_lying_timestamps_is_dropped() {
        let mut bad = Implausible::default();
        let st = MediaIngressStats {
            mid: Mid::from("0"),
            rid: None,
            bytes: 1,
            packets: 10,
            firs: 0,
            plis: 0,
            nacks: 0,
            jitter: u32::MAX,
            rtt: None,
            loss: Some(0.0),
            timestamp: Instant::now(),
            remote: None,
            packets_lost: 0,
        };
        assert_eq!(ingress(&st, &mut bad).jitter, None);
        assert_eq!(bad.0[RtcpField::Jitter as usize], 1);
    }
}
