//! When a caller's packet reached the loop's socket, as opposed to when the loop read it.
//!
//! Read coalescing (`read_coalescing`) lets datagrams wait in the socket on purpose, up to the
//! read window, and a loop busy with a tick pass lets them wait too. The uplink hand-off
//! (`voxgate_bridge_uplink_handoff_seconds`, the media-latency target) and the frames'
//! `arrival_unix_micros` count from the arrival, so that wait is in them. Two pieces:
//!
//! - [`ArrivalClock`] turns the kernel's receive stamp (`SO_TIMESTAMPNS`, wall clock) into the
//!   loop's `Instant`, from one reading of both clocks per batch.
//! - [`RtpArrivals`] remembers the arrival of a session's last few RTP packets by sequence
//!   number: str0m reports a packet's receive time as the `now` it was given (the read, shared
//!   by the whole batch), and a packet it held back for reordering comes out after later ones.
//!
//! Sans-IO: both take the times they are given; the loop reads the clocks.

use std::time::{Duration, Instant, SystemTime};

use voxgate_proto::rtp_header;

/// The longest wait a stamp may claim. A stamp further back than this (or in the future) means
/// the wall clock stepped between the kernel's stamp and the read; the wait is then capped
/// (or taken as none) instead of producing an arrival long before the session existed.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// Both clocks read at one moment, to place wall-clock stamps on the loop's timeline.
#[derive(Debug, Clone, Copy)]
pub struct ArrivalClock {
    now: Instant,
    wall: SystemTime,
}

impl ArrivalClock {
    /// Pairs `now` (the loop's read of a batch) with the wall clock read right after it.
    pub fn read(now: Instant) -> Self {
        Self::at(now, SystemTime::now())
    }

    pub fn at(now: Instant, wall: SystemTime) -> Self {
        ArrivalClock { now, wall }
    }

    /// The instant a datagram stamped `stamp` reached the socket; `now` when it has no stamp.
    pub fn arrival(&self, stamp: Option<SystemTime>) -> Instant {
        let Some(stamp) = stamp else {
            return self.now;
        };
        let waited = self
            .wall
            .duration_since(stamp)
            .unwrap_or(Duration::ZERO)
            .min(MAX_WAIT);
        self.now.checked_sub(waited).unwrap_or(self.now)
    }
}

/// How many packets back an arrival is remembered: str0m holds at most 3 packets behind a
/// gap (`set_reordering_size_audio`), so a released packet is among the last few seen.
const REMEMBERED: usize = 8;

/// The socket arrival of a session's most recent RTP packets, by sequence number.
#[derive(Debug, Default)]
pub struct RtpArrivals {
    slots: [Option<(u16, Instant)>; REMEMBERED],
    next: usize,
}

impl RtpArrivals {
    /// Notes the arrival of `datagram` if it is RTP (its sequence number is in the clear in
    /// SRTP, so this needs no decryption).
    pub fn note(&mut self, datagram: &[u8], arrived: Instant) {
        if let Some(seq) = rtp_header::sequence_number(datagram) {
            self.slots[self.next] = Some((seq, arrived));
            self.next = (self.next + 1) % REMEMBERED;
        }
    }

    /// When the packet with (the low 16 bits of) sequence number `seq` arrived, if it is among
    /// the last few noted.
    pub fn of(&self, seq: u64) -> Option<Instant> {
        let seq = seq as u16;
        // Newest first: a sequence number seen twice (a duplicate) takes its latest arrival.
        (0..REMEMBERED)
            .map(|k| (self.next + REMEMBERED - 1 - k) % REMEMBERED)
            .find_map(|i| self.slots[i].filter(|(s, _)| *s == seq).map(|(_, t)| t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(seq: u16) -> Vec<u8> {
        let mut p = vec![0x80, 111];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    #[test]
    fn a_stamp_places_the_arrival_as_far_before_the_read_as_it_waited() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let clock = ArrivalClock::at(now, wall);
        let waited = Duration::from_micros(750);
        assert_eq!(clock.arrival(Some(wall - waited)), now - waited);
        assert_eq!(clock.arrival(None), now, "no stamp: the read");
    }

    #[test]
    fn a_stepped_wall_clock_gives_no_wait_or_at_most_the_cap() {
        let now = Instant::now() + MAX_WAIT * 10;
        let wall = SystemTime::now();
        let clock = ArrivalClock::at(now, wall);
        let future = wall + Duration::from_secs(5);
        assert_eq!(clock.arrival(Some(future)), now);
        let hour_ago = wall - Duration::from_secs(3600);
        assert_eq!(clock.arrival(Some(hour_ago)), now - MAX_WAIT);
    }

    #[test]
    fn rtp_arrivals_are_found_by_sequence_number_and_other_packets_are_ignored() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut a = RtpArrivals::default();
        a.note(&rtp(65_535), at(0));
        a.note(&rtp(1), at(40)); // 0 is late: held behind the gap, released later
        a.note(&rtp(0), at(45));
        // RTCP (a receiver report), STUN, DTLS and a runt are not RTP.
        let mut rtcp = rtp(7);
        rtcp[1] = 201;
        for other in [
            rtcp,
            vec![0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0],
            vec![22; 20],
            rtp(7)[..8].to_vec(),
        ] {
            a.note(&other, at(50));
        }
        assert_eq!(a.of(65_535), Some(at(0)));
        assert_eq!(
            a.of(0x1_0000),
            Some(at(45)),
            "str0m's extended number, low 16 bits"
        );
        assert_eq!(a.of(1), Some(at(40)));
        assert_eq!(a.of(7), None);
        // A duplicate takes its latest arrival; the oldest are forgotten after REMEMBERED more.
        a.note(&rtp(1), at(60));
        assert_eq!(a.of(1), Some(at(60)));
        for s in 100..100 + REMEMBERED as u16 {
            a.note(&rtp(s), at(70));
        }
        assert_eq!(a.of(65_535), None);
        assert_eq!(a.of(100), Some(at(70)));
    }
}
