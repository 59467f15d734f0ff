//! O(1) demultiplexing of a loop's datagrams to its sessions.
//!
//! Two maps, as in the architecture: server ufrag → session for STUN binding requests, and
//! client address → session for everything else. An address enters the second map only after
//! str0m has accepted an authenticated STUN request from it, so a forged packet can never claim
//! a session. Sessions are never scanned linearly.
//!
//! **Address ownership.** An address stays with the session that holds it while that session
//! keeps getting authenticated checks from it ([`CONSENT_WINDOW`]). Another session that
//! answers a check from the same address (a second peer connection behind the same NAT
//! binding, or an attacker relaying someone else's address) cannot take it over while the
//! holder is alive; once the holder's checks stop for a whole window, the address is free.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Index of a session in its loop's slab.
pub type SessionKey = usize;

/// A client as the demux knows it: its address and whether it talks over TCP (a UDP and a TCP
/// client may have the same IP:port; they are different peers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey {
    pub addr: SocketAddr,
    pub tcp: bool,
}

impl PeerKey {
    pub fn udp(addr: SocketAddr) -> Self {
        PeerKey { addr, tcp: false }
    }

    pub fn tcp(addr: SocketAddr) -> Self {
        PeerKey { addr, tcp: true }
    }
}

/// How long an authenticated check keeps an address with its session. RFC 7675 ends consent
/// 30 s after the last authenticated check; str0m's ICE-lite agent gives a pair up after 15 s
/// without one, so a session that has not checked from an address for 30 s no longer uses it.
pub const CONSENT_WINDOW: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
struct Holder {
    key: SessionKey,
    /// The holder's latest authenticated check from the address.
    last_check: Instant,
}

/// What [`Demux::claim_addr`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The address is (now) the claimant's; `from` names the session it was taken from, if
    /// any (whose consent window had run out).
    Granted { from: Option<SessionKey> },
    /// Another session holds the address within its consent window.
    Held(SessionKey),
}

#[derive(Debug, Default)]
pub struct Demux {
    by_ufrag: HashMap<Box<[u8]>, SessionKey>,
    by_addr: HashMap<PeerKey, Holder>,
}

impl Demux {
    pub fn insert_ufrag(&mut self, ufrag: &str, key: SessionKey) {
        self.by_ufrag.insert(ufrag.as_bytes().into(), key);
    }

    pub fn remove_ufrag(&mut self, ufrag: &str) {
        self.by_ufrag.remove(ufrag.as_bytes());
    }

    pub fn by_ufrag(&self, ufrag: &[u8]) -> Option<SessionKey> {
        self.by_ufrag.get(ufrag).copied()
    }

    /// Whether `key` may take `addr` at `now` (without taking it): the address is free, already
    /// `key`'s, or its holder's consent window has run out.
    pub fn may_claim(&self, now: Instant, addr: &PeerKey, key: SessionKey) -> Claim {
        match self.by_addr.get(addr) {
            None => Claim::Granted { from: None },
            Some(h) if h.key == key => Claim::Granted { from: None },
            Some(h) if now.saturating_duration_since(h.last_check) < CONSENT_WINDOW => {
                Claim::Held(h.key)
            }
            Some(h) => Claim::Granted { from: Some(h.key) },
        }
    }

    /// Records an authenticated check by `key` from `addr`: maps the address to `key` (or
    /// refreshes its window), unless another session holds it (see [`Demux::may_claim`]).
    pub fn claim_addr(&mut self, now: Instant, addr: PeerKey, key: SessionKey) -> Claim {
        let claim = self.may_claim(now, &addr, key);
        if let Claim::Granted { .. } = claim {
            self.by_addr.insert(
                addr,
                Holder {
                    key,
                    last_check: now,
                },
            );
        }
        claim
    }

    /// Unmaps `addr` only if it still points at `key` (another session may have taken it).
    pub fn remove_addr(&mut self, addr: PeerKey, key: SessionKey) {
        if self.by_addr(&addr) == Some(key) {
            self.by_addr.remove(&addr);
        }
    }

    pub fn by_addr(&self, addr: &PeerKey) -> Option<SessionKey> {
        self.by_addr.get(addr).map(|h| h.key)
    }

    pub fn ufrag_count(&self) -> usize {
        self.by_ufrag.len()
    }

    pub fn addr_count(&self) -> usize {
        self.by_addr.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(p: u16) -> PeerKey {
        PeerKey::udp(SocketAddr::from(([127, 0, 0, 1], p)))
    }

    #[test]
    fn a_tcp_peer_and_a_udp_peer_on_the_same_address_are_different_clients() {
        let t0 = Instant::now();
        let mut d = Demux::default();
        let a = SocketAddr::from(([127, 0, 0, 1], 5000));
        d.claim_addr(t0, PeerKey::udp(a), 1);
        assert_eq!(
            d.claim_addr(t0, PeerKey::tcp(a), 2),
            Claim::Granted { from: None }
        );
        assert_eq!(d.by_addr(&PeerKey::udp(a)), Some(1));
        assert_eq!(d.by_addr(&PeerKey::tcp(a)), Some(2));
    }

    #[test]
    fn ufrag_lookup_is_by_bytes() {
        let mut d = Demux::default();
        d.insert_ufrag("abcd", 3);
        assert_eq!(d.by_ufrag(b"abcd"), Some(3));
        assert_eq!(d.by_ufrag(b"abce"), None);
        d.remove_ufrag("abcd");
        assert_eq!(d.ufrag_count(), 0);
    }

    #[test]
    fn a_live_holder_keeps_its_address_against_another_sessions_check() {
        let t0 = Instant::now();
        let mut d = Demux::default();
        assert_eq!(d.claim_addr(t0, addr(1), 1), Claim::Granted { from: None });
        let later = t0 + CONSENT_WINDOW - Duration::from_millis(1);
        assert_eq!(d.claim_addr(later, addr(1), 2), Claim::Held(1));
        assert_eq!(d.by_addr(&addr(1)), Some(1));
    }

    #[test]
    fn each_check_of_the_holder_renews_its_window() {
        let t0 = Instant::now();
        let mut d = Demux::default();
        d.claim_addr(t0, addr(1), 1);
        let t1 = t0 + Duration::from_secs(20);
        assert_eq!(d.claim_addr(t1, addr(1), 1), Claim::Granted { from: None });
        // 40 s after the first check but 20 s after the second: still held.
        assert_eq!(
            d.claim_addr(t0 + Duration::from_secs(40), addr(1), 2),
            Claim::Held(1)
        );
    }

    #[test]
    fn an_address_whose_holder_stopped_checking_for_a_window_moves() {
        let t0 = Instant::now();
        let mut d = Demux::default();
        d.claim_addr(t0, addr(1), 1);
        let expired = t0 + CONSENT_WINDOW;
        assert_eq!(
            d.may_claim(expired, &addr(1), 2),
            Claim::Granted { from: Some(1) }
        );
        assert_eq!(
            d.claim_addr(expired, addr(1), 2),
            Claim::Granted { from: Some(1) }
        );
        assert_eq!(d.by_addr(&addr(1)), Some(2));
    }

    #[test]
    fn removing_an_address_taken_over_by_another_session_keeps_the_new_owner() {
        let t0 = Instant::now();
        let mut d = Demux::default();
        d.claim_addr(t0, addr(1), 1);
        d.claim_addr(t0 + CONSENT_WINDOW, addr(1), 2);
        d.remove_addr(addr(1), 1);
        assert_eq!(d.by_addr(&addr(1)), Some(2));
        d.remove_addr(addr(1), 2);
        assert_eq!(d.addr_count(), 0);
        // A removed address is free at once.
        assert_eq!(
            d.claim_addr(t0 + CONSENT_WINDOW, addr(1), 3),
            Claim::Granted { from: None }
        );
    }
}
