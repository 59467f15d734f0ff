//! The TCP thread: a `mio` loop over the public TCP listener, the client connections and
//! one internal UDP socket.
//!
//! ```text
//!  client TCP ─► read ─► FrameDecoder ─► Connection::on_frame ─► sendmmsg ─► transceiver loop
//!  client TCP ◄─ write / WriteQueue ◄─ Connection::on_reply ◄─ recvmmsg ◄─ replies (same socket)
//! ```
//!
//! Per turn: wait for readiness, a timer or the waker; accept up to [`ACCEPTS_PER_TURN`]
//! connections (past the tentative cap, or into a full tier, each closes the oldest tentative
//! connection, one its transceiver has not answered yet, as a new UDP flow evicts the oldest
//! tentative flow; established connections are never closed for a newcomer, and a tier full
//! of them refuses it); read up to [`READS_PER_TURN`] buffers from each readable connection (one
//! that has more waits for the next turn, so a fast client cannot starve the others);
//! receive up to [`REPLY_BATCHES_PER_TURN`] batches of replies; close connections whose
//! timer is up (swept every [`SWEEP_EVERY`]); publish counters when due. Everything is
//! edge-triggered and non-blocking; a client that does not read only fills its own bounded
//! write queue.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read as _};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mio::net::{TcpListener, TcpStream, UdpSocket as MioUdp};
use mio::{Events, Interest, Poll, Token};
use voxgate_proto::rfc4571::{FrameDecoder, Sent, WriteQueue, MAX_FRAME};
use voxgate_proto::{Direction, RelayHeader, Transport, MAX_HEADER_LEN};

use voxgate_proto::source_caps::SourceLimits;

use super::admission::Admission;
use super::connection::{CloseReason, Connection, FrameVerdict, Timeouts};
use crate::batch_io::{RecvBatch, SendBatch, DEFAULT_SLOT};
use crate::config::{RoutingConfig, TcpConfig};
use crate::drop_reason::DropReason;
use crate::first_hop::WallClock;
use crate::metrics::{TcpMetrics, TcpSnapshot, DIR_TO_CLIENT, DIR_TO_TRANSCEIVER};

/// Connections accepted per turn before the others get a turn.
pub const ACCEPTS_PER_TURN: usize = 256;
/// Reads per connection per turn.
pub const READS_PER_TURN: usize = 4;
/// Reply batches received per turn.
pub const REPLY_BATCHES_PER_TURN: usize = 8;
/// How often connection timers are checked (a connection may outlive its deadline by this).
pub const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// Datagrams per `recvmmsg` / `sendmmsg`.
const BATCH: usize = 32;

const LISTENER: Token = Token(0);
const UDP: Token = Token(1);
/// Token of the waker (shutdown): the workers' (`worker::poll_with_waker` makes both).
const WAKER: Token = crate::worker::WAKER;
const FIRST_CONN: usize = 3;

/// Everything the TCP thread needs; built on the main thread, moved into the thread.
pub struct TcpSetup {
    /// The public listener, bound and non-blocking.
    pub listener: std::net::TcpListener,
    /// The internal socket towards transceivers, bound and non-blocking.
    pub internal: UdpSocket,
    /// The poll its waker is registered with.
    pub poll: Poll,
    /// Routing decisions (shared with the workers).
    pub routing: RoutingConfig,
    /// TCP limits.
    pub tcp: TcpConfig,
    /// Metric handles.
    pub metrics: TcpMetrics,
    /// Counter publication period.
    pub publish_every: Duration,
    /// Set on shutdown (then the waker fires).
    pub shutdown: Arc<AtomicBool>,
}

/// One client connection: its socket and the Sans-IO pieces beside it.
struct Conn {
    stream: TcpStream,
    decoder: FrameDecoder,
    queue: WriteQueue,
    state: Connection,
    /// Listed in `Loop::readable` (it has unread bytes).
    readable: bool,
}

/// The loop's state, owned by the TCP thread.
struct Loop {
    poll: Poll,
    listener: TcpListener,
    udp: MioUdp,
    out: SendBatch,
    recv: RecvBatch,
    conns: HashMap<u32, Conn>,
    admission: Admission,
    /// Connections not established yet (awaiting their first frame, or their first reply).
    tentative: usize,
    /// Tentative connections, oldest first; ids since established or closed are skipped when
    /// met (and compacted when the queue is full).
    tentative_order: VecDeque<u32>,
    next_id: u32,
    /// Connections with bytes still to read, in turn order.
    readable: VecDeque<u32>,
    /// Closures decided this turn (reused; never shrinks).
    closing: Vec<(u32, CloseReason)>,
    routing: RoutingConfig,
    tcp: TcpConfig,
    timeouts: Timeouts,
    clock: WallClock,
    metrics: TcpMetrics,
    publish_every: Duration,
    shutdown: Arc<AtomicBool>,
    counters: TcpSnapshot,
    published: TcpSnapshot,
}

/// Runs the TCP thread until shutdown.
pub fn run(setup: TcpSetup) -> io::Result<()> {
    let v6 = setup.internal.local_addr()?.is_ipv6();
    let mut listener = TcpListener::from_std(setup.listener);
    let mut udp = MioUdp::from_std(setup.internal);
    let registry = setup.poll.registry();
    registry.register(&mut listener, LISTENER, Interest::READABLE)?;
    registry.register(&mut udp, UDP, Interest::READABLE)?;
    let max = setup.tcp.max_connections;
    let limits = SourceLimits {
        per_source: setup.tcp.max_per_ip,
        per_56: setup.tcp.max_per_56,
        per_48: setup.tcp.max_per_48,
    };
    let mut lp = Loop {
        poll: setup.poll,
        listener,
        udp,
        out: SendBatch::new(BATCH, DEFAULT_SLOT + MAX_HEADER_LEN, v6),
        recv: RecvBatch::new(BATCH, DEFAULT_SLOT + MAX_HEADER_LEN),
        conns: HashMap::with_capacity(max),
        admission: Admission::with_limits(limits, max),
        tentative: 0,
        tentative_order: VecDeque::with_capacity(order_capacity(setup.tcp.max_tentative)),
        next_id: 1,
        readable: VecDeque::with_capacity(max),
        closing: Vec::with_capacity(max.min(4096)),
        timeouts: Timeouts {
            first_frame: setup.tcp.first_frame_timeout,
            tentative: setup.tcp.tentative_timeout,
            idle: setup.tcp.idle_timeout,
        },
        routing: setup.routing,
        tcp: setup.tcp,
        clock: WallClock::default(),
        metrics: setup.metrics,
        publish_every: setup.publish_every,
        shutdown: setup.shutdown,
        counters: TcpSnapshot::default(),
        published: TcpSnapshot::default(),
    };
    lp.clock.set_from(Instant::now(), SystemTime::now());
    lp.run()
}

impl Loop {
    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let (mut accept_ready, mut udp_ready) = (true, true);
        let mut next_sweep = Instant::now() + SWEEP_EVERY;
        let mut next_publish = Instant::now() + self.publish_every;
        loop {
            let now = Instant::now();
            let timeout = if accept_ready || udp_ready || !self.readable.is_empty() {
                Duration::ZERO
            } else {
                next_sweep.min(next_publish).saturating_duration_since(now)
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            let now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    LISTENER => accept_ready = true,
                    UDP => udp_ready = true,
                    WAKER => {}
                    Token(t) => {
                        let Some(id) = conn_id(t) else { continue };
                        if event.is_writable() {
                            self.flush_queue(id);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.mark_readable(id);
                        }
                    }
                }
            }
            if self.shutdown.load(Ordering::Relaxed) {
                self.publish();
                return Ok(());
            }
            if accept_ready {
                accept_ready = self.accept(now);
            }
            self.read_turn(now);
            self.flush_out();
            for _ in 0..REPLY_BATCHES_PER_TURN {
                if !udp_ready {
                    break;
                }
                udp_ready = self.pump_replies(now);
            }
            self.close_decided();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_EVERY;
            }
            if now >= next_publish {
                self.publish();
                next_publish = now + self.publish_every;
            }
        }
    }

    /// Accepts up to [`ACCEPTS_PER_TURN`] connections; returns whether more may be waiting.
    fn accept(&mut self, now: Instant) -> bool {
        for _ in 0..ACCEPTS_PER_TURN {
            let (mut stream, client) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and the like: let the sweep free something first.
                    tracing::warn!(error = %e, "TCP accept failed");
                    return false;
                }
            };
            // Past the tentative cap, or into a full tier, the oldest tentative connection
            // makes room: what never authenticates cannot keep newcomers out.
            let make_room = self
                .admission
                .must_make_room(self.tentative, self.tcp.max_tentative);
            let admitted = if make_room {
                self.admission.admit_making_room(client.ip())
            } else {
                self.admission.admit(client.ip())
            };
            if let Err(refusal) = admitted {
                // Dropped unregistered: closed with nothing sent.
                self.counters.refused[refusal.index()] += 1;
                continue;
            }
            if make_room {
                self.evict_oldest_tentative();
            }
            let id = self.fresh_id();
            let token = Token(FIRST_CONN + id as usize);
            let interest = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut stream, token, interest)
                .is_err()
            {
                self.admission.release(client.ip());
                self.counters.closed[CloseReason::IoError.index()] += 1;
                continue;
            }
            let _ = stream.set_nodelay(true);
            self.counters.accepted += 1;
            self.conns.insert(
                id,
                Conn {
                    stream,
                    decoder: FrameDecoder::new(self.tcp.max_frame),
                    queue: WriteQueue::new(self.tcp.write_queue_bytes),
                    state: Connection::new(now, id, client),
                    readable: false,
                },
            );
            self.add_tentative(id);
            // Bytes may have arrived with the handshake; edge-triggered, so look now.
            self.mark_readable(id);
        }
        true
    }

    /// Counts a new connection as tentative, in accept order.
    fn add_tentative(&mut self, id: u32) {
        self.tentative += 1;
        if self.tentative_order.len() == self.tentative_order.capacity() {
            // Live entries are at most the cap, half the capacity: this runs at most once per
            // cap's worth of accepts, and the queue never reallocates.
            let conns = &self.conns;
            self.tentative_order
                .retain(|id| conns.get(id).is_some_and(|c| !c.state.is_established()));
        }
        self.tentative_order.push_back(id);
    }

    /// Closes the oldest connection that is still tentative.
    fn evict_oldest_tentative(&mut self) {
        while let Some(id) = self.tentative_order.pop_front() {
            if self
                .conns
                .get(&id)
                .is_some_and(|c| !c.state.is_established())
            {
                self.close_now(id, CloseReason::TentativeEvicted);
                return;
            }
        }
    }

    /// A connection id not in use (never 0).
    fn fresh_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            // Ids above this would not fit a token on 32-bit targets; wrap early there.
            if usize::try_from(id).is_ok_and(|i| i < usize::MAX - FIRST_CONN)
                && !self.conns.contains_key(&id)
            {
                return id;
            }
        }
    }

    fn mark_readable(&mut self, id: u32) {
        if let Some(conn) = self.conns.get_mut(&id) {
            if !conn.readable {
                conn.readable = true;
                self.readable.push_back(id);
            }
        }
    }

    /// Gives every connection that was readable at the start of the turn its reads.
    fn read_turn(&mut self, now: Instant) {
        for _ in 0..self.readable.len() {
            let Some(id) = self.readable.pop_front() else {
                break;
            };
            match self.read_conn(id, now) {
                Ok(true) => self.readable.push_back(id),
                Ok(false) => {
                    if let Some(conn) = self.conns.get_mut(&id) {
                        conn.readable = false;
                    }
                }
                Err(reason) => self.closing.push((id, reason)),
            }
        }
    }

    /// Reads and forwards up to [`READS_PER_TURN`] buffers of connection `id`. `Ok(true)`:
    /// it may have more.
    fn read_conn(&mut self, id: u32, now: Instant) -> Result<bool, CloseReason> {
        let Self {
            conns,
            out,
            udp,
            counters,
            routing,
            clock,
            ..
        } = self;
        let Some(conn) = conns.get_mut(&id) else {
            return Ok(false);
        };
        for _ in 0..READS_PER_TURN {
            let spare = conn.decoder.spare();
            let n = match conn.stream.read(spare) {
                Ok(0) => return Err(CloseReason::ClientClosed),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(close_reason(&e)),
            };
            conn.decoder.filled(n);
            loop {
                let frame = match conn.decoder.next_frame() {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(_) => return Err(CloseReason::FrameTooLong),
                };
                let was_forwarding = conn.state.is_forwarding();
                match conn.state.on_frame(now, frame, routing, clock) {
                    FrameVerdict::Forward { to, header } => {
                        if !was_forwarding {
                            counters.flows_created += 1;
                        }
                        forward(out, udp, counters, to, &header, frame);
                    }
                    FrameVerdict::Reject(reason) => {
                        counters.drops[reason.index()] += 1;
                        return Err(CloseReason::FirstFrameRejected);
                    }
                }
            }
        }
        Ok(true)
    }

    fn flush_out(&mut self) {
        flush(&mut self.out, &self.udp, &mut self.counters);
    }

    /// Receives one batch of replies and writes each to its connection. Returns whether
    /// the socket may hold more.
    fn pump_replies(&mut self, now: Instant) -> bool {
        let n = match self.recv.recv(&self.udp) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) => {
                tracing::warn!(error = %e, "TCP thread: recvmmsg failed");
                return false;
            }
        };
        for dg in self.recv.iter() {
            let verdict = reply_target(&self.routing, dg.from, dg.bytes, dg.truncated);
            let (conn_id, header, payload) = match verdict {
                Ok(target) => target,
                Err(reason) => {
                    self.counters.drops[reason.index()] += 1;
                    continue;
                }
            };
            let Some(conn) = self.conns.get_mut(&conn_id) else {
                self.counters.drops[DropReason::UnknownConn.index()] += 1;
                continue;
            };
            let was_established = conn.state.is_established();
            if let Err(reason) = conn.state.on_reply(now, dg.from, &header) {
                self.counters.drops[reason.index()] += 1;
                continue;
            }
            if !was_established {
                self.tentative -= 1;
                self.counters.flows_established += 1;
            }
            if let Err(reason) = write_frame(conn, payload, &mut self.counters) {
                self.closing.push((conn_id, reason));
            }
        }
        n == BATCH
    }

    /// The socket of `id` can take more: write what its queue holds.
    fn flush_queue(&mut self, id: u32) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if let Err(reason) = drain_queue(conn, &mut self.counters) {
            self.closing.push((id, reason));
        }
    }

    /// Closes every connection whose timer is up.
    fn sweep(&mut self, now: Instant) {
        self.clock.set_from(now, SystemTime::now());
        for (id, conn) in &self.conns {
            if let Some(reason) = conn.state.timed_out(now, &self.timeouts) {
                self.closing.push((*id, reason));
            }
        }
        self.close_decided();
    }

    /// Closes the connections decided this turn (each once).
    fn close_decided(&mut self) {
        let mut closing = std::mem::take(&mut self.closing);
        for (id, reason) in closing.drain(..) {
            self.close_now(id, reason);
        }
        self.closing = closing;
    }

    /// Closes connection `id`, if it is still open, and counts why.
    fn close_now(&mut self, id: u32, reason: CloseReason) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.admission.release(conn.state.client().ip());
        if !conn.state.is_established() {
            self.tentative -= 1;
        }
        self.counters.closed[reason.index()] += 1;
        tracing::debug!(conn = id, reason = reason.as_str(), "TCP connection closed");
        // Dropping the stream closes it (a reset if unread bytes remain).
    }

    fn publish(&mut self) {
        self.counters.open = self.conns.len() as u64;
        self.counters.tentative = self.tentative as u64;
        self.counters.flows_active = self
            .conns
            .values()
            .filter(|c| c.state.is_forwarding())
            .count() as u64;
        self.metrics.publish(&self.counters, &self.published);
        self.published = self.counters.clone();
    }
}

/// Capacity of the tentative queue: twice the live entries it can hold (see
/// `Loop::add_tentative`).
fn order_capacity(max_tentative: usize) -> usize {
    max_tentative.saturating_mul(2).max(2)
}

fn conn_id(token: usize) -> Option<u32> {
    token
        .checked_sub(FIRST_CONN)
        .and_then(|id| u32::try_from(id).ok())
}

/// Queues one frame for `to` behind `header`, flushing first if the batch is full.
fn forward(
    out: &mut SendBatch,
    udp: &MioUdp,
    counters: &mut TcpSnapshot,
    to: SocketAddr,
    header: &RelayHeader,
    frame: &[u8],
) {
    if out.is_full() {
        flush(out, udp, counters);
    }
    let mut prefix = [0u8; MAX_HEADER_LEN];
    let pushed = header
        .encode(&mut prefix)
        .ok()
        .and_then(|len| out.push(to, &prefix[..len], frame, 0).ok());
    if pushed.is_none() {
        counters.drops[DropReason::SendError.index()] += 1;
    }
}

fn flush(out: &mut SendBatch, udp: &MioUdp, counters: &mut TcpSnapshot) {
    if out.is_empty() {
        return;
    }
    let (packets, bytes) = (&mut counters.packets, &mut counters.bytes);
    let losses = out.flush(udp, |_, len| {
        packets[DIR_TO_TRANSCEIVER] += 1;
        bytes[DIR_TO_TRANSCEIVER] += len as u64;
    });
    counters.drops[DropReason::SendBufferFull.index()] += losses.buffer_full;
    counters.drops[DropReason::SendError.index()] += losses.failed;
}

/// Which connection a datagram on the internal socket is for: it must come from a
/// transceiver network or a peer relay and carry a `ToClient` TCP header.
fn reply_target<'a>(
    routing: &RoutingConfig,
    from: SocketAddr,
    bytes: &'a [u8],
    truncated: bool,
) -> Result<(u32, RelayHeader, &'a [u8]), DropReason> {
    if truncated {
        return Err(DropReason::Truncated);
    }
    if !routing.is_transceiver(from.ip()) && !routing.is_peer_ip(from.ip()) {
        return Err(DropReason::SpoofedReturn);
    }
    match RelayHeader::decode(bytes) {
        Ok((
            header @ RelayHeader {
                direction: Direction::ToClient,
                transport: Transport::Tcp { conn },
                ..
            },
            payload,
        )) => Ok((conn, header, payload)),
        _ => Err(DropReason::BadHeader),
    }
}

/// Writes `payload` to the client behind its length prefix, at once if nothing is waiting,
/// else behind what is (dropping the oldest past the budget).
fn write_frame(
    conn: &mut Conn,
    payload: &[u8],
    counters: &mut TcpSnapshot,
) -> Result<(), CloseReason> {
    if payload.len() > MAX_FRAME {
        // Cannot be framed at all: not the slow reader's fault.
        counters.drops[DropReason::SendError.index()] += 1;
        return Ok(());
    }
    let (sent, result) = conn.queue.send(&mut conn.stream, payload);
    count_sent(counters, sent);
    result.map_err(|e| close_reason(&e))
}

/// Writes as much of the queue as the socket takes.
fn drain_queue(conn: &mut Conn, counters: &mut TcpSnapshot) -> Result<(), CloseReason> {
    let (sent, result) = conn.queue.flush(&mut conn.stream);
    count_sent(counters, sent);
    result.map_err(|e| close_reason(&e))
}

fn count_sent(counters: &mut TcpSnapshot, sent: Sent) {
    counters.bytes[DIR_TO_CLIENT] += sent.bytes as u64;
    counters.packets[DIR_TO_CLIENT] += sent.frames;
    counters.drops[DropReason::WriteQueueFull.index()] += sent.dropped;
}

/// A reset or broken pipe is the client going away; anything else an I/O error.
fn close_reason(e: &io::Error) -> CloseReason {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => CloseReason::ClientClosed,
        _ => CloseReason::IoError,
    }
}
