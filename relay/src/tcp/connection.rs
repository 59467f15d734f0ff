//! One client TCP connection's life, Sans-IO: awaiting its first frame → tentative →
//! established → closed. Time comes in as `now`; routing decisions come from
//! [`crate::first_hop`].
//!
//! * **Awaiting the first frame.** It must arrive within `first_frame_timeout` of the
//!   accept (bytes dripping in do not extend it) and be a STUN binding request whose hint
//!   [`first_hop`](crate::first_hop::first_hop) accepts. Anything else closes the connection;
//!   nothing is ever written to it before its first frame was accepted.
//! * **Tentative.** Every frame goes to the next hop the first frame chose, behind a
//!   version 2 relay header (`Transport::Tcp { conn }`), but a hint proves only that a
//!   transceiver minted it, once, within a day: not that its session still exists, nor that the
//!   client knows the session's password. So the connection stays tentative, like a UDP flow
//!   before its first reply, until the next hop answers on it; without an answer within
//!   `tentative` of the first frame it is closed. (The loop also caps tentative connections
//!   and evicts the oldest, see [`super::event_loop`].)
//! * **Established.** The next hop answered: the transceiver answers only checks that
//!   authenticate and sends only on paths its session authenticated, so its replies are the
//!   traffic that authenticates here. Replies are accepted only from that next hop (or, for a
//!   peer relay, from its IP), only for this connection's client, and only they keep the
//!   connection: `idle` without one closes it, whatever its client sends (anyone can send a
//!   frame of junk; a live call's transceiver answers its consent checks every few seconds).
//!   A connection whose session ended so closes `idle` after the transceiver fell silent.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use voxgate_proto::{Direction, RelayHeader, Transport};

use crate::config::RoutingConfig;
use crate::drop_reason::DropReason;
use crate::first_hop::{first_hop, WallClock};

/// Why a connection was closed: the `reason` label of `tcp_connections_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The first frame was not a binding request with a routable hint.
    FirstFrameRejected,
    /// No complete first frame within the first-frame timeout.
    FirstFrameTimeout,
    /// A length prefix above `--tcp-max-frame-bytes`.
    FrameTooLong,
    /// No reply from the next hop for the idle timeout, once established.
    IdleTimeout,
    /// The client closed (or reset) the connection.
    ClientClosed,
    /// Reading or writing failed.
    IoError,
    /// No reply from the next hop within the tentative timeout of the first frame.
    TentativeTimeout,
    /// Closed while tentative to make room for a newer connection (the tentative cap).
    TentativeEvicted,
}

impl CloseReason {
    /// Every reason, in label order.
    pub const ALL: [CloseReason; 8] = [
        Self::FirstFrameRejected,
        Self::FirstFrameTimeout,
        Self::FrameTooLong,
        Self::IdleTimeout,
        Self::ClientClosed,
        Self::IoError,
        Self::TentativeTimeout,
        Self::TentativeEvicted,
    ];

    /// Short snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstFrameRejected => "first_frame_rejected",
            Self::FirstFrameTimeout => "first_frame_timeout",
            Self::FrameTooLong => "frame_too_long",
            Self::IdleTimeout => "idle_timeout",
            Self::ClientClosed => "client_closed",
            Self::IoError => "io_error",
            Self::TentativeTimeout => "tentative_timeout",
            Self::TentativeEvicted => "tentative_evicted",
        }
    }

    /// Index into a per-reason counter array.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The timers of every connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From accept to a complete, accepted first frame.
    pub first_frame: Duration,
    /// From the first frame to the next hop's first reply.
    pub tentative: Duration,
    /// Without a reply from the next hop, once established.
    pub idle: Duration,
}

/// What to do with a frame the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameVerdict {
    /// Send it to `to` behind `header`.
    Forward {
        /// Next hop: a transceiver loop or a peer relay ingress.
        to: SocketAddr,
        /// The version 2 header naming the client and this connection.
        header: RelayHeader,
    },
    /// Close the connection without a word; the first frame was refused for `reason`.
    Reject(DropReason),
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    AwaitingFirstFrame,
    Forwarding {
        to: SocketAddr,
        /// `to` is a peer relay: its replies come from its internal socket (same IP).
        to_is_peer: bool,
        /// The next hop has answered on this connection.
        established: bool,
    },
}

/// One connection's state.
#[derive(Debug, Clone)]
pub struct Connection {
    id: u32,
    client: SocketAddr,
    phase: Phase,
    accepted: Instant,
    /// When its first frame was forwarded (the tentative timer's start).
    first_frame: Instant,
    /// When the next hop last answered on it (the idle timer's start).
    last_reply: Instant,
}

impl Connection {
    /// A connection accepted at `now` from `client`, known to the relay as `id`.
    pub fn new(now: Instant, id: u32, client: SocketAddr) -> Self {
        Self {
            id,
            client,
            phase: Phase::AwaitingFirstFrame,
            accepted: now,
            first_frame: now,
            last_reply: now,
        }
    }

    /// The connection id carried in relay headers.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The client's address.
    pub fn client(&self) -> SocketAddr {
        self.client
    }

    /// The first frame was accepted.
    pub fn is_forwarding(&self) -> bool {
        matches!(self.phase, Phase::Forwarding { .. })
    }

    /// The next hop has answered on it: no longer tentative.
    pub fn is_established(&self) -> bool {
        matches!(
            self.phase,
            Phase::Forwarding {
                established: true,
                ..
            }
        )
    }

    /// A complete frame from the client. It never refreshes a timer: only the next hop's
    /// replies do (see the module header).
    pub fn on_frame(
        &mut self,
        now: Instant,
        frame: &[u8],
        cfg: &RoutingConfig,
        clock: &WallClock,
    ) -> FrameVerdict {
        let to = match self.phase {
            Phase::Forwarding { to, .. } => to,
            Phase::AwaitingFirstFrame => match first_hop(cfg, clock, now, frame) {
                Ok(to) => {
                    self.phase = Phase::Forwarding {
                        to,
                        to_is_peer: cfg.is_peer_addr(to),
                        established: false,
                    };
                    self.first_frame = now;
                    to
                }
                Err(reason) => return FrameVerdict::Reject(reason),
            },
        };
        FrameVerdict::Forward {
            to,
            header: RelayHeader {
                direction: Direction::ToTransceiver,
                client: self.client,
                transport: Transport::Tcp { conn: self.id },
            },
        }
    }

    /// A reply for this connection arrived from `from` carrying `header`: may it be
    /// written to the client? If so it establishes the connection (the first time) and
    /// refreshes its idle timer.
    pub fn on_reply(
        &mut self,
        now: Instant,
        from: SocketAddr,
        header: &RelayHeader,
    ) -> Result<(), DropReason> {
        let Phase::Forwarding {
            to,
            to_is_peer,
            ref mut established,
        } = self.phase
        else {
            // Nothing was forwarded yet, so nothing can be answered.
            return Err(DropReason::WrongSource);
        };
        if header.client != self.client {
            return Err(DropReason::BadHeader);
        }
        if from != to && !(to_is_peer && from.ip() == to.ip()) {
            return Err(DropReason::WrongSource);
        }
        *established = true;
        self.last_reply = now;
        Ok(())
    }

    /// When this connection's timer fires.
    pub fn deadline(&self, t: &Timeouts) -> Instant {
        match self.phase {
            Phase::AwaitingFirstFrame => self.accepted + t.first_frame,
            Phase::Forwarding {
                established: false, ..
            } => self.first_frame + t.tentative,
            Phase::Forwarding { .. } => self.last_reply + t.idle,
        }
    }

    /// Whether the connection's time is up at `now`, and why.
    pub fn timed_out(&self, now: Instant, t: &Timeouts) -> Option<CloseReason> {
        if now < self.deadline(t) {
            return None;
        }
        Some(match self.phase {
            Phase::AwaitingFirstFrame => CloseReason::FirstFrameTimeout,
            Phase::Forwarding {
                established: false, ..
            } => CloseReason::TentativeTimeout,
            Phase::Forwarding { .. } => CloseReason::IdleTimeout,
        })
    }
}

#[cfg(test)]
mod tests;
