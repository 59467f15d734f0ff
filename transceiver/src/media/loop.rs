//! A media loop: one thread, one `mio::Poll`, one UDP socket, and the sessions it owns.
//!
//! Packet path: `read_socket` → `on_datagram` (demux by ufrag or client address) →
//! `Session::handle_datagram` → `drive` (drain str0m output, send, reschedule). Timers and
//! control-plane commands run between socket batches: a wakeup reads at most
//! [`RECV_BATCHES_PER_WAKEUP`] batches ([`ReceiveBudget`]), so a flood cannot starve them.
//! Nothing here blocks: commands arrive on a bounded channel plus a `mio::Waker`, and events
//! leave through `try_send`.
//!
//! ICE over TCP arrives two ways and meets the same demux: relay-framed datagrams whose header
//! says TCP (the relay keeps the client's connection; replies echo its connection id), and,
//! in direct mode, the loop's own listener ([`crate::media::tcp_server`]), whose RFC 4571
//! frames are handled like datagrams once a connection's first frame passed an authenticated
//! check. str0m sees `Protocol::Tcp` for both.
//!
//! Relay-framed datagrams are accepted only from `--relays` networks. A session's client
//! addresses and their reply paths change only when str0m answers an authenticated check on
//! that path, and an address stays with the session that holds it within its consent window
//! (see [`crate::media::demux`]).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use str0m::change::SdpOffer;
use str0m::net::Transmit;
use tokio::sync::{mpsc, oneshot};
use voxgate_proto::relay_header::{
    is_relay_framed, Direction, RelayHeader, Transport, MAX_HEADER_LEN,
};
use voxgate_proto::stun_username::{looks_like_stun, server_ufrag};

use voxgate_proto::bridge::Uplink;
use voxgate_udp_batch::{RecvBatch, SendBatch};

use crate::media::arrival::ArrivalClock;
use crate::media::audio_bridge::{BridgeError, CoarseTicks, OwnerEndpoints, StartedTalking};
use crate::media::busy_meter::{self, BusyMeter, SharedBusy};
use crate::media::core_share::CoreShare;
use crate::media::demux::{Claim, Demux, SessionKey};
use crate::media::read_coalescing::ReadCoalescing;
use crate::media::receive_budget::{Next, ReceiveBudget};
use crate::media::session::{
    is_binding_success, ClientPath, EndReason, OwnerLoss, Route, Session, SessionError, SessionId,
    SessionSnapshot,
};
use crate::media::tcp_server::{ConnState, Frame, TcpLimits, TcpServer};
use crate::media::thread_priority::{self, LoopPriority};
use crate::media::timers::Timers;
use crate::metrics::{DropReason, LoopCounters, LoopMetrics, TcpCloseReason};

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
/// At 250 µs the uplink hand-off p99 was 0.89-1.08 ms at 100 PCM sessions and 0.61-3.49 ms at
/// 500 passthrough sessions; at 100 µs 0.73-0.88 ms (one run 1.39) and 0.48-0.49 ms, for no
/// measurable CPU (alternating runs, docs/SESSION_COST.md "No read window by default;
/// reading the socket inside a timer pass"). A read that finds the socket empty costs one
/// `recvmmsg`, about 2 µs.
const TIMER_PASS_SLICE: Duration = Duration::from_micros(100);
/// Batches read between two slices of a timer pass: enough to keep uplink latency low, few
/// enough that a flood cannot stretch the pass.
const RECV_BATCHES_PER_TIMER_SLICE: u32 = 1;
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Longest a loop keeps running after shutdown to flush its sessions' goodbyes.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Work the control plane hands to a loop.
pub enum Command {
    Insert {
        session: Box<Session>,
        reply: oneshot::Sender<()>,
    },
    Delete {
        id: SessionId,
        reply: oneshot::Sender<bool>,
    },
    Snapshot {
        id: SessionId,
        reply: oneshot::Sender<Option<SessionSnapshot>>,
    },
    IceRestart {
        id: SessionId,
        offer: Box<SdpOffer>,
        ufrag: String,
        pass: String,
        reply: oneshot::Sender<Option<Result<String, SessionError>>>,
    },
    /// Make a backend stream the session's owner.
    Attach {
        id: SessionId,
        endpoints: OwnerEndpoints,
        reply: oneshot::Sender<Result<(), AttachError>>,
    },
    /// Add a listen-only subscriber to the session's uplink.
    Tap {
        id: SessionId,
        tap: tokio::sync::mpsc::Sender<Uplink>,
        reply: oneshot::Sender<Result<(), AttachError>>,
    },
    /// End a session (e.g. no backend would take it).
    End {
        id: SessionId,
        reason: EndReason,
    },
    Shutdown,
}

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no such session")]
    NotFound,
    #[error("session already has {0} taps (--max-taps)")]
    TooManyTaps(usize),
    #[error("{0}")]
    Bridge(#[from] BridgeError),
}

/// What a loop tells the control plane (bounded channel, `try_send`: may be dropped).
#[derive(Debug, Clone, Copy)]
pub enum LoopEvent {
    /// The owning backend's stream ended while the session lives on, or (`stalled`) it left
    /// its uplink queue full past `--backend-stall-secs` and was dropped.
    /// `owner` is the lost attachment's `owner_id`.
    OwnerLost {
        id: SessionId,
        owner: u64,
        stalled: bool,
    },
    /// A PCM owner's backend played its first frame (admission counts the encoder from now).
    StartedTalking {
        id: SessionId,
        talking: StartedTalking,
    },
}

/// A session ended. Sent on a channel of its own that is never full, since a lost end would
/// leak the session's admission slot. Each session ends once, so the queue is bounded by the
/// sessions the loops hold.
#[derive(Debug, Clone, Copy)]
pub struct SessionEnded {
    pub id: SessionId,
    pub reason: EndReason,
}

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

/// How every loop of the process behaves (the media flags; the same for all loops).
#[derive(Debug, Clone)]
pub struct LoopSettings {
    /// Scheduling priority for the loop's thread (`--loop-priority`).
    pub priority: LoopPriority,
    /// Networks allowed to send relay-framed datagrams (`--relays`); empty: none.
    pub relays: Vec<ipnet::IpNet>,
    /// Most taps a session may have (`--max-taps`).
    pub max_taps: usize,
    /// Which passthrough owners tick on coarse grids (`--coarse-ticks-up-to`,
    /// `--coarse-tick-grids`; see `audio_bridge::tick_grid`).
    pub coarse_ticks: CoarseTicks,
    /// Limits of the loop's own ICE-TCP listener.
    pub tcp_limits: TcpLimits,
    /// Under steady traffic, read the socket at most once per this window (`--read-window-us`;
    /// zero: read every datagram as it wakes the loop). See `read_coalescing`.
    pub read_window: Duration,
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
    let LoopSettings {
        priority,
        relays,
        max_taps,
        coarse_ticks,
        tcp_limits: _,
        read_window,
    } = spec.settings;
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
            metrics.set_priority(thread_priority::apply_loop_priority(index, priority));
            // Built on its own thread: the batch buffers hold raw pointers (not Send).
            let mut media_loop = MediaLoop {
                index,
                poll,
                socket,
                commands: rx,
                events,
                ended,
                metrics,
                counters: LoopCounters::default(),
                sessions: Slab::new(),
                ids: HashMap::new(),
                demux: Demux::default(),
                timers: Timers::default(),
                recv_batch: Some(RecvBatch::with_arrival_times(BATCH, RECV_BUF)),
                send_batch: SendBatch::new(BATCH, RECV_BUF + MAX_HEADER_LEN, local_addr.is_ipv6()),
                busy: BusyMeter::new(Instant::now(), loop_busy),
                core_share: CoreShare::new(Instant::now()),
                budget: ReceiveBudget::new(RECV_BATCHES_PER_WAKEUP),
                coalescing: ReadCoalescing::new(read_window),
                relays,
                max_taps,
                coarse_ticks,
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

struct MediaLoop {
    index: usize,
    poll: Poll,
    socket: UdpSocket,
    commands: Receiver<Command>,
    events: mpsc::Sender<LoopEvent>,
    ended: mpsc::UnboundedSender<SessionEnded>,
    metrics: LoopMetrics,
    counters: LoopCounters,
    sessions: Slab<Session>,
    ids: HashMap<SessionId, SessionKey>,
    demux: Demux,
    timers: Timers,
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
    relays: Vec<ipnet::IpNet>,
    max_taps: usize,
    coarse_ticks: CoarseTicks,
    /// The loop's own ICE-TCP listener and connections (direct mode).
    tcp: Option<TcpServer>,
    /// Connections with events this wakeup (reused, never shrinks).
    tcp_ready: Vec<usize>,
    /// The frame being handled, copied out of its connection's buffer.
    tcp_frame: Vec<u8>,
}

impl MediaLoop {
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
                self.end_all(EndReason::Shutdown);
                shutdown_by = Some(Instant::now() + SHUTDOWN_GRACE);
            }
            self.run_timers(Instant::now());
            self.flush_sends();
            if let Some(ratio) = self.busy.worked(woke, Instant::now()) {
                self.metrics.set_busy(ratio);
            }
            if let Some(tcp) = &mut self.tcp {
                let open = tcp.open_count();
                self.metrics.publish_tcp(&mut tcp.counters, open);
            }
            self.metrics
                .publish(&mut self.counters, self.sessions.len());
            if shutdown_by.is_some_and(|t| self.sessions.is_empty() || Instant::now() >= t) {
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
        self.metrics
            .publish(&mut self.counters, self.sessions.len());
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
                        self.on_datagram(now, clock.arrival(r.arrived), r.from, r.bytes);
                    }
                    self.flush_sends();
                    let timer_due = self
                        .timers
                        .next_deadline()
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
        match (self.timers.next_deadline(), tcp_due) {
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

    /// `arrived`: when the kernel queued the datagram (at or before `now`, the read).
    fn on_datagram(&mut self, now: Instant, arrived: Instant, from: SocketAddr, bytes: &[u8]) {
        // Relay-framed: the header carries the real client address; replies go back through
        // the relay that sent it. Otherwise the client talks to us directly.
        let (path, bytes) = if is_relay_framed(bytes) {
            // Anyone can put a relay header on a datagram: only the relays' claims count.
            let ip = from.ip().to_canonical();
            if !self.relays.iter().any(|net| net.contains(&ip)) {
                self.counters.drop(DropReason::RelayNotAllowed);
                return;
            }
            match RelayHeader::decode(bytes) {
                Ok((h, payload)) if h.direction == Direction::ToTransceiver => (
                    ClientPath {
                        addr: h.client,
                        via: Some(from),
                        transport: h.transport,
                    },
                    payload,
                ),
                _ => {
                    self.counters.drop(DropReason::BadRelayHeader);
                    return;
                }
            }
        } else {
            (ClientPath::direct_udp(from), bytes)
        };
        self.on_payload(now, arrived, path, bytes);
    }

    /// Routes one client datagram (or TCP frame) arriving on `path` to its session: a binding
    /// request by its server ufrag, anything else by the authenticated client.
    fn on_payload(&mut self, now: Instant, arrived: Instant, path: ClientPath, bytes: &[u8]) {
        let source = path.peer();
        if looks_like_stun(bytes) {
            match server_ufrag(bytes) {
                Ok(ufrag) => match self.demux.by_ufrag(ufrag) {
                    Some(key) => {
                        self.deliver(now, arrived, key, path, bytes, true);
                    }
                    None => self.counters.drop(DropReason::StunUnknownUfrag),
                },
                // Not a binding request with a USERNAME: only an authenticated peer may
                // send other STUN (e.g. indications) to its session.
                Err(_) => match self.demux.by_addr(&source) {
                    Some(key) => {
                        self.deliver(now, arrived, key, path, bytes, false);
                    }
                    None => self.counters.drop(DropReason::StunMalformed),
                },
            }
            return;
        }
        match self.demux.by_addr(&source) {
            Some(key) => {
                self.deliver(now, arrived, key, path, bytes, false);
            }
            None => self.counters.drop(DropReason::UnknownSource),
        }
    }

    /// Hands a datagram to session `key`; returns whether it was a check str0m answered.
    fn deliver(
        &mut self,
        now: Instant,
        arrived: Instant,
        key: SessionKey,
        path: ClientPath,
        bytes: &[u8],
        binding_request: bool,
    ) -> bool {
        let Some(session) = self.sessions.get_mut(key) else {
            return false;
        };
        if !session.handle_datagram(now, arrived, path, bytes, binding_request) {
            self.counters.drop(DropReason::Rejected);
        }
        let probe = binding_request.then_some(path);
        let answered = self.drive(now, key, probe);
        if answered {
            // str0m answered the check with a success response: the request carried valid
            // MESSAGE-INTEGRITY for this session, so its path may now route to it.
            self.authenticate_path(now, key, path);
        }
        answered
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

    /// Handles the frames connection `key` has (up to its turn's budget).
    fn read_tcp(&mut self, now: Instant, key: usize) {
        let mut frame = std::mem::take(&mut self.tcp_frame);
        while let Some(tcp) = self.tcp.as_mut() {
            let Frame::Ready { len } = tcp.next_frame(now, self.poll.registry(), key, &mut frame)
            else {
                break;
            };
            let Some((state, peer)) = tcp.state(key) else {
                break;
            };
            let path = ClientPath {
                addr: peer,
                via: None,
                transport: Transport::Tcp { conn: key as u32 },
            };
            self.counters.datagrams_in += 1;
            self.counters.bytes_in += len as u64;
            match state {
                // A TCP frame's arrival is its read: the stream's bytes carry no stamps.
                ConnState::Open => self.on_payload(now, now, path, &frame[..len]),
                ConnState::AwaitingFirstFrame => {
                    if let Err(reason) = self.on_first_tcp_frame(now, path, &frame[..len]) {
                        if let Some(tcp) = self.tcp.as_mut() {
                            tcp.close(self.poll.registry(), key, reason);
                        }
                        break;
                    }
                }
            }
        }
        self.tcp_frame = frame;
    }

    /// A connection's first frame must be a binding request that str0m answers for a session
    /// of this loop; otherwise the connection is closed with nothing sent (no amplification, no
    /// state for strangers).
    fn on_first_tcp_frame(
        &mut self,
        now: Instant,
        path: ClientPath,
        bytes: &[u8],
    ) -> Result<(), TcpCloseReason> {
        let ufrag = looks_like_stun(bytes)
            .then(|| server_ufrag(bytes).ok())
            .flatten()
            .ok_or(TcpCloseReason::Garbage)?;
        let key = self
            .demux
            .by_ufrag(ufrag)
            .ok_or(TcpCloseReason::UnknownUfrag)?;
        if !self.deliver(now, now, key, path, bytes, true) {
            return Err(TcpCloseReason::Unauthenticated);
        }
        if let (Some(tcp), Transport::Tcp { conn }) = (self.tcp.as_mut(), path.transport) {
            tcp.set_open(conn as usize);
        }
        Ok(())
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

    /// Drains a session's output, sends its transmits, reschedules its timer, and removes it
    /// once ended. Returns whether str0m answered the check that arrived on `probe` with a
    /// success response that went out. The answer is withheld (and counted) when another
    /// session holds the check's address within its consent window.
    fn drive(&mut self, now: Instant, key: SessionKey, probe: Option<ClientPath>) -> bool {
        let held = probe
            .is_some_and(|p| matches!(self.demux.may_claim(now, &p.peer(), key), Claim::Held(_)));
        let Some(session) = self.sessions.get_mut(key) else {
            return false;
        };
        let mut out = Outbound {
            socket: &self.socket,
            batch: &mut self.send_batch,
            tcp: self.tcp.as_mut(),
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
            out.send(counters, t, route);
        });
        let deltas = session.take_bridge_deltas();
        self.counters.bridge.add(&deltas);
        let handoff = session.bridge_mut().take_handoff();
        self.counters.handoff.add(&handoff);
        if let Some(talking) = session.bridge_mut().take_started_talking() {
            let _ = self.events.try_send(LoopEvent::StartedTalking {
                id: session.id,
                talking,
            });
        }
        if let Some((how, owner)) = session.owner_lost.take() {
            let _ = self.events.try_send(LoopEvent::OwnerLost {
                id: session.id,
                owner,
                stalled: how == OwnerLoss::Stalled,
            });
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

    fn remove(&mut self, key: SessionKey) {
        let session = self.sessions.remove(key);
        self.demux.remove_ufrag(session.ufrag());
        for peer in session.client_peers() {
            self.demux.remove_addr(peer, key);
        }
        self.ids.remove(&session.id);
        let reason = session.end_reason().unwrap_or(EndReason::RtcError);
        // Unbounded but one per session; fails only once the control plane is gone
        // (shutdown), when nobody needs the event.
        let _ = self.ended.send(SessionEnded {
            id: session.id,
            reason,
        });
    }

    /// Runs every timer due by `due_by`. A pass can be long (each session with downlink audio
    /// encodes a frame on its 20 ms tick, ~0.1 ms apiece), so the socket is read in between
    /// every [`TIMER_PASS_SLICE`]: a caller's packet then waits for at most one slice, not for
    /// the whole pass, before it is decoded and handed to its backend.
    fn run_timers(&mut self, due_by: Instant) {
        let mut now = due_by;
        let mut last_read = Instant::now();
        while let Some(entry) = self.timers.pop_due(due_by) {
            let Some(session) = self.sessions.get_mut(entry.key) else {
                continue;
            };
            if session.serial != entry.serial || session.scheduled != Some(entry.at) {
                continue; // stale: superseded by an earlier deadline, or a reused key
            }
            session.scheduled = None;
            session.handle_timeout(now);
            self.drive(now, entry.key, None);
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

    /// Runs queued commands; returns false on shutdown.
    fn run_commands(&mut self) -> bool {
        while let Ok(cmd) = self.commands.try_recv() {
            let now = Instant::now();
            match cmd {
                Command::Insert { session, reply } => {
                    let id = session.id;
                    let ufrag = session.ufrag().to_string();
                    let key = self.sessions.insert(*session);
                    self.demux.insert_ufrag(&ufrag, key);
                    self.ids.insert(id, key);
                    self.drive(now, key, None);
                    let _ = reply.send(());
                }
                Command::Delete { id, reply } => {
                    let found = self.end_session(now, id, EndReason::Deleted);
                    let _ = reply.send(found);
                }
                Command::Snapshot { id, reply } => {
                    let snap = self
                        .ids
                        .get(&id)
                        .and_then(|k| self.sessions.get(*k))
                        .map(|s| s.snapshot(now, self.index));
                    let _ = reply.send(snap);
                }
                Command::IceRestart {
                    id,
                    offer,
                    ufrag,
                    pass,
                    reply,
                } => {
                    let result = self.ice_restart(now, id, *offer, ufrag, pass);
                    let _ = reply.send(result);
                }
                Command::Attach {
                    id,
                    endpoints,
                    reply,
                } => {
                    let result = self.attach(now, id, endpoints);
                    let _ = reply.send(result);
                }
                Command::Tap { id, tap, reply } => {
                    let result = match self.ids.get(&id).and_then(|k| self.sessions.get_mut(*k)) {
                        Some(s) => {
                            let bridge = s.bridge_mut();
                            if bridge.live_tap_count() >= self.max_taps {
                                self.counters.taps_refused += 1;
                                Err(AttachError::TooManyTaps(self.max_taps))
                            } else {
                                bridge.add_tap(tap).map_err(AttachError::from)
                            }
                        }
                        None => Err(AttachError::NotFound),
                    };
                    let _ = reply.send(result);
                }
                Command::End { id, reason } => {
                    self.end_session(now, id, reason);
                }
                Command::Shutdown => return false,
            }
        }
        true
    }

    fn attach(
        &mut self,
        now: Instant,
        id: SessionId,
        endpoints: OwnerEndpoints,
    ) -> Result<(), AttachError> {
        let key = *self.ids.get(&id).ok_or(AttachError::NotFound)?;
        let loop_sessions = self.sessions.len();
        let coarse_ticks = self.coarse_ticks;
        let session = self.sessions.get_mut(key).ok_or(AttachError::NotFound)?;
        // The dispatcher decides ownership and has approved this attach (it refuses a second
        // owner of a session it counts as owned). An owner still here is one it already gave
        // up on (its worker vanished, or it stalled) whose streams have not closed yet, e.g. a
        // frozen backend's other connections awaiting their keepalive timeout: replace it.
        if session.bridge_mut().has_live_owner() {
            tracing::info!(session = %id, "replacing an owner the dispatcher gave up on");
            session
                .bridge_mut()
                .detach_owner(crate::media::audio_bridge::CloseReason::Replaced);
        }
        let metadata = session.metadata().clone();
        let bridge = session.bridge_mut();
        bridge.choose_tick_grid(endpoints.mode, loop_sessions, coarse_ticks);
        bridge.attach_owner(endpoints, now, &metadata)?;
        // The bridge may now have a tick: reschedule.
        self.drive(now, key, None);
        Ok(())
    }

    fn end_session(&mut self, now: Instant, id: SessionId, reason: EndReason) -> bool {
        let Some(&key) = self.ids.get(&id) else {
            return false;
        };
        if let Some(s) = self.sessions.get_mut(key) {
            s.end(reason);
        }
        self.drive(now, key, None);
        true
    }

    fn ice_restart(
        &mut self,
        now: Instant,
        id: SessionId,
        offer: SdpOffer,
        ufrag: String,
        pass: String,
    ) -> Option<Result<String, SessionError>> {
        let key = *self.ids.get(&id)?;
        let session = self.sessions.get_mut(key)?;
        let old = session.ufrag().to_string();
        let result = session.ice_restart(offer, ufrag, pass);
        if result.is_ok() {
            let new = session.ufrag().to_string();
            self.demux.remove_ufrag(&old);
            self.demux.insert_ufrag(&new, key);
            tracing::info!(session = %id, "ICE restart accepted");
        }
        self.drive(now, key, None);
        Some(result)
    }

    fn end_all(&mut self, reason: EndReason) {
        let now = Instant::now();
        let ids: Vec<SessionId> = self.sessions.iter().map(|(_, s)| s.id).collect();
        for id in ids {
            self.end_session(now, id, reason);
        }
    }
}

/// Where a loop's transmits go: its UDP socket (through the send batch) and its own TCP
/// connections.
struct Outbound<'a> {
    socket: &'a UdpSocket,
    batch: &'a mut SendBatch,
    tcp: Option<&'a mut TcpServer>,
}

impl Outbound<'_> {
    /// Sends a transmit: directly to the client (UDP datagram, or a frame on the loop's TCP
    /// connection), or framed (relay header with the client address and the transport it came
    /// on) to the relay that carried the client's traffic. A full batch is flushed first.
    fn send(&mut self, counters: &mut LoopCounters, t: &Transmit, route: Route) {
        let mut header = [0u8; MAX_HEADER_LEN];
        let (to, prefix) = match route {
            Route::Unrouted => {
                counters.unrouted += 1;
                return;
            }
            Route::Direct(Transport::Udp) => (t.destination, &header[..0]),
            Route::Direct(Transport::Tcp { conn }) => {
                let sent = self
                    .tcp
                    .as_mut()
                    .is_some_and(|tcp| tcp.send(conn, t.destination, &t.contents));
                if sent {
                    counters.datagrams_out += 1;
                    counters.bytes_out += t.contents.len() as u64;
                } else {
                    // The connection closed since the check that authenticated it.
                    counters.unrouted += 1;
                }
                return;
            }
            Route::Via(relay, transport) => {
                let h = RelayHeader {
                    direction: Direction::ToClient,
                    client: t.destination,
                    transport,
                };
                match h.encode(&mut header) {
                    Ok(n) => (relay, &header[..n]),
                    Err(_) => {
                        counters.send_errors += 1;
                        return;
                    }
                }
            }
        };
        if self.batch.is_full() {
            flush(self.batch, self.socket, counters);
        }
        if self.batch.push(to, prefix, &t.contents, 0).is_err() {
            counters.send_errors += 1;
        }
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
