//! A media loop's own ICE-TCP listener (passive candidates, RFC 6544) and its connections.
//!
//! Direct mode only: behind a relay, TCP clients reach the loop as relay-framed datagrams on
//! its UDP socket. Here the loop accepts connections itself, reads RFC 4571 frames
//! ([`voxgate_proto::rfc4571`]) and writes replies through a bounded per-connection queue.
//! This module only moves bytes and enforces limits; what a frame means (demux by ufrag, then
//! by client) is the loop's job, exactly as for a UDP datagram.
//!
//! Limits, each counted by reason when it closes a connection ([`TcpCloseReason`]): at most
//! `max_conns` connections and `max_conns_per_ip` per client IP (IPv6: per /64), a first frame
//! within `first_frame_timeout` (slow-drip bytes do not extend it), at most `idle_timeout`
//! between frames, frames of at most `max_frame` bytes. A connection is closed with nothing
//! sent; nothing here ever answers on its own.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use slab::Slab;

use voxgate_proto::rfc4571::{FrameDecoder, WriteQueue};

use crate::metrics::{TcpCloseReason, TcpCounters};

/// Limits of a loop's TCP listener.
#[derive(Debug, Clone, Copy)]
pub struct TcpLimits {
    /// Largest RFC 4571 frame accepted; a longer length prefix closes the connection.
    pub max_frame: usize,
    pub first_frame_timeout: Duration,
    pub idle_timeout: Duration,
    /// Connections open at once on this loop.
    pub max_conns: usize,
    /// Connections open at once from one client IP (IPv6: one /64).
    pub max_conns_per_ip: usize,
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
            max_conns_per_ip: 16,
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
    /// Accepted; its first frame must be an authenticated binding request for a live session.
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
    last_frame: Instant,
    /// Reads left before yielding to other connections in this wakeup.
    reads_left: usize,
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
    per_ip: HashMap<IpAddr, usize>,
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
            per_ip: HashMap::new(),
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

    pub fn set_open(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            c.state = ConnState::Open;
        }
    }

    /// Whether work is left over from the last turn (the loop then polls without sleeping).
    pub fn has_pending(&self) -> bool {
        self.accept_pending || !self.pending.is_empty()
    }

    /// When the loop must wake for the next timeout check (only while connections exist).
    pub fn next_deadline(&self) -> Option<Instant> {
        (!self.conns.is_empty()).then_some(self.next_sweep)
    }

    /// Accepts new connections (up to a turn's worth), refusing those over a cap.
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
            let ip = ip_bucket(peer.ip());
            let from_ip = self.per_ip.get(&ip).copied().unwrap_or(0);
            let refused = if self.conns.len() >= self.limits.max_conns {
                Some(TcpCloseReason::GlobalCap)
            } else if from_ip >= self.limits.max_conns_per_ip {
                Some(TcpCloseReason::PerIpCap)
            } else {
                None
            };
            if let Some(reason) = refused {
                self.counters.close(reason);
                continue; // dropping the stream closes it, nothing sent
            }
            let entry = self.conns.vacant_entry();
            let key = entry.key();
            if let Err(e) = registry.register(
                &mut stream,
                Token(self.token_base + key),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                tracing::debug!(error = %e, "tcp register failed");
                self.counters.close(TcpCloseReason::IoError);
                continue;
            }
            let _ = stream.set_nodelay(true);
            // A small kernel buffer keeps a slow reader's backlog in our queue, where the
            // oldest media is dropped, rather than seconds of stale audio in the kernel.
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(KERNEL_SEND_BUFFER);
            entry.insert(Conn {
                stream,
                peer,
                decoder: FrameDecoder::new(self.limits.max_frame),
                queue: WriteQueue::new(self.limits.write_queue_bytes),
                state: ConnState::AwaitingFirstFrame,
                accepted: now,
                last_frame: now,
                reads_left: READS_PER_TURN,
            });
            *self.per_ip.entry(ip).or_insert(0) += 1;
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
    pub fn next_frame(
        &mut self,
        now: Instant,
        registry: &Registry,
        key: usize,
        out: &mut [u8],
    ) -> Frame {
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
                    conn.last_frame = now;
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
                ConnState::Open if now.duration_since(c.last_frame) >= limits.idle_timeout => {
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
        let ip = ip_bucket(c.peer.ip());
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
        self.pending.retain(|k| *k != key);
        self.counters.close(reason);
    }

    pub fn open_count(&self) -> usize {
        self.conns.len()
    }
}

/// The unit per-IP caps count in: an IPv4 address, or an IPv6 /64 (one subscriber).
fn ip_bucket(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut o = v6.octets();
            o[8..].fill(0);
            IpAddr::from(o)
        }
        v4 => v4,
    }
}
