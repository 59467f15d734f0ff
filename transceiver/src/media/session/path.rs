//! Where a session's client is and how replies reach it: the paths str0m has authenticated.
//!
//! A path (client address, the relay that carried it if any, UDP or a TCP connection) enters a
//! session's list only when str0m answers an authenticated check that arrived on it; the
//! answer to the check being handled goes back the way the check came, and everything else
//! only on an authenticated path. The list is bounded ([`MAX_CLIENT_ADDRS`]).

use std::net::SocketAddr;

use str0m::net::{Protocol, Transmit};
use voxgate_proto::relay_header::Transport;

use crate::media::demux::PeerKey;

/// Most client addresses a session keeps in the demux map (a browser may probe several pairs).
pub const MAX_CLIENT_ADDRS: usize = 8;

/// Where a client's datagrams come from: its address, the relay that carried them (if any),
/// and the transport: UDP, or a TCP connection (the loop's own, or the relay's `conn`).
/// Replies to the client go back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientPath {
    pub addr: SocketAddr,
    pub via: Option<SocketAddr>,
    pub transport: Transport,
}

impl ClientPath {
    /// A UDP client reached directly.
    pub fn direct_udp(addr: SocketAddr) -> Self {
        ClientPath {
            addr,
            via: None,
            transport: Transport::Udp,
        }
    }

    /// The demux key of the client (its address and whether it speaks TCP).
    pub fn peer(&self) -> PeerKey {
        PeerKey {
            addr: self.addr,
            tcp: self.is_tcp(),
        }
    }

    pub fn is_tcp(&self) -> bool {
        matches!(self.transport, Transport::Tcp { .. })
    }

    /// How replies on this path leave the loop.
    pub fn route(&self) -> Route {
        match self.via {
            None => Route::Direct(self.transport),
            Some(relay) => Route::Via(relay, self.transport),
        }
    }
}

/// How a transmit leaves the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Straight to the client: a UDP datagram, or a frame on the loop's TCP connection `conn`.
    Direct(Transport),
    /// Framed, through this relay, echoing the transport (and TCP connection id) it came on.
    Via(SocketAddr, Transport),
    /// No authenticated path leads to the destination: not sent (counted by the loop).
    Unrouted,
}

/// The addresses a session advertises as its ICE candidates, by transport: UDP host candidates
/// (a relay ingress's public addresses, or the loop's own socket), and passive TCP host
/// candidates (RFC 6544) beside them (the ingress's relay TCP ports, or the loop's own
/// listener). Decided per session by the control plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    pub udp: Vec<SocketAddr>,
    pub tcp: Vec<SocketAddr>,
}

/// STUN Binding success response (type 0x0101): str0m's answer to an authenticated check.
pub fn is_binding_success(bytes: &[u8]) -> bool {
    bytes.len() >= 20 && bytes[0] == 0x01 && bytes[1] == 0x01
}

/// A session's authenticated paths, and the path of the check being handled.
#[derive(Debug, Default)]
pub struct ClientPaths {
    /// Authenticated paths: an address and its relay enter (or change) only when str0m
    /// answers a check that arrived on that path.
    authenticated: Vec<ClientPath>,
    /// The path of the binding request being handled, so str0m's answer goes back the way the
    /// check came; cleared when the loop has drained the session's output.
    check: Option<ClientPath>,
}

impl ClientPaths {
    /// A binding request arrived on `path`: its answer may go back on it.
    pub fn begin_check(&mut self, path: ClientPath) {
        self.check = Some(path);
    }

    /// The session's output is drained: no answer to that check is still to come.
    pub fn end_check(&mut self) {
        self.check = None;
    }

    /// How a transmit reaches its destination: the answer to the check being handled goes
    /// back on the check's path; everything else only on an authenticated path.
    pub fn route_for(&self, t: &Transmit) -> Route {
        let tcp = t.proto != Protocol::Udp;
        let on = |p: &ClientPath| p.addr == t.destination && p.is_tcp() == tcp;
        if let Some(check) = self.check {
            if on(&check) && is_binding_success(&t.contents) {
                return check.route();
            }
        }
        self.authenticated
            .iter()
            .find(|p| on(p))
            .map_or(Route::Unrouted, ClientPath::route)
    }

    /// Records a path on which str0m has answered an authenticated check: a new client, or a
    /// known one that now arrives through another relay (relay restart or failover) or on
    /// another TCP connection, whose replies take the new path from now on. Returns a client
    /// evicted to keep the list bounded.
    pub fn add(&mut self, path: ClientPath) -> Option<PeerKey> {
        let peer = path.peer();
        if let Some(p) = self.authenticated.iter_mut().find(|p| p.peer() == peer) {
            *p = path;
            return None;
        }
        self.authenticated.push(path);
        if self.authenticated.len() > MAX_CLIENT_ADDRS {
            return Some(self.authenticated.remove(0).peer());
        }
        None
    }

    /// Drops a client that another session has since authenticated.
    pub fn forget(&mut self, peer: PeerKey) {
        self.authenticated.retain(|p| p.peer() != peer);
    }

    /// The authenticated paths, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &ClientPath> + '_ {
        self.authenticated.iter()
    }
}
