//! A media loop's I/O: one thread, one `mio::Poll`, one UDP socket, the loop's own ICE-TCP
//! listener, and the [`LoopEndpoint`] that holds its sessions and every routing rule.
//!
//! This file only moves bytes and time: it reads a batch from the socket and hands each
//! datagram to the endpoint, which answers through an [`Outbox`] that fills the loop's
//! `sendmmsg` batch (or writes to its TCP connections); it runs the endpoint's timers when they
//! are due and its control-plane commands as they come, and forwards its events. Timers and
//! commands run between socket batches: a wakeup reads at most [`RECV_BATCHES_PER_WAKEUP`]
//! batches ([`ReceiveBudget`]), so a flood cannot starve them. Nothing here blocks: commands
//! arrive on a bounded channel plus a `mio::Waker`, and events leave through `try_send`.
//!
//! ICE over TCP arrives two ways and meets the same endpoint: relay-framed datagrams whose
//! header says TCP (the relay keeps the client's connection; replies echo its connection id),
//! and, in direct mode, the loop's own listener ([`crate::media::tcp_server`]), whose RFC 4571
//! frames the endpoint routes like datagrams once a connection's first frame passed an
//! authenticated check. The endpoint says which frames were checks str0m answered (the only
//! ones that keep a connection) and which connections to close (their session ended, or is
//! past its share); the listener says which open connections closed.

use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use tokio::sync::mpsc;
use voxgate_proto::relay_header::MAX_HEADER_LEN;
use voxgate_udp_batch::{RecvBatch, SendBatch};

use crate::media::arrival::ArrivalClock;
use crate::media::busy_meter::{self, BusyMeter, SharedBusy};
use crate::media::command::{Command, LoopEvent, SessionEnded};
use crate::media::core_share::CoreShare;
use crate::media::endpoint::{EndpointEvent, LoopEndpoint, Outbox, Source};
pub use crate::media::loop_settings::LoopSettings;
use crate::media::read_coalescing::ReadCoalescing;
use crate::media::receive_budget::{Next, ReceiveBudget};
use crate::media::session::EndReason;
use crate::media::tcp_server::{ConnState, Frame, TcpLimits, TcpServer};
use crate::media::thread_priority;
use crate::metrics::{DropReason, LoopCounters, LoopMetrics};

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);
const TCP_LISTENER: Token = Token(2);
/// Direct TCP connection `k` polls under `Token(TCP_CONN_BASE + k)`.
const TCP_CONN_BASE: usize = 3;
/// Larger than any WebRTC datagram; a datagram that fills it was truncated.
const RECV_BUF: usize = 2048;
const COMMAND_QUEUE: usize = 1024;
/// Datagrams per `recvmmsg` / `sendmmsg`.
const BATCH: usize = 32;
/// Most `recvmmsg` batches a wakeup reads before it runs timers and commands (256 datagrams,
/// well under a millisecond of work): under a flood the loop still paces every session's
/// downlink and answers the control plane.
pub const RECV_BATCHES_PER_WAKEUP: u32 = 8;
/// Longest stretch of timer work before the loop reads its socket again (see `run_timers`).
/// A caller's packet that arrives during a long pass (many PCM encodes, a large loop's ticks)
/// waits for at most this long. 100 µs rather than 250 µs shortened the uplink hand-off's tail
/// where passes are long, for no CPU that alternating runs could see: a read that finds the
/// socket empty is one `recvmmsg` (docs/SESSION_COST.md, "No read window by default; reading
/// the socket inside a timer pass every 100 µs").
const TIMER_PASS_SLICE: Duration = Duration::from_micros(100);
/// Batches read between two slices of a timer pass: enough to keep uplink latency low, few
/// enough that a flood cannot stretch the pass.
const RECV_BATCHES_PER_TIMER_SLICE: u32 = 1;
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Longest a loop keeps running after shutdown to flush its sessions' goodbyes.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
#[error("media loop {0} command queue is full")]
pub struct LoopBusy(pub usize);

/// The control plane's handle to one loop.
pub struct LoopHandle {
    pub index: usize,
    pub local_addr: SocketAddr,
    /// The loop's ICE-TCP listener (direct mode), if it has one.
    pub tcp_addr: Option<SocketAddr>,
    tx: SyncSender<Command>,
    waker: Arc<Waker>,
    busy: SharedBusy,
}

impl LoopHandle {
    /// Share of wall time the loop spent working in its last measurement window (0..=1).
    pub fn busy_ratio(&self) -> f64 {
        self.busy.ratio()
    }

    pub fn send(&self, cmd: Command) -> Result<(), LoopBusy> {
        match self.tx.try_send(cmd) {
            Ok(()) => {
                // A failed wake only delays the command to the loop's next wakeup.
                let _ = self.waker.wake();
                Ok(())
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                Err(LoopBusy(self.index))
            }
        }
    }
}

/// What one loop is: its place among the loops, its sockets and its channels.
pub struct LoopSpec {
    pub index: usize,
    pub bind: SocketAddr,
    pub core: Option<core_affinity::CoreId>,
    pub metrics: LoopMetrics,
    pub events: mpsc::Sender<LoopEvent>,
    pub ended: mpsc::UnboundedSender<SessionEnded>,
    /// Where the loop's own ICE-TCP listener binds (`None`: no listener).
    pub tcp_bind: Option<SocketAddr>,
    pub settings: LoopSettings,
}

/// Binds the loop's socket (so errors surface to the caller) and starts its thread.
pub fn spawn(spec: LoopSpec) -> io::Result<(LoopHandle, JoinHandle<()>)> {
    let poll = Poll::new()?;
    let (std_socket, local_addr, tcp) = bind_media(&spec, &poll)?;
    let mut socket = UdpSocket::from_std(std_socket);
    poll.registry()
        .register(&mut socket, SOCKET, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let tcp_addr = tcp.as_ref().map(TcpServer::local_addr);
    let tcp_frame = vec![0; spec.settings.tcp_limits.max_frame];
    let (tx, rx) = std::sync::mpsc::sync_channel(COMMAND_QUEUE);
    let index = spec.index;
    let core = spec.core;
    let events = spec.events;
    let ended = spec.ended;
    let metrics = spec.metrics;
    let settings = spec.settings;
    let busy = SharedBusy::default();
    let loop_busy = busy.clone();
    let thread = std::thread::Builder::new()
        .name(format!("media-loop-{index}"))
        .spawn(move || {
            if let Some(core) = core {
                if !core_affinity::set_for_current(core) {
                    tracing::warn!(loop_index = index, "could not pin media loop to a core");
                }
            }
            let priority = thread_priority::apply_loop_priority(index, settings.priority);
            metrics.set_scheduling(priority.class());
            // Built on its own thread: the batch buffers hold raw pointers (not Send).
            let read_window = settings.read_window;
            let mut media_loop = EventLoop {
                index,
                poll,
                socket,
                commands: rx,
                events,
                ended,
                metrics,
                counters: LoopCounters::default(),
                endpoint: LoopEndpoint::new(index, settings),
                recv_batch: Some(RecvBatch::with_arrival_times(BATCH, RECV_BUF)),
                send_batch: SendBatch::new(BATCH, RECV_BUF + MAX_HEADER_LEN, local_addr.is_ipv6()),
                busy: BusyMeter::new(Instant::now(), loop_busy),
                core_share: CoreShare::new(Instant::now()),
                budget: ReceiveBudget::new(RECV_BATCHES_PER_WAKEUP),
                coalescing: ReadCoalescing::new(read_window),
                tcp,
                tcp_ready: Vec::with_capacity(64),
                tcp_frame,
            };
            tracing::info!(loop_index = index, %local_addr, tcp = ?tcp_addr, "media loop started");
            media_loop.run();
            tracing::info!(loop_index = index, "media loop stopped");
        })?;
    Ok((
        LoopHandle {
            index,
            local_addr,
            tcp_addr,
            tx,
            waker,
            busy,
        },
        thread,
    ))
}

/// Attempts at an ephemeral UDP port whose number is also free for TCP (see [`bind_media`]).
const EPHEMERAL_PAIR_ATTEMPTS: usize = 16;

/// Binds the loop's UDP socket and, when asked, its ICE-TCP listener. `same` on an ephemeral
/// UDP port means the port the UDP socket got, but a port the kernel found free for UDP can be
/// in use for TCP: by another connection, or by one in TIME_WAIT (Linux refuses the bind
/// unless both sockets set SO_REUSEADDR; seen after a test made 10,000 connections). Such a
/// pair is retried on a new ephemeral port; any other failure is returned as it is.
fn bind_media(spec: &LoopSpec, poll: &Poll) -> io::Result<MediaSockets> {
    let bind = spec.bind;
    bind_pair(bind, spec.tcp_bind, spec.settings.tcp_limits, poll, || {
        bind_udp(bind)
    })
}

/// The loop's UDP socket, its address, and its ICE-TCP listener if it has one.
type MediaSockets = (std::net::UdpSocket, SocketAddr, Option<TcpServer>);

/// [`bind_media`], with where each UDP socket comes from as a parameter (a test hands it a
/// socket on a port it holds for TCP).
fn bind_pair(
    bind: SocketAddr,
    tcp_bind: Option<SocketAddr>,
    tcp_limits: TcpLimits,
    poll: &Poll,
    mut next_udp: impl FnMut() -> io::Result<std::net::UdpSocket>,
) -> io::Result<MediaSockets> {
    let ephemeral_pair = bind.port() == 0 && tcp_bind == Some(bind);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let udp = next_udp()?;
        let local_addr = udp.local_addr()?;
        let Some(tcp_addr) = tcp_bind.map(|a| if a == bind { local_addr } else { a }) else {
            return Ok((udp, local_addr, None));
        };
        match TcpServer::bind(
            tcp_addr,
            tcp_limits,
            poll.registry(),
            TCP_LISTENER,
            TCP_CONN_BASE,
        ) {
            Ok(tcp) => return Ok((udp, local_addr, Some(tcp))),
            Err(e)
                if ephemeral_pair
                    && e.kind() == io::ErrorKind::AddrInUse
                    && attempt < EPHEMERAL_PAIR_ATTEMPTS =>
            {
                tracing::debug!(
                    port = local_addr.port(),
                    "ephemeral port taken for TCP; retrying"
                );
            }
            Err(e) => return Err(e),
        }
    }
}

fn bind_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Large kernel buffers absorb bursts while the loop is busy; failure is not fatal.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    // The kernel stamps each datagram's arrival: read coalescing lets datagrams wait in the
    // socket on purpose, and the uplink hand-off is timed from when they arrived, not from
    // when the loop read them. Without stamps it is timed from the read, which hides the wait.
    if let Err(e) = voxgate_udp_batch::stamp_arrivals(&socket) {
        tracing::warn!(%addr, error = %e, "no kernel receive timestamps: uplink hand-off is timed from the read");
    }
    Ok(socket.into())
}

/// The loop thread's state: its sockets, batches and rhythm, and the endpoint it drives.
struct EventLoop {
    index: usize,
    poll: Poll,
    socket: UdpSocket,
    commands: Receiver<Command>,
    events: mpsc::Sender<LoopEvent>,
    ended: mpsc::UnboundedSender<SessionEnded>,
    metrics: LoopMetrics,
    /// What the I/O counts (datagrams and bytes in and out, send errors, wakeups, rests,
    /// truncated datagrams); the endpoint counts its own routing.
    counters: LoopCounters,
    /// The loop's sessions and routing rules.
    endpoint: LoopEndpoint,
    /// Preallocated `recvmmsg` slots (taken while a batch is processed).
    recv_batch: Option<RecvBatch>,
    /// Transmits of the current wakeup, sent with `sendmmsg`.
    send_batch: SendBatch,
    /// Work vs. wait time, read by admission control.
    busy: BusyMeter,
    /// When a saturated loop leaves its core for a moment (see `core_share`).
    core_share: CoreShare,
    /// Batches a read pass may take; remembers a socket left unread.
    budget: ReceiveBudget,
    /// Once per window under steady traffic (see `read_coalescing`).
    coalescing: ReadCoalescing,
    /// The loop's own ICE-TCP listener and connections (direct mode).
    tcp: Option<TcpServer>,
    /// Connections with events this wakeup (reused, never shrinks).
    tcp_ready: Vec<usize>,
    /// The frame being handled, copied out of its connection's buffer.
    tcp_frame: Vec<u8>,
}

/// The endpoint's [`Outbox`] for one step: the loop's send batch (flushed when full) and its
/// TCP connections.
struct Outbound<'a> {
    socket: &'a UdpSocket,
    batch: &'a mut SendBatch,
    tcp: Option<&'a mut TcpServer>,
    counters: &'a mut LoopCounters,
}

impl Outbox for Outbound<'_> {
    fn send_udp(&mut self, to: SocketAddr, header: &[u8], payload: &[u8]) {
        if self.batch.is_full() {
            flush(self.batch, self.socket, self.counters);
        }
        if self.batch.push(to, header, payload, 0).is_err() {
            self.counters.send_errors += 1;
        }
    }

    fn send_tcp(&mut self, conn: u32, peer: SocketAddr, payload: &[u8]) -> bool {
        let sent = self
            .tcp
            .as_mut()
            .is_some_and(|tcp| tcp.send(conn, peer, payload));
        if sent {
            self.counters.datagrams_out += 1;
            self.counters.bytes_out += payload.len() as u64;
        }
        sent
    }
}

/// An [`Outbound`] over the loop's own fields, beside `&mut self.endpoint` (disjoint borrows).
macro_rules! outbound {
    ($loop:expr) => {
        Outbound {
            socket: &$loop.socket,
            batch: &mut $loop.send_batch,
            tcp: $loop.tcp.as_mut(),
            counters: &mut $loop.counters,
        }
    };
}

impl EventLoop {
    fn run(&mut self) {
        let mut events = Events::with_capacity(64);
        let mut shutdown_by: Option<Instant> = None;
        let mut hold: Option<Instant> = None;
        loop {
            let polled = Instant::now();
            // Under steady traffic, sleep out the read window instead of waking per datagram;
            // whatever arrived meanwhile is then read at once (its readiness edge is queued).
            let held = hold.take().is_some_and(|until| self.hold_reads(until));
            // Wake at least once per busy window so an idle loop's ratio falls to zero; at once
            // when the last pass left datagrams in the socket (no new edge announces them).
            let tcp_pending = self.tcp.as_ref().is_some_and(TcpServer::has_pending);
            let timeout = if held || self.budget.pending() || tcp_pending {
                Duration::ZERO
            } else {
                self.next_deadline().map_or(busy_meter::WINDOW, |d| {
                    d.saturating_duration_since(Instant::now())
                        .min(busy_meter::WINDOW)
                })
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(loop_index = self.index, error = %e, "poll failed; loop stops");
                break;
            }
            let woke = Instant::now();
            self.counters.wakeups += 1;
            let readable = events.iter().any(|e| e.token() == SOCKET);
            if readable || self.budget.pending() {
                let received = self.read_socket(RECV_BATCHES_PER_WAKEUP);
                hold = self
                    .coalescing
                    .after_read(woke, received, self.budget.pending());
            } else if held {
                // The window brought no readiness edge, so nothing arrived: the rhythm ends
                // and the loop waits on the socket again (no `recvmmsg` just to hear EAGAIN).
                hold = self.coalescing.after_read(woke, 0, false);
            }
            if self.tcp.is_some() {
                self.serve_tcp(&events);
            }
            if !self.run_commands() && shutdown_by.is_none() {
                // End every session, then keep running briefly so their goodbyes (data
                // channel message, DTLS close_notify) actually go out.
                let mut out = outbound!(self);
                self.endpoint
                    .end_all(Instant::now(), EndReason::Shutdown, &mut out);
                shutdown_by = Some(Instant::now() + SHUTDOWN_GRACE);
            }
            self.run_timers(Instant::now());
            self.flush_sends();
            self.settle_tcp();
            self.forward_events();
            if let Some(ratio) = self.busy.worked(woke, Instant::now()) {
                self.metrics.set_busy(ratio);
            }
            if let Some(tcp) = &mut self.tcp {
                let open = tcp.open_count();
                self.metrics.publish_tcp(&mut tcp.counters, open);
            }
            self.publish();
            if shutdown_by.is_some_and(|t| self.endpoint.is_empty() || Instant::now() >= t) {
                break;
            }
            let passed = Instant::now();
            if let Some(rest) = self.core_share.after_pass(polled, woke, passed) {
                self.counters.rests += 1;
                std::thread::sleep(rest);
                // A rest is the loop being saturated, not idle: admission must see it busy.
                if let Some(ratio) = self.busy.worked(passed, Instant::now()) {
                    self.metrics.set_busy(ratio);
                }
            }
        }
        self.forward_events();
        self.publish();
    }

    /// Adds what the loop and its endpoint counted to the shared metrics.
    fn publish(&mut self) {
        let sessions = self.endpoint.len();
        self.metrics.publish(&mut self.counters, sessions);
        self.metrics.publish(self.endpoint.counters_mut(), sessions);
    }

    /// Hands the endpoint's events to the control plane: ends on their own channel (never
    /// full, unbounded but one per session; it fails only once the control plane is gone at
    /// shutdown, when nobody needs them), the rest with `try_send` (dropped when full).
    fn forward_events(&mut self) {
        while let Some(event) = self.endpoint.poll_event() {
            match event {
                EndpointEvent::Ended(ended) => {
                    let _ = self.ended.send(ended);
                }
                EndpointEvent::Loop(e) => {
                    let _ = self.events.try_send(e);
                }
            }
        }
    }

    /// Closes the TCP connections the endpoint gave up (their session ended, or is past its
    /// share), and tells it which open ones the listener closed.
    fn settle_tcp(&mut self) {
        let Some(tcp) = self.tcp.as_mut() else {
            return;
        };
        let registry = self.poll.registry();
        while let Some((c, reason)) = self.endpoint.poll_tcp_close() {
            tcp.close_conn(registry, c.conn, c.peer, reason);
        }
        for (conn, peer) in tcp.drain_closed() {
            self.endpoint.tcp_closed(conn, peer);
        }
    }

    /// Runs queued commands; returns false on shutdown.
    fn run_commands(&mut self) -> bool {
        while let Ok(cmd) = self.commands.try_recv() {
            let mut out = outbound!(self);
            if !self.endpoint.handle_command(Instant::now(), cmd, &mut out) {
                return false;
            }
        }
        true
    }

    /// Runs every timer due by `due_by`. A pass can be long (each session with downlink audio
    /// encodes a frame on its 20 ms tick), so the socket is read in between every
    /// [`TIMER_PASS_SLICE`]: a caller's packet then waits for at most one slice, not for the
    /// whole pass, before it is decoded and handed to its backend.
    fn run_timers(&mut self, due_by: Instant) {
        let mut now = due_by;
        let mut last_read = Instant::now();
        loop {
            let mut out = outbound!(self);
            if !self.endpoint.handle_next_timeout(now, due_by, &mut out) {
                break;
            }
            let t = Instant::now();
            if t.duration_since(last_read) >= TIMER_PASS_SLICE {
                self.flush_sends();
                self.read_socket(RECV_BATCHES_PER_TIMER_SLICE);
                // Sessions just fed newer instants by their datagrams: never hand a later
                // timer an older one.
                last_read = Instant::now();
                now = last_read;
            }
        }
    }

    /// Reads up to `batches` batches (a system call each) and sends what each batch produced
    /// in one `sendmmsg`. A batch that comes back short emptied the queue: on Linux every
    /// datagram that arrives later raises a new edge, so the loop does not spend a second
    /// `recvmmsg` per wakeup just to hear `EAGAIN` (the relay does the same). A pass that ends
    /// on its budget leaves the rest for the next wakeup, which comes at once.
    /// Returns how many datagrams it read.
    fn read_socket(&mut self, batches: u32) -> usize {
        let Some(mut batch) = self.recv_batch.take() else {
            return 0;
        };
        let mut received = 0;
        self.budget.begin(batches);
        loop {
            match batch.recv(&self.socket) {
                Ok(n) => {
                    received += n;
                    let now = Instant::now();
                    let clock = ArrivalClock::read(now);
                    for r in batch.iter() {
                        self.counters.datagrams_in += 1;
                        self.counters.bytes_in += r.bytes.len() as u64;
                        if r.truncated {
                            self.counters.drop(DropReason::Oversize);
                            continue;
                        }
                        let mut out = outbound!(self);
                        let arrived = clock.arrival(r.arrived);
                        let from = Source::Udp(r.from);
                        self.endpoint
                            .handle_datagram(now, arrived, from, r.bytes, &mut out);
                    }
                    self.flush_sends();
                    let timer_due = self
                        .endpoint
                        .poll_timeout()
                        .is_some_and(|d| d <= Instant::now());
                    if self.budget.after_batch(n, BATCH, timer_due) != Next::ReadAgain {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.budget.would_block();
                    break;
                }
                Err(e) => {
                    // ICMP-induced errors on a shared socket say nothing about other sessions;
                    // each is reported once, so reading on is safe.
                    tracing::debug!(loop_index = self.index, error = %e, "recv error");
                    if self.budget.after_error() != Next::ReadAgain {
                        break;
                    }
                }
            }
        }
        self.recv_batch = Some(batch);
        received
    }

    /// The earliest timer (session or TCP) the loop must wake for.
    fn next_deadline(&self) -> Option<Instant> {
        let tcp_due = self.tcp.as_ref().and_then(TcpServer::next_deadline);
        match (self.endpoint.poll_timeout(), tcp_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleeps until `until` or the next timer, whichever is sooner; returns whether it slept
    /// (then the loop polls without waiting, to pick up what arrived meanwhile).
    fn hold_reads(&mut self, until: Instant) -> bool {
        let until = self.next_deadline().map_or(until, |d| d.min(until));
        let now = Instant::now();
        if until <= now {
            return false;
        }
        self.counters.read_holds += 1;
        std::thread::sleep(until - now);
        true
    }

    /// Sends every queued datagram in one system call (or as few as the kernel allows).
    fn flush_sends(&mut self) {
        flush(&mut self.send_batch, &self.socket, &mut self.counters);
    }

    /// Accepts, reads and writes the loop's own TCP connections for this wakeup's events.
    fn serve_tcp(&mut self, events: &Events) {
        let Some(tcp) = self.tcp.as_mut() else {
            return;
        };
        let now = Instant::now();
        let registry = self.poll.registry();
        let mut ready = std::mem::take(&mut self.tcp_ready);
        ready.clear();
        let mut accept = tcp.has_pending();
        for e in events.iter() {
            if e.token() == TCP_LISTENER {
                accept = true;
            } else if let Some(k) = tcp.conn_of(e.token()) {
                if e.is_writable() {
                    tcp.on_writable(k);
                }
                if e.is_readable() || e.is_read_closed() || e.is_error() {
                    tcp.begin_turn(k);
                    ready.push(k);
                }
            }
        }
        tcp.take_pending(&mut ready);
        if accept {
            tcp.accept(now, registry);
        }
        for &k in &ready {
            self.read_tcp(now, k);
        }
        self.tcp_ready = ready;
        self.flush_sends();
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.maintain(Instant::now(), self.poll.registry());
        }
    }

    /// Handles the frames connection `key` has (up to its turn's budget). A check str0m
    /// answered opens a tentative connection and restarts an open one's idle timer; any
    /// other first frame closes it.
    fn read_tcp(&mut self, now: Instant, key: usize) {
        let mut frame = std::mem::take(&mut self.tcp_frame);
        while let Some(tcp) = self.tcp.as_mut() {
            let Frame::Ready { len } = tcp.next_frame(self.poll.registry(), key, &mut frame) else {
                break;
            };
            let Some((state, peer)) = tcp.state(key) else {
                break;
            };
            self.counters.datagrams_in += 1;
            self.counters.bytes_in += len as u64;
            let conn = key as u32;
            let bytes = &frame[..len];
            let mut out = outbound!(self);
            let answered = match state {
                ConnState::Open => Ok(self
                    .endpoint
                    .handle_tcp_frame(now, peer, conn, bytes, &mut out)),
                ConnState::AwaitingFirstFrame => self
                    .endpoint
                    .handle_first_tcp_frame(now, peer, conn, bytes, &mut out)
                    .map(|()| true),
            };
            let Some(tcp) = self.tcp.as_mut() else {
                break;
            };
            match answered {
                Ok(true) => tcp.answered(key, now),
                Ok(false) => {}
                Err(reason) => {
                    tcp.close(self.poll.registry(), key, reason);
                    break;
                }
            }
        }
        self.tcp_frame = frame;
    }
}

fn flush(batch: &mut SendBatch, socket: &UdpSocket, counters: &mut LoopCounters) {
    if batch.is_empty() {
        return;
    }
    let mut sent = 0u64;
    let mut bytes = 0u64;
    let losses = batch.flush(socket, |_, n| {
        sent += 1;
        bytes += n as u64;
    });
    counters.datagrams_out += sent;
    counters.bytes_out += bytes;
    // A full socket buffer loses datagrams; SRTP and ICE recover, and we count them.
    counters.send_errors += losses.buffer_full + losses.failed;
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY_LOCAL: &str = "127.0.0.1:0";

    /// A UDP socket on a port the test also holds a TCP listener on.
    fn udp_on_a_port_taken_for_tcp() -> (std::net::UdpSocket, std::net::TcpListener) {
        loop {
            let udp = bind_udp(ANY_LOCAL.parse().unwrap()).unwrap();
            // The kernel found this port free for UDP; it may be in use for TCP already, in
            // which case another one is tried.
            if let Ok(tcp) = std::net::TcpListener::bind(udp.local_addr().unwrap()) {
                return (udp, tcp);
            }
        }
    }

    #[test]
    fn an_ephemeral_port_taken_for_tcp_is_given_up_for_a_new_one() {
        let bind: SocketAddr = ANY_LOCAL.parse().unwrap();
        let (taken_udp, _holder) = udp_on_a_port_taken_for_tcp();
        let taken = taken_udp.local_addr().unwrap();
        let poll = Poll::new().unwrap();
        let mut first = Some(taken_udp);
        let mut handed_out = 0;
        let (_udp, addr, tcp) = bind_pair(bind, Some(bind), TcpLimits::default(), &poll, || {
            handed_out += 1;
            first.take().map_or_else(|| bind_udp(bind), Ok)
        })
        .expect("a free pair on a retry");
        assert!(handed_out >= 2, "the taken port was retried");
        assert_ne!(addr.port(), taken.port());
        let tcp = tcp.expect("a listener");
        assert_eq!(
            tcp.local_addr(),
            addr,
            "TCP listens on the UDP socket's port"
        );
    }

    #[test]
    fn a_fixed_port_taken_for_tcp_fails_with_the_os_error() {
        let (udp, _holder) = udp_on_a_port_taken_for_tcp();
        let fixed = udp.local_addr().unwrap();
        drop(udp); // free for UDP, still taken for TCP
        let poll = Poll::new().unwrap();
        let mut tries = 0;
        let err = bind_pair(fixed, Some(fixed), TcpLimits::default(), &poll, || {
            tries += 1;
            bind_udp(fixed)
        })
        .map(|_| ())
        .expect_err("a port the operator chose is not swapped for another");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
        assert_eq!(tries, 1, "no retry");
    }
}
