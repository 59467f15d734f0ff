//! One relay worker: a pinned thread running a `mio` loop over two UDP sockets, moving
//! datagrams through its [`FlowTable`] in batches.
//!
//! ```text
//!  public socket (SO_REUSEPORT)                    internal socket (PORT+i)
//!   recvmmsg ─► on_client_datagram ─► Forward ─► sendmmsg ─► transceiver loop / peer relay
//!   sendmmsg ◄─ ToClient ◄─ on_internal_datagram ◄─ recvmmsg ◄─ replies
//! ```
//!
//! Per turn: wait for readiness, a timer, or the waker; move up to [`BATCHES_PER_TURN`]
//! batches from each readable socket; apply route-cache answers; expire flows; queue route
//! writes; publish counters when due. Sockets are edge-triggered, so a socket stays marked
//! readable until a receive comes back short.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use mio::net::UdpSocket as MioUdp;
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, Socket, Type};
use voxgate_proto::MAX_HEADER_LEN;

use crate::batch_io::{RecvBatch, SendBatch, DEFAULT_SLOT};
use crate::config::{Config, RoutingConfig};
use crate::drop_reason::DropReason;
use crate::flow_table::{FlowTable, Verdict};
use crate::metrics::{
    WorkerMetrics, WorkerSnapshot, DIR_TO_CLIENT, DIR_TO_TRANSCEIVER, SOCK_INTERNAL, SOCK_PUBLIC,
};
use crate::route_cache::{CacheRequest, RouteAnswer};

/// Datagrams per `recvmmsg` / `sendmmsg`.
pub const BATCH: usize = 32;
/// Batches read per socket before timers, cache answers and the other socket get a turn.
pub const BATCHES_PER_TURN: usize = 8;

const PUBLIC: Token = Token(0);
const INTERNAL: Token = Token(1);
/// Token of the waker (route cache answers, shutdown).
pub const WAKER: Token = Token(2);

/// A worker's two sockets, bound before its thread starts.
pub struct WorkerSockets {
    /// Bound to `--listen` with SO_REUSEPORT.
    pub public: UdpSocket,
    /// Bound to `--internal-listen` port + worker index.
    pub internal: UdpSocket,
}

/// Binds every worker's sockets. A public port of 0 is resolved by the first worker and
/// shared by the others; an internal port of 0 gives each worker its own ephemeral port.
pub fn bind_sockets(cfg: &Config) -> io::Result<Vec<WorkerSockets>> {
    let mut public_addr = cfg.listen;
    let mut out = Vec::with_capacity(cfg.workers);
    for i in 0..cfg.workers {
        let public = udp_socket(public_addr, true, cfg.socket_buffer_bytes)?;
        public_addr = public.local_addr()?;
        let mut internal_addr = cfg.internal_listen;
        if internal_addr.port() != 0 {
            let port = u16::try_from(usize::from(internal_addr.port()) + i)
                .map_err(|_| io::Error::other("internal port out of range"))?;
            internal_addr.set_port(port);
        }
        let internal = udp_socket(internal_addr, false, cfg.socket_buffer_bytes)?;
        out.push(WorkerSockets { public, internal });
    }
    Ok(out)
}

/// A non-blocking UDP socket bound to `addr` with buffers of `buffer` bytes requested.
pub fn udp_socket(addr: SocketAddr, reuse_port: bool, buffer: usize) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        // Dual stack: IPv4 clients arrive as mapped addresses (batch_io unmaps them).
        socket.set_only_v6(false)?;
    }
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    match crate::batch_io::grow_buffers(&socket, buffer) {
        Ok(granted) => tracing::debug!(%addr, granted, "socket receive buffer"),
        Err(e) => tracing::warn!(%addr, error = %e, "cannot size socket buffers"),
    }
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    Ok(socket.into())
}

/// How a worker reaches the route cache.
pub struct CacheLink {
    /// Shared request queue.
    pub requests: Sender<CacheRequest>,
    /// This worker's answers.
    pub answers: Receiver<RouteAnswer>,
}

/// Everything a worker thread needs; built on the main thread, moved into the worker.
pub struct WorkerSetup {
    /// Worker index (label, and which answers are ours).
    pub id: usize,
    /// Core to pin to, if any.
    pub core: Option<core_affinity::CoreId>,
    /// The sockets.
    pub sockets: WorkerSockets,
    /// The poll instance the waker is registered with.
    pub poll: Poll,
    /// Decision parameters.
    pub routing: RoutingConfig,
    /// Route cache, if configured.
    pub cache: Option<CacheLink>,
    /// Metric handles.
    pub metrics: WorkerMetrics,
    /// Counter publication period.
    pub publish_every: Duration,
    /// Set on shutdown (then the waker fires).
    pub shutdown: Arc<AtomicBool>,
    /// Told once the worker's flow table is resident, just before it starts forwarding.
    pub ready: std::sync::mpsc::Sender<()>,
}

/// Creates a poll instance and its waker for a worker to be built.
pub fn poll_with_waker() -> io::Result<(Poll, Arc<Waker>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    Ok((poll, waker))
}

/// The worker's loop state (lives on its own thread; the batches are `!Send`).
struct Worker {
    id: usize,
    poll: Poll,
    /// Client-facing socket; sends `ToClient`.
    public: Port,
    /// Transceiver-facing socket; sends `Forward`.
    internal: Port,
    table: FlowTable,
    recv: RecvBatch,
    cache: Option<CacheLink>,
    metrics: WorkerMetrics,
    publish_every: Duration,
    shutdown: Arc<AtomicBool>,
    /// Counters the worker itself owns (I/O, worker-level drops).
    io: WorkerSnapshot,
    /// What was published last.
    published: WorkerSnapshot,
}

/// Runs a worker until shutdown. Call on the worker's own thread.
pub fn run(setup: WorkerSetup) -> io::Result<()> {
    if let Some(core) = setup.core {
        if !core_affinity::set_for_current(core) {
            tracing::warn!(worker = setup.id, "could not pin worker to its core");
        }
    }
    let public_v6 = setup.sockets.public.local_addr()?.is_ipv6();
    let internal_v6 = setup.sockets.internal.local_addr()?.is_ipv6();
    let mut public = MioUdp::from_std(setup.sockets.public);
    let mut internal = MioUdp::from_std(setup.sockets.internal);
    let registry = setup.poll.registry();
    registry.register(&mut public, PUBLIC, Interest::READABLE)?;
    registry.register(&mut internal, INTERNAL, Interest::READABLE)?;
    let slot = DEFAULT_SLOT + MAX_HEADER_LEN;
    let mut worker = Worker {
        id: setup.id,
        poll: setup.poll,
        public: Port {
            socket: public,
            out: SendBatch::new(BATCH, slot, public_v6),
            label: SOCK_PUBLIC,
        },
        internal: Port {
            socket: internal,
            out: SendBatch::new(BATCH, slot, internal_v6),
            label: SOCK_INTERNAL,
        },
        table: {
            let mut table = FlowTable::new(setup.routing);
            let bytes = table.prefault(Instant::now());
            tracing::info!(
                flow_table_mib = bytes >> 20,
                "flow table resident (prefaulted)"
            );
            table.set_wall_clock_from(Instant::now(), SystemTime::now());
            table
        },
        recv: RecvBatch::new(BATCH, DEFAULT_SLOT),
        cache: setup.cache,
        metrics: setup.metrics,
        publish_every: setup.publish_every,
        shutdown: setup.shutdown,
        io: WorkerSnapshot::default(),
        published: WorkerSnapshot::default(),
    };
    // The start-up waits for this (see `Runtime::start`); a closed channel means it stopped
    // waiting, which changes nothing here.
    let _ = setup.ready.send(());
    worker.run()
}

#[derive(Clone, Copy)]
enum Side {
    Public,
    Internal,
}

impl Worker {
    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(16);
        let (mut public_ready, mut internal_ready) = (true, true);
        let mut next_publish = Instant::now() + self.publish_every;
        loop {
            let now = Instant::now();
            let timeout = if public_ready || internal_ready {
                Duration::ZERO
            } else {
                let next = self
                    .table
                    .poll_timeout()
                    .map_or(next_publish, |t| t.min(next_publish));
                next.saturating_duration_since(now)
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            for event in events.iter() {
                match event.token() {
                    PUBLIC => public_ready = true,
                    INTERNAL => internal_ready = true,
                    _ => {}
                }
            }
            if self.shutdown.load(Ordering::Relaxed) {
                self.publish();
                return Ok(());
            }
            for _ in 0..BATCHES_PER_TURN {
                if public_ready {
                    public_ready = self.pump(Side::Public);
                }
                if internal_ready {
                    internal_ready = self.pump(Side::Internal);
                }
                if !public_ready && !internal_ready {
                    break;
                }
            }
            let now = Instant::now();
            self.apply_cache_answers(now);
            self.table.handle_timeout(now);
            self.queue_route_writes();
            if now >= next_publish {
                self.publish();
                next_publish = now + self.publish_every;
            }
        }
    }

    /// Receives one batch on `side` and acts on every datagram. Returns whether the socket
    /// may still hold datagrams (the batch came back full).
    fn pump(&mut self, side: Side) -> bool {
        let port = match side {
            Side::Public => &self.public,
            Side::Internal => &self.internal,
        };
        let sock_idx = port.label;
        let n = match self.recv.recv(&port.socket) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) => {
                tracing::warn!(worker = self.id, error = %e, "recvmmsg failed");
                return false;
            }
        };
        self.io.recv_batches[sock_idx] += 1;
        self.io.recv_datagrams[sock_idx] += n as u64;
        let now = Instant::now();
        for dg in self.recv.iter() {
            if dg.truncated {
                self.io.drops[DropReason::Truncated.index()] += 1;
                continue;
            }
            let verdict = match side {
                Side::Public => self.table.on_client_datagram(now, dg.from, dg.bytes),
                Side::Internal => self.table.on_internal_datagram(now, dg.from, dg.bytes),
            };
            match verdict {
                Verdict::Forward { to, header } => {
                    let mut prefix = [0u8; MAX_HEADER_LEN];
                    let prefix_len = match header.map(|h| h.encode(&mut prefix)) {
                        None => 0,
                        Some(Ok(len)) => len,
                        Some(Err(_)) => {
                            self.io.drops[DropReason::SendError.index()] += 1;
                            continue;
                        }
                    };
                    let dir = match side {
                        Side::Public => DIR_TO_TRANSCEIVER,
                        Side::Internal => DIR_TO_CLIENT,
                    };
                    let prefix = &prefix[..prefix_len];
                    self.internal.queue(&mut self.io, to, prefix, dg.bytes, dir);
                }
                Verdict::ToClient { to, payload_at } => {
                    let payload = dg.bytes.get(payload_at..).unwrap_or_default();
                    self.public
                        .queue(&mut self.io, to, &[], payload, DIR_TO_CLIENT);
                }
                Verdict::Lookup(client) => {
                    if let Some(cache) = &self.cache {
                        let request = CacheRequest::Lookup {
                            worker: self.id,
                            client,
                        };
                        if let Err(TrySendError::Full(_)) = cache.requests.try_send(request) {
                            self.io.queue_drops[0] += 1;
                        }
                    }
                }
                Verdict::Drop(_) => {}
            }
        }
        self.internal.flush(&mut self.io);
        self.public.flush(&mut self.io);
        n == BATCH
    }

    fn apply_cache_answers(&mut self, now: Instant) {
        let Some(cache) = &self.cache else { return };
        while let Ok(answer) = cache.answers.try_recv() {
            match answer.route {
                Some(to) => self.table.install_route(now, answer.client, to),
                None => self.table.on_lookup_miss(now, answer.client),
            }
        }
    }

    fn queue_route_writes(&mut self) {
        let Some(cache) = &self.cache else { return };
        for write in self.table.drain_route_writes() {
            if let Err(TrySendError::Full(_)) = cache.requests.try_send(CacheRequest::Write(write))
            {
                self.io.queue_drops[1] += 1;
            }
        }
    }

    fn publish(&mut self) {
        // Off the packet path, every publish period: follows wall clock steps (NTP).
        self.table
            .set_wall_clock_from(Instant::now(), SystemTime::now());
        let mut now = self.io.clone();
        let stats = self.table.stats();
        for (total, table) in now.drops.iter_mut().zip(stats.drops.iter()) {
            *total += table;
        }
        now.flows_active = self.table.flow_count() as u64;
        now.flows_tentative = self.table.tentative_count() as u64;
        now.flows_created = stats.flows_created;
        now.flows_established = stats.flows_established;
        now.flows_evicted = stats.flows_evicted_tentative;
        now.flows_expired = [
            stats.flows_expired_tentative,
            stats.flows_expired_established,
        ];
        now.lookups = stats.lookups_started;
        now.routes_installed = stats.routes_installed;
        now.routes_rejected = stats.routes_rejected;
        now.queue_drops[1] += stats.route_writes_dropped;
        self.metrics.publish(&now, &self.published);
        self.published = now;
    }
}

/// A socket and the batch of datagrams waiting to leave through it.
struct Port {
    socket: MioUdp,
    out: SendBatch,
    /// [`SOCK_PUBLIC`] or [`SOCK_INTERNAL`], for the batch counters.
    label: usize,
}

impl Port {
    /// Queues one datagram (`dir` is its accounting direction), flushing first if the
    /// batch is full.
    fn queue(
        &mut self,
        io: &mut WorkerSnapshot,
        to: SocketAddr,
        prefix: &[u8],
        payload: &[u8],
        dir: usize,
    ) {
        if self.out.is_full() {
            self.flush(io);
        }
        let tag = u8::try_from(dir).unwrap_or(0);
        if self.out.push(to, prefix, payload, tag).is_err() {
            io.drops[DropReason::SendError.index()] += 1;
        }
    }

    /// Sends what is queued; counts what was sent per direction and what was lost.
    fn flush(&mut self, io: &mut WorkerSnapshot) {
        if self.out.is_empty() {
            return;
        }
        io.send_batches[self.label] += 1;
        io.send_datagrams[self.label] += self.out.len() as u64;
        let (packets, bytes) = (&mut io.packets, &mut io.bytes);
        let losses = self.out.flush(&self.socket, |tag, len| {
            let dir = usize::from(tag).min(1);
            packets[dir] += 1;
            bytes[dir] += len as u64;
        });
        io.drops[DropReason::SendBufferFull.index()] += losses.buffer_full;
        io.drops[DropReason::SendError.index()] += losses.failed;
    }
}
