//! How many STUN binding requests one session may hand str0m: a bound on what a caller can
//! make its own session cost the loop it shares with other callers.
//!
//! A caller holds valid ICE credentials for its own session, so its checks authenticate, and
//! str0m's ICE agent answers each one. A check from an address the session has not seen makes
//! str0m add a peer-reflexive candidate and a candidate pair, which it keeps and scans on every
//! later check. Checks from ever new source addresses would so grow the session's ICE state
//! without bound and make every check dearer, for the whole loop. Two bounds stop that:
//!
//! - every check of the session counts against a token bucket ([`CHECKS_PER_SECOND`], bursts
//!   of [`CHECK_BURST`]): far above what a browser sends (a check per candidate pair and its
//!   retransmissions while ICE runs, then a consent check every few seconds per pair), far
//!   below what would cost the loop;
//! - a check from an address the session has not authenticated also counts against a smaller
//!   bucket ([`NEW_ADDRESS_CHECKS_PER_SECOND`], bursts of [`NEW_ADDRESS_BURST`]), and at most
//!   [`MAX_NEW_ADDRESSES`] such addresses are ever admitted, which bounds str0m's candidates
//!   and pairs for the session's life. A browser's candidates, a NAT rebinding or a network
//!   change use a handful each.
//!
//! A refused check never reaches str0m, is never answered and is counted by reason. Sans-IO:
//! time comes in as `now`.

use std::time::Instant;

use crate::metrics::DropReason;

/// Sustained binding requests a session may have answered per second.
pub const CHECKS_PER_SECOND: u32 = 50;
/// The bucket's depth: checks a session may send at once.
pub const CHECK_BURST: u32 = 100;
/// Sustained checks per second from addresses the session has not authenticated.
pub const NEW_ADDRESS_CHECKS_PER_SECOND: u32 = 10;
/// Checks at once from such addresses (every candidate pair of a browser starting ICE).
pub const NEW_ADDRESS_BURST: u32 = 32;
/// Distinct unauthenticated source addresses a session ever hands str0m.
pub const MAX_NEW_ADDRESSES: usize = 64;

/// A token bucket counted in millitokens, refilled from the time since its last use.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    milli: u64,
    at: Instant,
}

impl Bucket {
    fn full(now: Instant, burst: u32) -> Self {
        Bucket {
            milli: u64::from(burst) * 1000,
            at: now,
        }
    }

    /// Takes one token if there is one, after refilling at `rate` per second up to `burst`.
    fn take(&mut self, now: Instant, rate: u32, burst: u32) -> bool {
        let elapsed = now.saturating_duration_since(self.at);
        let refill = elapsed.as_micros() as u64 * u64::from(rate) / 1000;
        self.milli = (self.milli + refill).min(u64::from(burst) * 1000);
        self.at = self.at.max(now);
        if self.milli < 1000 {
            return false;
        }
        self.milli -= 1000;
        true
    }
}

/// One session's check budget (see the module header).
#[derive(Debug)]
pub struct CheckBudget {
    all: Bucket,
    new_addresses: Bucket,
    /// Unauthenticated addresses admitted so far (a few, so a scan is cheaper than a set).
    admitted: Vec<std::net::SocketAddr>,
}

impl CheckBudget {
    pub fn new(now: Instant) -> Self {
        CheckBudget {
            all: Bucket::full(now, CHECK_BURST),
            new_addresses: Bucket::full(now, NEW_ADDRESS_BURST),
            admitted: Vec::new(),
        }
    }

    /// Whether a binding request from `from` may reach str0m at `now`; `authenticated` says
    /// whether the session already holds `from` (its checks from there were answered).
    /// Refused: the reason it is dropped for.
    pub fn admit(
        &mut self,
        now: Instant,
        from: std::net::SocketAddr,
        authenticated: bool,
    ) -> Result<(), DropReason> {
        let seen = authenticated || self.admitted.contains(&from);
        if !seen && self.admitted.len() >= MAX_NEW_ADDRESSES {
            return Err(DropReason::CheckNewAddressCap);
        }
        if !seen
            && !self
                .new_addresses
                .take(now, NEW_ADDRESS_CHECKS_PER_SECOND, NEW_ADDRESS_BURST)
        {
            return Err(DropReason::CheckRateLimited);
        }
        if !self.all.take(now, CHECKS_PER_SECOND, CHECK_BURST) {
            return Err(DropReason::CheckRateLimited);
        }
        if !seen {
            self.admitted.push(from);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn a_burst_passes_then_checks_are_held_to_the_rate() {
        let t0 = Instant::now();
        let mut b = CheckBudget::new(t0);
        let known = addr(1);
        let passed = (0..CHECK_BURST + 50)
            .filter(|_| b.admit(t0, known, true).is_ok())
            .count();
        assert_eq!(passed, CHECK_BURST as usize);
        // A second later: a second's worth more, not the whole burst.
        let t1 = t0 + Duration::from_secs(1);
        let passed = (0..CHECK_BURST)
            .filter(|_| b.admit(t1, known, true).is_ok())
            .count();
        assert_eq!(passed, CHECKS_PER_SECOND as usize);
        assert_eq!(b.admit(t1, known, true), Err(DropReason::CheckRateLimited));
    }

    #[test]
    fn a_browser_starting_ice_and_checking_consent_is_never_refused() {
        // RFC 8445 paces a browser's checks one per Ta (50 ms) across all its pairs; with
        // retransmissions say twice that: a check every 25 ms, round-robin over eight pairs,
        // for five seconds; then a consent check per pair every 2.5 s for ten minutes.
        let t0 = Instant::now();
        let mut b = CheckBudget::new(t0);
        for step in 0..200u64 {
            let now = t0 + Duration::from_millis(25 * step);
            let pair = (step % 8) as u16;
            // A pair's first check is from a new address; once answered, it is held.
            let authenticated = step >= 8;
            assert!(
                b.admit(now, addr(pair), authenticated).is_ok(),
                "step {step}"
            );
        }
        for step in 0..240 {
            let now = t0 + Duration::from_secs(5) + Duration::from_millis(2_500 * step);
            for pair in 0..8 {
                assert!(b.admit(now, addr(pair), true).is_ok());
            }
        }
    }

    #[test]
    fn checks_from_ever_new_addresses_are_capped_for_the_sessions_life() {
        let t0 = Instant::now();
        let mut b = CheckBudget::new(t0);
        let mut admitted = 0;
        let mut capped = 0;
        let mut limited = 0;
        // A thousand new addresses a second for a minute.
        for i in 0..60_000u32 {
            let now = t0 + Duration::from_millis(u64::from(i));
            match b.admit(
                now,
                SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 9)),
                false,
            ) {
                Ok(()) => admitted += 1,
                Err(DropReason::CheckNewAddressCap) => capped += 1,
                Err(DropReason::CheckRateLimited) => limited += 1,
                Err(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(admitted, MAX_NEW_ADDRESSES);
        assert_eq!(admitted + capped + limited, 60_000);
        assert!(capped > 50_000, "{capped}");
        // An address admitted once may go on checking (within the overall rate).
        let again = SocketAddr::from(([10, 0, 0, 0], 9));
        let later = t0 + Duration::from_secs(120);
        assert_eq!(b.admit(later, again, false), Ok(()));
    }
}
