//! A media loop's own ICE-TCP listener (passive candidates, RFC 6544) and its connections.
//!
//! Direct mode only: behind a relay, TCP clients reach the loop as relay-framed datagrams on
//! its UDP socket. Here the loop accepts connections itself, reads RFC 4571 frames
//! ([`voxgate_proto::rfc4571`]) and writes replies through a bounded per-connection queue.
//! This module only moves bytes and enforces limits; what a frame means (demux by ufrag, then
//! by client) is the loop's job, exactly as for a UDP datagram.
//!
//! A connection is *tentative* from its accept until str0m answers its first frame, which
//! must be a check for a session of the loop (the loop then marks it open); it is then the
//! session's (see `tcp_owners`). Limits, each counted by reason when it closes a connection
//! ([`TcpCloseReason`]):
//!
//! - at accept, at most `max_conns` connections (`global_cap`), and from one network at most
//!   its share ([`voxgate_proto::source_caps`]): per client IP, an IPv6 /64 counting as one
//!   (`per_ip_cap`), per IPv6 /56 (`per_56_cap`) and per IPv6 /48 (`per_48_cap`);
//! - at most `max_tentative` tentative connections: a new one past that closes the oldest
//!   tentative one (`tentative_evicted`), so connections that never authenticate keep no
//!   newcomer out for longer than they keep coming, and the rest of `max_conns` stays for
//!   connections that did authenticate;
//! - a first frame within `first_frame_timeout` (slow-drip bytes do not extend it);
//! - an open connection lives `idle_timeout` past the last check str0m answered on it
//!   (`idle_timeout`). Only an answered check keeps it, not any other frame: anyone can send a
//!   frame of junk, and str0m's saying it took a DTLS or SRTP packet does not prove the packet
//!   authenticated (SRTP that fails its check is dropped inside str0m), while a live pair is
//!   checked every few seconds (ICE consent, RFC 7675);
//! - frames of at most `max_frame` bytes.
//!
//! The loop also closes the connections of a session that ended, and a session's oldest past
//! its share (`session_ended`, `session_cap`: the endpoint decides). A connection is closed
//! with nothing sent; nothing here ever answers on its own.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use slab::Slab;

use voxgate_proto::rfc4571::{FrameDecoder, WriteQueue};
use voxgate_proto::source_caps::{SourceCounts, SourceLimits, SourceRefusal};

use crate::metrics::{TcpCloseReason, TcpCounters};

/// Limits of a loop's TCP listener.
#[derive(Debug, Clone, Copy)]
pub struct TcpLimits {
    /// Largest RFC 4571 frame accepted; a longer length prefix closes the connection.
    pub max_frame: usize,
    pub first_frame_timeout: Duration,
    /// How long an open connection lives past the last check str0m answered on it.
    pub idle_timeout: Duration,
    /// Connections open at once on this loop.
    pub max_conns: usize,
    /// Connections at once that str0m has not answered yet (the oldest is closed past it).
    pub max_tentative: usize,
    /// Connections open at once from one client IP (IPv6: one /64), one IPv6 /56 and one /48.
    pub per_source: SourceLimits,
    /// Connections one session may hold (endpoint: a newer one closes its oldest).
    pub max_conns_per_session: usize,
    /// Bytes a connection may have waiting to be written; beyond it the oldest frames drop.
    pub write_queue_bytes: usize,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits {
            max_frame: 2048,
            first_frame_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            max_conns: 4096,
            max_tentative: 1024,
            per_source: SourceLimits {
                per_source: 16,
                per_56: 64,
                per_48: 256,
            },
            max_conns_per_session: 8,
            write_queue_bytes: 32 * 1024,
        }
    }
}

/// `SO_SNDBUF` of an accepted connection (the kernel doubles it): about a second of audio.
const KERNEL_SEND_BUFFER: usize = 16 * 1024;
/// Reads of one connection per wakeup before others get a turn (the rest waits in `pending`).
const READS_PER_TURN: usize = 16;
/// Connections accepted per wakeup before the loop runs timers and other sockets.
const ACCEPTS_PER_TURN: usize = 64;
/// How often the timeouts are checked (a timeout fires at most this late).
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    /// Accepted (tentative); its first frame must be an authenticated binding request for a
    /// live session.
    AwaitingFirstFrame,
    /// Its first check was answered: frames go to the demux like datagrams.
    Open,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    decoder: FrameDecoder,
    queue: WriteQueue,
    state: ConnState,
    accepted: Instant,
    /// When str0m last answered a check on it: its idle timer runs from here.
    last_answered: Instant,
    /// Reads left before yielding to other connections in this wakeup.
    reads_left: usize,
    /// Tells this connection's entry in `tentative_order` from a later one's on its key.
    serial: u64,
}

/// What reading a connection produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// A whole frame of `len` bytes is in the caller's buffer.
    Ready { len: usize },
    /// Nothing more for now.
    Idle,
    /// The connection was closed for this reason.
    Closed(TcpCloseReason),
}

pub struct TcpServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    token_base: usize,
    conns: Slab<Conn>,
    sources: SourceCounts,
    /// Connections awaiting their first answered check.
    tentative: usize,
    /// Tentative connections as `(key, serial)`, oldest first; entries of connections since
    /// opened or closed are skipped when met (and compacted when the queue is full).
    tentative_order: VecDeque<(usize, u64)>,
    next_serial: u64,
    /// Open connections closed since the loop last took them (it tells the endpoint).
    closed_open: Vec<(u32, SocketAddr)>,
    limits: TcpLimits,
    accept_pending: bool,
    /// Connections whose reads were cut short by their turn budget.
    pending: Vec<usize>,
    /// Connections to close at the end of the wakeup (write failures found while sending).
    doomed: Vec<(usize, TcpCloseReason)>,
    next_sweep: Instant,
    pub counters: TcpCounters,
}

impl TcpServer {
    /// Binds the listener (with `SO_REUSEADDR`, so a restart does not wait out TIME_WAIT) and
    /// registers it under `listener_token`; connection `k` gets `Token(token_base + k)`.
    pub fn bind(
        addr: SocketAddr,
        limits: TcpLimits,
        registry: &Registry,
        listener_token: Token,
        token_base: usize,
    ) -> io::Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(1024)?;
        let mut listener = TcpListener::from_std(socket.into());
        registry.register(&mut listener, listener_token, Interest::READABLE)?;
        Ok(TcpServer {
            local_addr: listener.local_addr()?,
            listener,
            token_base,
            conns: Slab::new(),
            sources: SourceCounts::with_capacity(limits.per_source, 1024),
            tentative: 0,
            tentative_order: VecDeque::with_capacity(order_capacity(
                limits.max_tentative.min(limits.max_conns),
            )),
            next_serial: 0,
            closed_open: Vec::new(),
            limits,
            accept_pending: false,
            pending: Vec::new(),
            doomed: Vec::new(),
            next_sweep: Instant::now() + SWEEP_EVERY,
            counters: TcpCounters::default(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn max_frame(&self) -> usize {
        self.limits.max_frame
    }

    /// The connection behind a poll token, if it is one of ours.
    pub fn conn_of(&self, token: Token) -> Option<usize> {
        token
            .0
            .checked_sub(self.token_base)
            .filter(|k| self.conns.contains(*k))
    }

    pub fn state(&self, key: usize) -> Option<(ConnState, SocketAddr)> {
        self.conns.get(key).map(|c| (c.state, c.peer))
    }

    /// str0m answered a check on connection `key`: it is open (if it was tentative) and its
    /// idle timer starts again.
    pub fn answered(&mut self, key: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(key) else {
            return;
        };
        if c.state == ConnState::AwaitingFirstFrame {
            c.state = ConnState::Open;
            self.tentative -= 1;
        }
        c.last_answered = now;
    }

    /// Whether work is left over from the last turn (the loop then polls without sleeping).
    pub fn has_pending(&self) -> bool {
        self.accept_pending || !self.pending.is_empty()
    }

    /// When the loop must wake for the next timeout check (only while connections exist).
    pub fn next_deadline(&self) -> Option<Instant> {
        (!self.conns.is_empty()).then_some(self.next_sweep)
    }

    /// Accepts new connections (up to a turn's worth), refusing those over a cap and, past
    /// the tentative cap, closing the oldest tentative connection for each.
    pub fn accept(&mut self, now: Instant, registry: &Registry) {
        self.accept_pending = false;
        for _ in 0..ACCEPTS_PER_TURN {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // E.g. EMFILE: leave the rest in the backlog until the next event.
                    tracing::debug!(error = %e, "tcp accept failed");
                    return;
                }
            };
            let tentative_full = self.tentative >= self.max_tentative();
            let refused = if !tentative_full && self.conns.len() >= self.limits.max_conns {
                Err(TcpCloseReason::GlobalCap)
            } else {
                self.sources.admit(peer.ip()).map_err(source_refusal)
            };
            if let Err(reason) = refused {
                self.counters.close(reason);
                continue; // dropping the stream closes it, nothing sent
            }
            if tentative_full {
                self.evict_oldest_tentative(registry);
            }
            let entry = self.conns.vacant_entry();
            let key = entry.key();
            if let Err(e) = registry.register(
                &mut stream,
                Token(self.token_base + key),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                tracing::debug!(error = %e, "tcp register failed");
                self.sources.release(peer.ip());
                self.counters.close(TcpCloseReason::IoError);
                continue;
            }
            let _ = stream.set_nodelay(true);
            // A small kernel buffer keeps a slow reader's backlog in our queue, where the
            // oldest media is dropped, rather than seconds of stale audio in the kernel.
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(KERNEL_SEND_BUFFER);
            let serial = self.next_serial;
            self.next_serial += 1;
            entry.insert(Conn {
                stream,
                peer,
                decoder: FrameDecoder::new(self.limits.max_frame),
                queue: WriteQueue::new(self.limits.write_queue_bytes),
                state: ConnState::AwaitingFirstFrame,
                accepted: now,
                last_answered: now,
                reads_left: READS_PER_TURN,
                serial,
            });
            self.add_tentative(key, serial);
            self.counters.accepted += 1;
        }
        self.accept_pending = true;
    }

    /// Starts a read turn for a connection that became readable.
    pub fn begin_turn(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            c.reads_left = READS_PER_TURN;
        }
    }

    /// Connections left unread by their budget last turn; the caller reads each again.
    pub fn take_pending(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.pending);
    }

    /// The next frame of connection `key`, copied into `out` (at least `max_frame` long).
    /// Reads the socket when no whole frame is buffered. The connection is closed (and the
    /// reason counted) on EOF, an error, or bad framing.
    pub fn next_frame(&mut self, registry: &Registry, key: usize, out: &mut [u8]) -> Frame {
        let Some(conn) = self.conns.get_mut(key) else {
            return Frame::Idle;
        };
        loop {
            match conn.decoder.next_frame() {
                // An empty frame carries nothing a datagram could: not a client of ours.
                Ok(Some([])) => {
                    self.close(registry, key, TcpCloseReason::Garbage);
                    return Frame::Closed(TcpCloseReason::Garbage);
                }
                Ok(Some(frame)) => {
                    let len = frame.len();
                    out[..len].copy_from_slice(frame);
                    self.counters.frames_in += 1;
                    return Frame::Ready { len };
                }
                Ok(None) => {}
                Err(_) => {
                    self.close(registry, key, TcpCloseReason::Oversize);
                    return Frame::Closed(TcpCloseReason::Oversize);
                }
            }
            if conn.reads_left == 0 {
                self.pending.push(key);
                return Frame::Idle;
            }
            conn.reads_left -= 1;
            match conn.stream.read(conn.decoder.spare()) {
                Ok(0) => {
                    self.close(registry, key, TcpCloseReason::PeerClosed);
                    return Frame::Closed(TcpCloseReason::PeerClosed);
                }
                Ok(n) => conn.decoder.filled(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Frame::Idle,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(registry, key, TcpCloseReason::IoError);
                    return Frame::Closed(TcpCloseReason::IoError);
                }
            }
        }
    }

    /// Writes one frame to connection `conn` if it is still the one `peer` opened; returns
    /// false when there is no such connection. Never blocks: a full queue drops its oldest
    /// frames (counted).
    pub fn send(&mut self, conn: u32, peer: SocketAddr, payload: &[u8]) -> bool {
        let key = conn as usize;
        let Some(c) = self.conns.get_mut(key).filter(|c| c.peer == peer) else {
            return false;
        };
        let (sent, result) = c.queue.send(&mut c.stream, payload);
        self.counters.write_dropped += sent.dropped;
        match result {
            Ok(()) => self.counters.frames_out += 1,
            Err(_) => self.doomed.push((key, TcpCloseReason::IoError)),
        }
        true
    }

    /// The socket of connection `key` can take more: write what waits.
    pub fn on_writable(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            if c.queue.flush(&mut c.stream).1.is_err() {
                self.doomed.push((key, TcpCloseReason::IoError));
            }
        }
    }

    /// Closes connection `conn` if it is still the one `peer` opened (the endpoint's decision:
    /// its session ended, or is past its share).
    pub fn close_conn(
        &mut self,
        registry: &Registry,
        conn: u32,
        peer: SocketAddr,
        reason: TcpCloseReason,
    ) {
        let key = conn as usize;
        if self.conns.get(key).is_some_and(|c| c.peer == peer) {
            self.close(registry, key, reason);
        }
    }

    /// Open connections closed since the last call, as `(conn, peer)`: the endpoint forgets
    /// them.
    pub fn drain_closed(&mut self) -> std::vec::Drain<'_, (u32, SocketAddr)> {
        self.closed_open.drain(..)
    }

    /// Closes connections that failed while sending, and those past a timeout.
    pub fn maintain(&mut self, now: Instant, registry: &Registry) {
        while let Some((key, reason)) = self.doomed.pop() {
            self.close(registry, key, reason);
        }
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_EVERY;
        let limits = self.limits;
        let expired: Vec<(usize, TcpCloseReason)> = self
            .conns
            .iter()
            .filter_map(|(k, c)| match c.state {
                ConnState::AwaitingFirstFrame
                    if now.duration_since(c.accepted) >= limits.first_frame_timeout =>
                {
                    Some((k, TcpCloseReason::FirstFrameTimeout))
                }
                ConnState::Open if now.duration_since(c.last_answered) >= limits.idle_timeout => {
                    Some((k, TcpCloseReason::IdleTimeout))
                }
                _ => None,
            })
            .collect();
        for (k, reason) in expired {
            self.close(registry, k, reason);
        }
    }

    /// Closes connection `key` (nothing more is sent) and counts why.
    pub fn close(&mut self, registry: &Registry, key: usize, reason: TcpCloseReason) {
        let Some(mut c) = self.conns.try_remove(key) else {
            return;
        };
        let _ = registry.deregister(&mut c.stream);
        self.sources.release(c.peer.ip());
        match c.state {
            ConnState::AwaitingFirstFrame => self.tentative -= 1,
            ConnState::Open => self.closed_open.push((key as u32, c.peer)),
        }
        self.pending.retain(|k| *k != key);
        self.counters.close(reason);
    }

    pub fn open_count(&self) -> usize {
        self.conns.len()
    }

    /// Most tentative connections at once: `max_tentative`, within `max_conns`.
    fn max_tentative(&self) -> usize {
        self.limits.max_tentative.min(self.limits.max_conns)
    }

    /// Counts a new connection as tentative, in accept order.
    fn add_tentative(&mut self, key: usize, serial: u64) {
        self.tentative += 1;
        if self.tentative_order.len() == self.tentative_order.capacity() {
            // Live entries are at most the cap, half the capacity: this runs at most once per
            // cap's worth of accepts, and the queue never reallocates.
            let conns = &self.conns;
            self.tentative_order
                .retain(|&(k, serial)| is_tentative(conns, k, serial));
        }
        self.tentative_order.push_back((key, serial));
    }

    /// Closes the oldest connection that is still tentative.
    fn evict_oldest_tentative(&mut self, registry: &Registry) {
        while let Some((key, serial)) = self.tentative_order.pop_front() {
            if is_tentative(&self.conns, key, serial) {
                self.close(registry, key, TcpCloseReason::TentativeEvicted);
                return;
            }
        }
    }
}

/// Whether connection `key` is still the tentative one accepted as `serial`.
fn is_tentative(conns: &Slab<Conn>, key: usize, serial: u64) -> bool {
    conns
        .get(key)
        .is_some_and(|c| c.serial == serial && c.state == ConnState::AwaitingFirstFrame)
}

/// The close reason of a per-source cap.
fn source_refusal(r: SourceRefusal) -> TcpCloseReason {
    match r {
        SourceRefusal::PerSource => TcpCloseReason::PerIpCap,
        SourceRefusal::Per56 => TcpCloseReason::Per56Cap,
        SourceRefusal::Per48 => TcpCloseReason::Per48Cap,
    }
}

/// Capacity of the tentative queue: twice the live entries it can hold (see
/// `TcpServer::add_tentative`).
fn order_capacity(max_tentative: usize) -> usize {
    max_tentative.saturating_mul(2).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Poll;

    fn limits(max_conns: usize, max_tentative: usize) -> TcpLimits {
        TcpLimits {
            max_conns,
            max_tentative,
            ..TcpLimits::default()
        }
    }

    fn listen(limits: TcpLimits) -> (Poll, TcpServer) {
        let poll = Poll::new().unwrap();
        let addr = "127.0.0.1:0".parse().unwrap();
        let tcp = TcpServer::bind(addr, limits, poll.registry(), Token(0), 1).unwrap();
        (poll, tcp)
    }

    /// Connects `n` clients and has the server take them (accepted or refused).
    fn connect(poll: &Poll, tcp: &mut TcpServer, n: usize) -> Vec<std::net::TcpStream> {
        let taken = |t: &TcpServer| t.counters.accepted + refused(t);
        let want = taken(tcp) + n as u64;
        let clients = (0..n)
            .map(|_| std::net::TcpStream::connect(tcp.local_addr()).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while taken(tcp) < want {
            assert!(Instant::now() < deadline, "the server took too few");
            tcp.accept(Instant::now(), poll.registry());
            std::thread::sleep(Duration::from_millis(5));
        }
        clients
    }

    fn refused(t: &TcpServer) -> u64 {
        [
            TcpCloseReason::GlobalCap,
            TcpCloseReason::PerIpCap,
            TcpCloseReason::Per56Cap,
            TcpCloseReason::Per48Cap,
        ]
        .iter()
        .map(|r| closed(t, *r))
        .sum()
    }

    fn closed(t: &TcpServer, reason: TcpCloseReason) -> u64 {
        t.counters.closed[reason as usize]
    }

    #[test]
    fn past_the_tentative_cap_a_newcomer_closes_the_oldest_tentative_connection() {
        let (poll, mut tcp) = listen(limits(10, 3));
        let mut first = connect(&poll, &mut tcp, 3);
        tcp.answered(0, Instant::now());
        let mut more = connect(&poll, &mut tcp, 3);
        assert_eq!(closed(&tcp, TcpCloseReason::TentativeEvicted), 2);
        assert_eq!(tcp.open_count(), 4, "the open one and three tentative");
        assert_eq!(tcp.state(0).map(|s| s.0), Some(ConnState::Open));
        let gone: Vec<bool> = first.iter_mut().chain(&mut more).map(is_closed).collect();
        assert_eq!(
            gone,
            [false, true, true, false, false, false],
            "the oldest went"
        );
    }

    /// Whether the server closed `client` (EOF), waiting briefly.
    fn is_closed(client: &mut std::net::TcpStream) -> bool {
        use std::io::Read;
        client
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        matches!(client.read(&mut [0u8; 16]), Ok(0))
    }

    #[test]
    fn a_full_loop_refuses_a_newcomer_while_it_has_tentative_room() {
        let (poll, mut tcp) = listen(limits(3, 3));
        let _held = connect(&poll, &mut tcp, 3);
        tcp.answered(0, Instant::now());
        let _late = connect(&poll, &mut tcp, 1);
        assert_eq!(closed(&tcp, TcpCloseReason::GlobalCap), 1);
        assert_eq!(closed(&tcp, TcpCloseReason::TentativeEvicted), 0);
        // A loop of tentative connections only: a newcomer takes the oldest one's place.
        let (poll, mut tcp) = listen(limits(3, 3));
        let _held = connect(&poll, &mut tcp, 4);
        assert_eq!(closed(&tcp, TcpCloseReason::TentativeEvicted), 1);
        assert_eq!(closed(&tcp, TcpCloseReason::GlobalCap), 0);
    }

    #[test]
    fn only_an_answered_check_restarts_an_open_connections_idle_timer() {
        use std::io::Write;
        let (poll, mut tcp) = listen(TcpLimits::default());
        let mut clients = connect(&poll, &mut tcp, 2);
        let t0 = Instant::now();
        let idle = TcpLimits::default().idle_timeout;
        tcp.answered(0, t0);
        tcp.answered(1, t0 + Duration::from_secs(10));
        // A frame read from connection 0 is not a check str0m answered.
        clients[0].write_all(&[0, 1, 0x42]).unwrap();
        let mut frame = [0u8; 2048];
        let deadline = Instant::now() + Duration::from_secs(5);
        tcp.begin_turn(0);
        while tcp.next_frame(poll.registry(), 0, &mut frame) != (Frame::Ready { len: 1 }) {
            assert!(Instant::now() < deadline, "no frame");
            std::thread::sleep(Duration::from_millis(5));
            tcp.begin_turn(0);
        }
        tcp.maintain(t0 + idle, poll.registry());
        assert_eq!(closed(&tcp, TcpCloseReason::IdleTimeout), 1);
        assert!(tcp.state(0).is_none(), "closed at its idle timeout");
        assert!(tcp.state(1).is_some(), "answered later, so it stays");
        let gone: Vec<_> = tcp.drain_closed().collect();
        assert_eq!(
            gone,
            vec![(0, tcp_peer(&clients[0]))],
            "the endpoint hears of it"
        );
    }

    #[test]
    fn the_endpoint_closes_a_connection_only_if_it_is_still_the_one_it_means() {
        let (poll, mut tcp) = listen(TcpLimits::default());
        let clients = connect(&poll, &mut tcp, 2);
        tcp.answered(0, Instant::now());
        let registry = poll.registry();
        let stranger = SocketAddr::from(([127, 0, 0, 1], 9));
        tcp.close_conn(registry, 0, stranger, TcpCloseReason::SessionEnded);
        assert!(
            tcp.state(0).is_some(),
            "another peer's connection is left alone"
        );
        let peer = tcp_peer(&clients[0]);
        tcp.close_conn(registry, 0, peer, TcpCloseReason::SessionEnded);
        assert!(tcp.state(0).is_none());
        assert_eq!(closed(&tcp, TcpCloseReason::SessionEnded), 1);
        // A tentative connection's close is the listener's own business.
        tcp.close(registry, 1, TcpCloseReason::FirstFrameTimeout);
        let gone: Vec<_> = tcp.drain_closed().collect();
        assert_eq!(gone, vec![(0, peer)]);
    }

    fn tcp_peer(client: &std::net::TcpStream) -> SocketAddr {
        client.local_addr().unwrap()
    }
}
