//! O(1) demultiplexing of a loop's datagrams to its sessions.
//!
//! Two maps, as in the architecture: server ufrag → session for STUN binding requests, and
//! client address → session for everything else. An address enters the second map only after
//! str0m has accepted an authenticated STUN request from it, so a forged packet can never claim
//! a session. Sessions are never scanned linearly.

use std::collections::HashMap;
use std::net::SocketAddr;

/// Index of a session in its loop's slab.
pub type SessionKey = usize;

#[derive(Debug, Default)]
pub struct Demux {
    by_ufrag: HashMap<Box<[u8]>, SessionKey>,
    by_addr: HashMap<SocketAddr, SessionKey>,
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

    /// Maps an authenticated client address; a later authenticated session wins the address.
    pub fn insert_addr(&mut self, addr: SocketAddr, key: SessionKey) {
        self.by_addr.insert(addr, key);
    }

    /// Unmaps `addr` only if it still points at `key` (another session may have taken it).
    pub fn remove_addr(&mut self, addr: SocketAddr, key: SessionKey) {
        if self.by_addr.get(&addr) == Some(&key) {
            self.by_addr.remove(&addr);
        }
    }

    pub fn by_addr(&self, addr: &SocketAddr) -> Option<SessionKey> {
        self.by_addr.get(addr).copied()
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

    fn addr(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
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
    fn removing_an_address_taken_over_by_another_session_keeps_the_new_owner() {
        let mut d = Demux::default();
        d.insert_addr(addr(1), 1);
        d.insert_addr(addr(1), 2);
        d.remove_addr(addr(1), 1);
        assert_eq!(d.by_addr(&addr(1)), Some(2));
        d.remove_addr(addr(1), 2);
        assert_eq!(d.addr_count(), 0);
    }
}
