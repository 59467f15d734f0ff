//! Per-session loss accounting, Sans-IO: what each session should have delivered, what it did,
//! and a run summary that names how many sessions lost anything.
//!
//! **Uplink** (client → transceiver → backend) is judged at the backend from the RTP clock
//! of what arrives: with one 20 ms Opus frame per packet, the frames expected between the first
//! and the last received are `(last_ts − first_ts) / 960 + 1`; frames the transceiver
//! synthesised (`concealed`: the network lost the packet) do not count as received. A session
//! whose client sent audio but whose backend got nothing lost everything it sent. PCM frames
//! also carry a gapless frame counter, so a hole in it is a frame the transceiver dropped on
//! its way to a slow backend, told apart from network loss.
//!
//! **Downlink** (backend → transceiver → client) is judged at the client from RTP sequence
//! gaps (the testkit's counters).

use serde::{Deserialize, Serialize};

/// RTP clock ticks per 20 ms Opus frame (48 kHz clock).
pub const TICKS_PER_FRAME: u64 = 960;

/// Uplink frames of one session, as its backend saw them.
#[derive(Debug, Clone, Default)]
pub struct UplinkTrack {
    first_ts: Option<u64>,
    last_raw: u32,
    /// Extended timestamp of `last_raw`.
    cur_ts: u64,
    /// Highest extended timestamp seen.
    last_ts: u64,
    last_seq: Option<u64>,
    /// Frames carrying a received packet.
    pub received: u64,
    /// Frames the transceiver synthesised for lost packets.
    pub concealed: u64,
    /// Frames missing from the transceiver's gapless frame counter (dropped before the backend).
    pub bridge_dropped: u64,
}

impl UplinkTrack {
    /// Records one frame: its RTP timestamp, whether it was concealed, and (PCM mode) the
    /// transceiver's frame counter.
    pub fn on_frame(&mut self, rtp_ts: u32, concealed: bool, sequence: Option<u64>) {
        let ts = match self.first_ts {
            None => {
                // Start the extended clock high enough that a small backwards step cannot
                // underflow it.
                let ext = (1u64 << 32) + u64::from(rtp_ts);
                self.first_ts = Some(ext);
                ext
            }
            Some(_) => {
                let delta = rtp_ts.wrapping_sub(self.last_raw) as i32;
                self.cur_ts.saturating_add_signed(i64::from(delta))
            }
        };
        self.last_raw = rtp_ts;
        self.cur_ts = ts;
        self.last_ts = self.last_ts.max(ts);
        if concealed {
            self.concealed += 1;
        } else {
            self.received += 1;
        }
        if let Some(seq) = sequence {
            if let Some(prev) = self.last_seq {
                if seq > prev + 1 {
                    self.bridge_dropped += seq - prev - 1;
                }
            }
            self.last_seq = Some(seq);
        }
    }

    /// Frames the RTP clock says should have arrived, first to last.
    pub fn expected(&self) -> u64 {
        match self.first_ts {
            Some(first) => self.last_ts.saturating_sub(first) / TICKS_PER_FRAME + 1,
            None => 0,
        }
    }
}

/// Loss of one session, both ways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLoss {
    pub uplink_expected: u64,
    pub uplink_lost: u64,
    pub downlink_expected: u64,
    pub downlink_lost: u64,
}

impl SessionLoss {
    /// Combines the backend's view of the uplink with the client's counters.
    ///
    /// `client_sent` is the RTP packets the client handed to its socket; it only matters when
    /// the backend received nothing at all (then all of it was lost). `downlink_received` and
    /// `downlink_lost` are the client's downlink packet count and sequence-gap count.
    pub fn from_parts(
        uplink: Option<&UplinkTrack>,
        client_sent: u64,
        downlink_received: u64,
        downlink_lost: u64,
    ) -> SessionLoss {
        let (uplink_expected, uplink_lost) = match uplink {
            Some(t) if t.received > 0 => {
                let expected = t.expected().max(t.received);
                (expected, expected - t.received)
            }
            _ => (client_sent, client_sent),
        };
        SessionLoss {
            uplink_expected,
            uplink_lost,
            downlink_expected: downlink_received + downlink_lost,
            downlink_lost,
        }
    }

    /// Whether this session lost anything either way.
    pub fn lossy(&self) -> bool {
        self.uplink_lost > 0 || self.downlink_lost > 0
    }
}

/// Loss over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LossSummary {
    pub sessions: u64,
    pub sessions_with_uplink_loss: u64,
    pub sessions_with_downlink_loss: u64,
    pub uplink_expected: u64,
    pub uplink_lost: u64,
    pub downlink_expected: u64,
    pub downlink_lost: u64,
    /// Lost / expected over all sessions (0 when nothing was expected).
    pub uplink_loss_ratio: f64,
    pub downlink_loss_ratio: f64,
    /// The worst single session's uplink loss ratio.
    pub worst_uplink_loss_ratio: f64,
    pub worst_downlink_loss_ratio: f64,
}

impl LossSummary {
    /// Adds up per-session losses.
    pub fn of(sessions: &[SessionLoss]) -> LossSummary {
        let ratio = |lost: u64, expected: u64| {
            if expected == 0 {
                0.0
            } else {
                lost as f64 / expected as f64
            }
        };
        let mut s = LossSummary {
            sessions: sessions.len() as u64,
            ..LossSummary::default()
        };
        for l in sessions {
            s.uplink_expected += l.uplink_expected;
            s.uplink_lost += l.uplink_lost;
            s.downlink_expected += l.downlink_expected;
            s.downlink_lost += l.downlink_lost;
            s.sessions_with_uplink_loss += u64::from(l.uplink_lost > 0);
            s.sessions_with_downlink_loss += u64::from(l.downlink_lost > 0);
            s.worst_uplink_loss_ratio = s
                .worst_uplink_loss_ratio
                .max(ratio(l.uplink_lost, l.uplink_expected));
            s.worst_downlink_loss_ratio = s
                .worst_downlink_loss_ratio
                .max(ratio(l.downlink_lost, l.downlink_expected));
        }
        s.uplink_loss_ratio = ratio(s.uplink_lost, s.uplink_expected);
        s.downlink_loss_ratio = ratio(s.downlink_lost, s.downlink_expected);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(frames: impl IntoIterator<Item = (u32, bool)>) -> UplinkTrack {
        let mut t = UplinkTrack::default();
        for (i, (ts, concealed)) in frames.into_iter().enumerate() {
            t.on_frame(ts, concealed, Some(i as u64));
        }
        t
    }

    #[test]
    fn a_clean_session_loses_nothing() {
        let t = track((0..100).map(|i| (5000 + i * 960, false)));
        let l = SessionLoss::from_parts(Some(&t), 100, 50, 0);
        assert_eq!(l.uplink_expected, 100);
        assert_eq!(l.uplink_lost, 0);
        assert!(!l.lossy());
    }

    #[test]
    fn concealed_frames_count_as_lost() {
        // Packets 10 and 11 lost in the network: the transceiver conceals them.
        let t = track((0..50u32).map(|i| (i * 960, i == 10 || i == 11)));
        assert_eq!((t.received, t.concealed, t.bridge_dropped), (48, 2, 0));
        let l = SessionLoss::from_parts(Some(&t), 50, 0, 0);
        assert_eq!((l.uplink_expected, l.uplink_lost), (50, 2));
        assert!(l.lossy());
    }

    #[test]
    fn a_timestamp_gap_without_concealment_counts_too() {
        // Passthrough (no frame counter): packets 20..30 never arrive.
        let mut t = UplinkTrack::default();
        for i in (0..20u32).chain(30..40) {
            t.on_frame(i * 960, false, None);
        }
        let l = SessionLoss::from_parts(Some(&t), 40, 0, 0);
        assert_eq!((l.uplink_expected, l.uplink_lost), (40, 10));
    }

    #[test]
    fn frames_dropped_before_the_backend_are_told_apart() {
        let mut t = UplinkTrack::default();
        for (seq, i) in [(0, 0u32), (1, 1), (4, 4), (5, 5)] {
            t.on_frame(i * 960, false, Some(seq));
        }
        assert_eq!(t.bridge_dropped, 2);
        assert_eq!(t.expected() - t.received, 2);
    }

    #[test]
    fn rtp_timestamp_wrap_is_followed() {
        let start = u32::MAX - 960 * 5 + 1;
        let t = track((0..10u32).map(|i| (start.wrapping_add(i * 960), false)));
        assert_eq!(t.expected(), 10);
    }

    #[test]
    fn a_session_whose_backend_heard_nothing_lost_everything() {
        let l = SessionLoss::from_parts(None, 250, 0, 0);
        assert_eq!((l.uplink_expected, l.uplink_lost), (250, 250));
        let empty = UplinkTrack::default();
        assert_eq!(
            SessionLoss::from_parts(Some(&empty), 7, 0, 0).uplink_lost,
            7
        );
    }

    #[test]
    fn the_summary_counts_each_lossy_session_once() {
        let clean = SessionLoss::from_parts(
            Some(&track((0..100).map(|i| (i * 960, false)))),
            100,
            100,
            0,
        );
        let up_lossy = SessionLoss::from_parts(
            Some(&track((0..100u32).map(|i| (i * 960, i % 10 == 0)))),
            100,
            100,
            0,
        );
        let down_lossy =
            SessionLoss::from_parts(Some(&track((0..100).map(|i| (i * 960, false)))), 100, 95, 5);
        let s = LossSummary::of(&[clean, up_lossy, clean, down_lossy]);
        assert_eq!(s.sessions, 4);
        assert_eq!(s.sessions_with_uplink_loss, 1);
        assert_eq!(s.sessions_with_downlink_loss, 1);
        assert_eq!((s.uplink_expected, s.uplink_lost), (400, 10));
        assert!((s.uplink_loss_ratio - 0.025).abs() < 1e-12);
        assert!((s.worst_uplink_loss_ratio - 0.1).abs() < 1e-12);
        assert!((s.downlink_loss_ratio - 5.0 / 400.0).abs() < 1e-12);
        assert!((s.worst_downlink_loss_ratio - 0.05).abs() < 1e-12);
    }
}
