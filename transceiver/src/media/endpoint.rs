//! A media loop's logic, with no I/O: the sessions it owns and every rule that decides where a
//! datagram goes, shaped like quinn-proto's `Endpoint` and the relay's `FlowTable`.
//!
//! The event loop (`event_loop.rs`) owns the sockets and the clock and only moves bytes and
//! time: it hands each datagram to [`LoopEndpoint::handle_datagram`] (or a frame of its own
//! ICE-TCP listener to [`LoopEndpoint::handle_tcp_frame`]), runs [`LoopEndpoint::handle_timeout`]
//! when [`LoopEndpoint::poll_timeout`] comes, passes control-plane commands to
//! [`LoopEndpoint::handle_command`], and forwards what [`LoopEndpoint::poll_event`] yields.
//! Whatever a session sends leaves through the caller's [`Outbox`].
//!
//! The rules, each tested in `endpoint/tests.rs` with a fake clock and no socket:
//! - A datagram whose first byte says it is relay-framed counts only from a `--relays`
//!   network (anyone can put a relay header on a datagram), and only with a valid header
//!   towards the transceiver; the header's client address and the relay it came from are its
//!   path. Anything else is the client talking to us directly.
//! - A STUN binding request finds its session by the server ufrag of its USERNAME; every
//!   other datagram (DTLS, SRTP, SRTCP, other STUN) by the client address, which a session
//!   holds only after str0m answered an authenticated check from it. Unknown ufrags, unknown
//!   sources and STUN without a USERNAME from strangers are dropped silently and counted
//!   (never answered: no amplification). Sessions are never scanned.
//! - A session's paths (client address, relay, transport) enter or change only when str0m
//!   answers an authenticated check that arrived on them, or (a relay failover) when fresh
//!   SRTP that str0m authenticates for the session arrives from an address it holds through
//!   another trusted relay; so nothing spoofed or replayed moves where replies go.
//! - An address stays with the session that holds it within its consent window (see
//!   `demux`): another session's answered check from it is withheld and counted, and the
//!   address stays where it was.
//! - An ICE-TCP connection of the loop's own listener opens only when its first frame is a
//!   binding request str0m answers for a session of this loop, and then belongs to that
//!   session (see `tcp_owners`): it is closed when the session ends, and a session holds at
//!   most its share of them (a newer one closes its oldest). Its idle timer restarts only on
//!   a check str0m answers on it ([`LoopEndpoint::handle_tcp_frame`] says which); what to
//!   close comes out of [`LoopEndpoint::poll_tcp_close`].
//! - A session's binding requests reach str0m only within its check budget (a rate, and a
//!   cap on new source addresses: see `check_budget`), so a caller cannot grow its own
//!   session's ICE state without bound or make the loop pay for a flood of valid checks.
//! - A transmit goes out only on a path its session authenticated (or, for the answer to the
//!   check being handled, back the way the check came); the rest is counted as unrouted.

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use slab::Slab;
use str0m::change::SdpOffer;
use str0m::net::Transmit;
use voxgate_proto::relay_header::{
    is_relay_framed, Direction, RelayHeader, Transport, MAX_HEADER_LEN,
};
use voxgate_proto::stun_username::{looks_like_stun, server_ufrag};

use crate::media::command::{Command, LoopEvent, SessionEnded};
use crate::media::demux::{Claim, Demux, SessionKey};
use crate::media::loop_settings::LoopSettings;
use crate::media::session::{
    is_binding_success, AttachError, ClientPath, EndReason, LoopTicks, OwnerLoss, Route, Session,
    SessionError, SessionId,
};
use crate::media::tcp_owners::{TcpConn, TcpOwners};
use crate::media::timers::Timers;
use crate::metrics::{DropReason, LoopCounters, QualityObservation, TcpCloseReason};

/// Where an endpoint's datagrams go: the event loop's UDP socket (through its send batch) and
/// its own ICE-TCP connections. A test records them instead.
pub trait Outbox {
    /// One datagram to `to`: `header` (a relay header, or empty) followed by `payload`.
    fn send_udp(&mut self, to: SocketAddr, header: &[u8], payload: &[u8]);
    /// One RFC 4571 frame to `peer` on the loop's own TCP connection `conn`; false if the
    /// connection is gone.
    fn send_tcp(&mut self, conn: u32, peer: SocketAddr, payload: &[u8]) -> bool;
}

/// How a datagram reached the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// On the loop's UDP socket, from this address (a client, or a relay that framed it).
    Udp(SocketAddr),
    /// A frame on connection `conn` of the loop's own ICE-TCP listener, from `peer`.
    Tcp { peer: SocketAddr, conn: u32 },
}

/// What the event loop forwards to the control plane.
#[derive(Debug, Clone, Copy)]
pub enum EndpointEvent {
    /// For the bounded events channel (may be dropped when full).
    Loop(LoopEvent),
    /// For the channel of ends, which is never full.
    Ended(SessionEnded),
}

/// One media loop's sessions and routing rules (see the module header).
pub struct LoopEndpoint {
    index: usize,
    sessions: Slab<Session>,
    ids: HashMap<SessionId, SessionKey>,
    demux: Demux,
    timers: Timers,
    settings: LoopSettings,
    counters: LoopCounters,
    /// Events since the event loop last polled; it drains them every pass.
    events: VecDeque<EndpointEvent>,
    /// Which of the loop's own TCP connections each session opened.
    tcp_owners: TcpOwners,
    /// Connections of the loop's own listener to close, and why; drained every pass.
    tcp_closes: VecDeque<(TcpConn, TcpCloseReason)>,
}

impl LoopEndpoint {
    pub fn new(index: usize, settings: LoopSettings) -> Self {
        LoopEndpoint {
            index,
            sessions: Slab::new(),
            ids: HashMap::new(),
            demux: Demux::default(),
            timers: Timers::default(),
            tcp_owners: TcpOwners::new(settings.tcp_limits.max_conns_per_session),
            tcp_closes: VecDeque::new(),
            settings,
            counters: LoopCounters::default(),
            events: VecDeque::new(),
        }
    }

    /// How many sessions the loop holds.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// What the endpoint counted since the metrics last took it (drops by reason, unrouted
    /// transmits, refused taps, the bridges' counters and hand-off latencies).
    pub fn counters_mut(&mut self) -> &mut LoopCounters {
        &mut self.counters
    }

    /// The earliest session deadline (str0m timers, audio ticks, connect and end deadlines).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The next event for the control plane, if any.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        self.events.pop_front()
    }

    /// The next connection of the loop's own ICE-TCP listener to close, and why: its session
    /// ended, or opened a newer one past its share.
    pub fn poll_tcp_close(&mut self) -> Option<(TcpConn, TcpCloseReason)> {
        self.tcp_closes.pop_front()
    }

    /// Connection `conn` of the loop's own listener (from `peer`) closed.
    pub fn tcp_closed(&mut self, conn: u32, peer: SocketAddr) {
        self.tcp_owners.closed(TcpConn { conn, peer });
    }

    /// One datagram read from the loop's UDP socket. `arrived` is when the kernel queued it
    /// (at or before `now`, the read).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        arrived: Instant,
        source: Source,
        bytes: &[u8],
        out: &mut impl Outbox,
    ) {
        let (path, payload) = match source {
            Source::Tcp { peer, conn } => (tcp_path(peer, conn), bytes),
            Source::Udp(from) => match self.udp_path(from, bytes) {
                Ok(p) => p,
                Err(reason) => return self.counters.drop(reason),
            },
        };
        self.route(now, arrived, path, payload, out);
    }

    /// The first frame of connection `conn` of the loop's own ICE-TCP listener. It must be a
    /// binding request that str0m answers for a session of this loop; otherwise the
    /// connection is to be closed with nothing sent (no amplification, no state for
    /// strangers), for the reason returned.
    pub fn handle_first_tcp_frame(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        conn: u32,
        bytes: &[u8],
        out: &mut impl Outbox,
    ) -> Result<(), TcpCloseReason> {
        let ufrag = looks_like_stun(bytes)
            .then(|| server_ufrag(bytes).ok())
            .flatten()
            .ok_or(TcpCloseReason::Garbage)?;
        let key = self
            .demux
            .by_ufrag(ufrag)
            .ok_or(TcpCloseReason::UnknownUfrag)?;
        let path = tcp_path(peer, conn);
        if let Err(reason) = self.admit_check(now, key, path) {
            self.counters.drop(reason);
            return Err(TcpCloseReason::Unauthenticated);
        }
        // A TCP frame's arrival is its read: the stream's bytes carry no stamps.
        if !self.deliver(now, now, key, path, bytes, true, out) {
            return Err(TcpCloseReason::Unauthenticated);
        }
        if let Some(oldest) = self.tcp_owners.opened(key, TcpConn { conn, peer }) {
            self.tcp_closes
                .push_back((oldest, TcpCloseReason::SessionCap));
        }
        Ok(())
    }

    /// A later frame of an open connection of the loop's own ICE-TCP listener. Returns
    /// whether it was a check str0m answered: only such a frame keeps the connection (the
    /// event loop restarts its idle timer).
    pub fn handle_tcp_frame(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        conn: u32,
        bytes: &[u8],
        out: &mut impl Outbox,
    ) -> bool {
        self.route(now, now, tcp_path(peer, conn), bytes, out)
    }

    /// Runs every session timer due by `now`.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl Outbox) {
        while self.handle_next_timeout(now, now, out) {}
    }

    /// Runs the earliest session timer due by `due_by`, at `now`; returns whether there was
    /// one. The event loop runs a long timer pass one timer at a time so that it can read its
    /// socket in between (a caller's packet then waits for a slice of the pass, not all of
    /// it); `now` may pass `due_by` as the pass goes on, never go back.
    pub fn handle_next_timeout(
        &mut self,
        now: Instant,
        due_by: Instant,
        out: &mut impl Outbox,
    ) -> bool {
        loop {
            let Some(entry) = self.timers.pop_due(due_by) else {
                return false;
            };
            let Some(session) = self.sessions.get_mut(entry.key) else {
                continue;
            };
            if session.serial != entry.serial || session.scheduled != Some(entry.at) {
                continue; // stale: superseded by an earlier deadline, or a reused key
            }
            session.scheduled = None;
            session.handle_timeout(now);
            self.drive(now, entry.key, None, out);
            return true;
        }
    }

    /// Carries out one control-plane command; returns false for `Shutdown`.
    pub fn handle_command(&mut self, now: Instant, cmd: Command, out: &mut impl Outbox) -> bool {
        match cmd {
            Command::Insert { session, reply } => {
                self.insert(now, *session, out);
                let _ = reply.send(());
            }
            Command::Delete { id, reply } => {
                let found = self.end_session(now, id, EndReason::Deleted, out);
                let _ = reply.send(found);
            }
            Command::Snapshot { id, reply } => {
                let index = self.index;
                let snap = self.session_mut(id).map(|(_, s)| s.snapshot(now, index));
                let _ = reply.send(snap);
            }
            Command::IceRestart {
                id,
                offer,
                ufrag,
                pass,
                reply,
            } => {
                let result = self.ice_restart(now, id, *offer, ufrag, pass, out);
                let _ = reply.send(result);
            }
            Command::Attach {
                id,
                endpoints,
                reply,
            } => {
                let ticks = LoopTicks {
                    sessions: self.sessions.len(),
                    coarse: self.settings.coarse_ticks,
                };
                let result = match self.session_mut(id) {
                    Some((key, s)) => s.attach_owner(now, endpoints, ticks).map(|()| key),
                    None => Err(AttachError::NotFound),
                };
                // The bridge may now have a tick: reschedule.
                let result = result.map(|key| self.drive(now, key, None, out)).map(drop);
                let _ = reply.send(result);
            }
            Command::Tap { id, tap, reply } => {
                let max = self.settings.max_taps;
                let result = match self.session_mut(id) {
                    Some((_, s)) => s.add_tap(tap, max),
                    None => Err(AttachError::NotFound),
                };
                if matches!(result, Err(AttachError::TooManyTaps(_))) {
                    self.counters.taps_refused += 1;
                }
                let _ = reply.send(result);
            }
            Command::End { id, reason } => {
                self.end_session(now, id, reason, out);
            }
            Command::Migrate { reply } => {
                // Once per drain, not per packet: the key list's allocation is fine here.
                let keys: Vec<SessionKey> = self.sessions.iter().map(|(k, _)| k).collect();
                let mut told = 0;
                for key in keys {
                    if self.sessions[key].ask_to_migrate() {
                        told += 1;
                        self.drive(now, key, None, out);
                    }
                }
                let _ = reply.send(told);
            }
            Command::Shutdown => return false,
        }
        true
    }

    /// Ends every session (shutdown): each says goodbye on its next drive.
    pub fn end_all(&mut self, now: Instant, reason: EndReason, out: &mut impl Outbox) {
        let ids: Vec<SessionId> = self.sessions.iter().map(|(_, s)| s.id).collect();
        for id in ids {
            self.end_session(now, id, reason, out);
        }
    }

    fn session_mut(&mut self, id: SessionId) -> Option<(SessionKey, &mut Session)> {
        let key = *self.ids.get(&id)?;
        self.sessions.get_mut(key).map(|s| (key, s))
    }

    /// The path of a datagram from `from` on the UDP socket, and its payload: unwrapped from
    /// its relay header if it carries one (see the module header for who may frame).
    fn udp_path<'a>(
        &self,
        from: SocketAddr,
        bytes: &'a [u8],
    ) -> Result<(ClientPath, &'a [u8]), DropReason> {
        if !is_relay_framed(bytes) {
            return Ok((ClientPath::direct_udp(from), bytes));
        }
        let ip = from.ip().to_canonical();
        if !self.settings.relays.iter().any(|net| net.contains(&ip)) {
            return Err(DropReason::RelayNotAllowed);
        }
        match RelayHeader::decode(bytes) {
            Ok((h, payload)) if h.direction == Direction::ToTransceiver => Ok((
                ClientPath {
                    addr: h.client,
                    via: Some(from),
                    transport: h.transport,
                },
                payload,
            )),
            _ => Err(DropReason::BadRelayHeader),
        }
    }

    /// Routes one client datagram (or TCP frame) arriving on `path` to its session: a binding
    /// request by its server ufrag, anything else by the authenticated client. Returns
    /// whether it was a check str0m answered.
    fn route(
        &mut self,
        now: Instant,
        arrived: Instant,
        path: ClientPath,
        bytes: &[u8],
        out: &mut impl Outbox,
    ) -> bool {
        let source = path.peer();
        let (key, binding_request) = if looks_like_stun(bytes) {
            match server_ufrag(bytes) {
                Ok(ufrag) => match self.demux.by_ufrag(ufrag) {
                    Some(key) => match self.admit_check(now, key, path) {
                        Ok(()) => (key, true),
                        Err(reason) => return self.dropped(reason),
                    },
                    None => return self.dropped(DropReason::StunUnknownUfrag),
                },
                // Not a binding request with a USERNAME: only an authenticated peer may
                // send other STUN (e.g. indications) to its session.
                Err(_) => match self.demux.by_addr(&source) {
                    Some(key) => (key, false),
                    None => return self.dropped(DropReason::StunMalformed),
                },
            }
        } else {
            match self.demux.by_addr(&source) {
                Some(key) => (key, false),
                None => return self.dropped(DropReason::UnknownSource),
            }
        };
        self.deliver(now, arrived, key, path, bytes, binding_request, out)
    }

    /// Counts a datagram dropped for `reason`; it was not a check str0m answered.
    fn dropped(&mut self, reason: DropReason) -> bool {
        self.counters.drop(reason);
        false
    }

    /// Whether session `key`'s check budget lets a binding request on `path` reach str0m.
    fn admit_check(
        &mut self,
        now: Instant,
        key: SessionKey,
        path: ClientPath,
    ) -> Result<(), DropReason> {
        let authenticated = self.demux.by_addr(&path.peer()) == Some(key);
        match self.sessions.get_mut(key) {
            Some(session) => session.admit_check(now, path.addr, authenticated),
            None => Ok(()),
        }
    }

    /// Hands a datagram to session `key`; returns whether it was a check str0m answered.
    #[allow(clippy::too_many_arguments)] // the datagram, where it came from, and the sink
    fn deliver(
        &mut self,
        now: Instant,
        arrived: Instant,
        key: SessionKey,
        path: ClientPath,
        bytes: &[u8],
        binding_request: bool,
        out: &mut impl Outbox,
    ) -> bool {
        let Some(session) = self.sessions.get_mut(key) else {
            return false;
        };
        // Media from an address the session holds, framed by a trusted relay it does not yet
        // answer through (a relay failover: the client's flow now reaches us by another
        // relay): if str0m authenticates it as fresh SRTP, replies take that relay from now
        // on, so the downlink resumes with the first relayed packet instead of the client's
        // next consent check. A spoofed packet fails SRTP's tag, a replayed one its replay
        // window (str0m counts neither), and SRTCP, which str0m keeps no replay window for,
        // moves nothing.
        let relay_move = !binding_request && path.via.is_some() && !session.answers_on(&path);
        let authentic_before = relay_move.then(|| session.srtp_authenticated());
        if !session.handle_datagram(now, arrived, path, bytes, binding_request) {
            self.counters.drop(DropReason::Rejected);
        }
        if authentic_before.is_some_and(|before| session.srtp_authenticated() > before) {
            self.move_path_on_media(key, path);
        }
        let probe = binding_request.then_some(path);
        let answered = self.drive(now, key, probe, out);
        if answered {
            // str0m answered the check with a success response: the request carried valid
            // MESSAGE-INTEGRITY for this session, so its path may now route to it.
            self.authenticate_path(now, key, path);
        }
        answered
    }

    /// Session `key`'s replies to `path.addr` take `path` from now on (its media arrived
    /// there and authenticated; see `deliver`).
    fn move_path_on_media(&mut self, key: SessionKey, path: ClientPath) {
        let Some(session) = self.sessions.get_mut(key) else {
            return;
        };
        // The address is the session's already: the entry is replaced, nothing evicted.
        if let Some(evicted) = session.add_client_addr(path) {
            self.demux.remove_addr(evicted, key);
        }
        self.counters.media_path_moves += 1;
        let relay = path.via.map(|v| v.to_string()).unwrap_or_default();
        tracing::info!(session = %session.id, client = %path.addr, %relay, "reply path moved to the relay its authenticated media now arrives through");
    }

    /// Maps an authenticated path to session `key` (or renews its hold on it).
    fn authenticate_path(&mut self, now: Instant, key: SessionKey, path: ClientPath) {
        let Claim::Granted { from } = self.demux.claim_addr(now, path.peer(), key) else {
            return; // held by another session: `drive` withheld the answer
        };
        // The address belonged to a session of this loop that stopped checking from it.
        if let Some(o) = from.and_then(|other| self.sessions.get_mut(other)) {
            o.forget_client_addr(path.peer());
        }
        let Some(session) = self.sessions.get_mut(key) else {
            return;
        };
        if let Some(evicted) = session.add_client_addr(path) {
            self.demux.remove_addr(evicted, key);
        }
    }

    /// Drains a session's output into `out`, collects its report, reschedules its timer, and
    /// removes it once ended. Returns whether str0m answered the check that arrived on
    /// `probe` with a success response that went out. The answer is withheld (and counted)
    /// when another session holds the check's address within its consent window.
    fn drive(
        &mut self,
        now: Instant,
        key: SessionKey,
        probe: Option<ClientPath>,
        out: &mut impl Outbox,
    ) -> bool {
        let held = probe
            .is_some_and(|p| matches!(self.demux.may_claim(now, &p.peer(), key), Claim::Held(_)));
        let Some(session) = self.sessions.get_mut(key) else {
            return false;
        };
        let counters = &mut self.counters;
        let mut authenticated = false;
        let next = session.poll(now, &mut |t: &Transmit, route: Route| {
            if probe.is_some_and(|p| p.addr == t.destination) && is_binding_success(&t.contents) {
                if held {
                    counters.drop(DropReason::AddrHeld);
                    return;
                }
                authenticated = true;
            }
            transmit(counters, t, route, out);
        });
        let report = session.take_report();
        let id = session.id;
        self.counters.bridge.add(&report.bridge);
        self.counters.handoff.add(&report.handoff);
        if let Some(q) = report.quality {
            self.counters.quality.observe(&quality_observation(&q));
        }
        if report.rtcp_implausible.any() {
            let counts = &report.rtcp_implausible.0;
            self.counters.quality.implausible(counts);
        }
        if let Some(turns) = &report.turns {
            self.counters.quality.turns(turns);
        }
        if let Some(talking) = report.started_talking {
            let event = LoopEvent::StartedTalking { id, talking };
            self.events.push_back(EndpointEvent::Loop(event));
        }
        if let Some((how, owner)) = report.owner_lost {
            let stalled = how == OwnerLoss::Stalled;
            let event = LoopEvent::OwnerLost { id, owner, stalled };
            self.events.push_back(EndpointEvent::Loop(event));
        }
        match next {
            Some(deadline) => {
                let serial = session.serial;
                self.timers
                    .schedule(&mut session.scheduled, deadline, key, serial);
            }
            None => self.remove(key),
        }
        authenticated
    }

    fn insert(&mut self, now: Instant, session: Session, out: &mut impl Outbox) {
        let id = session.id;
        let ufrag = session.ufrag().to_string();
        let key = self.sessions.insert(session);
        self.demux.insert_ufrag(&ufrag, key);
        self.ids.insert(id, key);
        self.drive(now, key, None, out);
    }

    fn remove(&mut self, key: SessionKey) {
        let session = self.sessions.remove(key);
        self.demux.remove_ufrag(session.ufrag());
        for peer in session.client_peers() {
            self.demux.remove_addr(peer, key);
        }
        self.ids.remove(&session.id);
        for conn in self.tcp_owners.session_ended(key) {
            self.tcp_closes
                .push_back((conn, TcpCloseReason::SessionEnded));
        }
        let reason = session.end_reason().unwrap_or(EndReason::RtcError);
        let ended = SessionEnded {
            id: session.id,
            reason,
        };
        self.events.push_back(EndpointEvent::Ended(ended));
    }

    fn end_session(
        &mut self,
        now: Instant,
        id: SessionId,
        reason: EndReason,
        out: &mut impl Outbox,
    ) -> bool {
        let Some((key, session)) = self.session_mut(id) else {
            return false;
        };
        session.end(now, reason);
        self.drive(now, key, None, out);
        true
    }

    fn ice_restart(
        &mut self,
        now: Instant,
        id: SessionId,
        offer: SdpOffer,
        ufrag: String,
        pass: String,
        out: &mut impl Outbox,
    ) -> Option<Result<String, SessionError>> {
        let (key, session) = self.session_mut(id)?;
        let old = session.ufrag().to_string();
        let result = session.ice_restart(offer, ufrag, pass);
        if result.is_ok() {
            let new = session.ufrag().to_string();
            self.demux.remove_ufrag(&old);
            self.demux.insert_ufrag(&new, key);
            tracing::info!(session = %id, "ICE restart accepted");
        }
        self.drive(now, key, None, out);
        Some(result)
    }
}

/// The path of a frame on the loop's own TCP connection `conn`.
fn tcp_path(peer: SocketAddr, conn: u32) -> ClientPath {
    ClientPath {
        addr: peer,
        via: None,
        transport: Transport::Tcp { conn },
    }
}

/// Sends a transmit the way its route says: directly to the client (a UDP datagram, or a frame
/// on the loop's TCP connection), or framed (a relay header with the client address and the
/// transport it came on) to the relay that carried the client's traffic.
fn transmit(counters: &mut LoopCounters, t: &Transmit, route: Route, out: &mut impl Outbox) {
    match route {
        Route::Unrouted => counters.unrouted += 1,
        Route::Direct(Transport::Udp) => out.send_udp(t.destination, &[], &t.contents),
        Route::Direct(Transport::Tcp { conn }) => {
            if !out.send_tcp(conn, t.destination, &t.contents) {
                // The connection closed since the check that authenticated it.
                counters.unrouted += 1;
            }
        }
        Route::Via(relay, transport) => {
            let mut header = [0u8; MAX_HEADER_LEN];
            let h = RelayHeader {
                direction: Direction::ToClient,
                client: t.destination,
                transport,
            };
            match h.encode(&mut header) {
                Ok(n) => out.send_udp(relay, &header[..n], &t.contents),
                Err(_) => counters.send_errors += 1,
            }
        }
    }
}

/// A session's quality sample in the metrics' base units (seconds, fractions).
fn quality_observation(q: &crate::media::quality::QualitySample) -> QualityObservation {
    let s = |ms: Option<f64>| ms.map(|v| v / 1e3);
    QualityObservation {
        rtt_s: s(q.rtt_ms),
        uplink_jitter_s: s(q.uplink_jitter_ms),
        downlink_jitter_s: s(q.downlink_jitter_ms),
        uplink_loss: q.uplink_loss,
        downlink_loss: q.downlink_loss,
        uplink_mos: q.uplink_mos,
        downlink_mos: q.downlink_mos,
    }
}
