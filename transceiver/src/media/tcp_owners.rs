//! Which of a loop's own ICE-TCP connections each session opened, so that the loop closes
//! them when the session ends and keeps a session to its share of them.
//!
//! A connection belongs to the session whose check, as its first frame, str0m answered. A
//! session holds at most `max_per_session` (a browser opens one per local interface and remote
//! TCP candidate): a newer one closes its oldest, so a caller cannot take a loop's slots with
//! the valid credentials of its own call. Sans-IO: the endpoint records a connection when it
//! opens, the loop says when one closed, and what to close comes back as [`TcpConn`]s.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use crate::media::demux::SessionKey;

/// One of the loop's own TCP connections: its number and its peer (a number alone may be
/// given to a later connection once this one closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConn {
    pub conn: u32,
    pub peer: SocketAddr,
}

/// The connections of every session of a loop.
#[derive(Debug)]
pub struct TcpOwners {
    owner: HashMap<u32, (SocketAddr, SessionKey)>,
    /// Each session's connections, oldest first.
    by_session: HashMap<SessionKey, VecDeque<TcpConn>>,
    max_per_session: usize,
}

impl TcpOwners {
    pub fn new(max_per_session: usize) -> Self {
        TcpOwners {
            owner: HashMap::new(),
            by_session: HashMap::new(),
            max_per_session: max_per_session.max(1),
        }
    }

    /// Connection `c` opened for session `key`. Returns the session's oldest connection when
    /// the session already held its share: the caller closes it.
    pub fn opened(&mut self, key: SessionKey, c: TcpConn) -> Option<TcpConn> {
        // An entry left for the same number by a connection that closed unseen.
        self.forget(c.conn);
        self.owner.insert(c.conn, (c.peer, key));
        let conns = self.by_session.entry(key).or_default();
        conns.push_back(c);
        if conns.len() <= self.max_per_session {
            return None;
        }
        let oldest = conns.pop_front()?;
        self.owner.remove(&oldest.conn);
        Some(oldest)
    }

    /// Connection `c` closed: forget it.
    pub fn closed(&mut self, c: TcpConn) {
        if self
            .owner
            .get(&c.conn)
            .is_some_and(|(peer, _)| *peer == c.peer)
        {
            self.forget(c.conn);
        }
    }

    /// Session `key` ended: its connections, for the caller to close.
    pub fn session_ended(&mut self, key: SessionKey) -> VecDeque<TcpConn> {
        let conns = self.by_session.remove(&key).unwrap_or_default();
        for c in &conns {
            self.owner.remove(&c.conn);
        }
        conns
    }

    /// Connections recorded, over all sessions.
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owner.is_empty()
    }

    fn forget(&mut self, conn: u32) {
        let Some((_, key)) = self.owner.remove(&conn) else {
            return;
        };
        if let Some(conns) = self.by_session.get_mut(&key) {
            conns.retain(|c| c.conn != conn);
            if conns.is_empty() {
                self.by_session.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(conn: u32, port: u16) -> TcpConn {
        TcpConn {
            conn,
            peer: SocketAddr::from(([192, 0, 2, 1], port)),
        }
    }

    #[test]
    fn a_session_past_its_share_gives_up_its_oldest_connection() {
        let mut o = TcpOwners::new(2);
        assert_eq!(o.opened(7, c(1, 1001)), None);
        assert_eq!(o.opened(7, c(2, 1002)), None);
        assert_eq!(o.opened(9, c(3, 1003)), None, "another session's share");
        assert_eq!(o.opened(7, c(4, 1004)), Some(c(1, 1001)));
        assert_eq!(o.len(), 3);
        // A connection that closed makes room without anyone being closed.
        o.closed(c(2, 1002));
        assert_eq!(o.opened(7, c(5, 1005)), None);
        assert_eq!(o.opened(7, c(6, 1006)), Some(c(4, 1004)));
    }

    #[test]
    fn an_ended_session_hands_back_its_connections_and_nothing_else() {
        let mut o = TcpOwners::new(8);
        o.opened(1, c(10, 2000));
        o.opened(1, c(11, 2001));
        o.opened(2, c(12, 2002));
        let ended: Vec<TcpConn> = o.session_ended(1).into_iter().collect();
        assert_eq!(ended, vec![c(10, 2000), c(11, 2001)]);
        assert!(o.session_ended(1).is_empty(), "once");
        assert_eq!(o.len(), 1);
        assert_eq!(o.session_ended(2).len(), 1);
        assert!(o.is_empty());
    }

    #[test]
    fn a_reused_number_is_told_apart_by_its_peer() {
        let mut o = TcpOwners::new(8);
        o.opened(1, c(5, 3000));
        // Connection 5 closed unseen; the number now belongs to a connection of session 2.
        o.opened(2, c(5, 3001));
        o.closed(c(5, 3000)); // the old one's close, late: ignored
        assert!(o.session_ended(1).is_empty());
        assert_eq!(o.session_ended(2).len(), 1);
    }
}
