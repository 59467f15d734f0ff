//! Starting and stopping the relay's threads: the workers, the route cache, the metrics
//! endpoint. Nothing here is on the packet path.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::{Poll, Waker};

use crate::config::{Config, TcpConfig};
use crate::metrics::Metrics;
use crate::route_cache::{self, CacheError, RouteCache, WorkerLink};
use crate::tcp::event_loop::{self as tcp_loop, TcpSetup};
use crate::worker::{self, CacheLink, WorkerSetup, WorkerSockets};

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding or creating a socket, poll or thread failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The route cache configuration is unusable.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> StartError {
    move |source| StartError::Io { what, source }
}

/// A running relay.
pub struct Relay {
    /// Public address every worker listens on.
    pub public_addr: SocketAddr,
    /// Internal address of each worker.
    pub internal_addrs: Vec<SocketAddr>,
    /// Address of the metrics endpoint.
    pub metrics_addr: SocketAddr,
    /// Public TCP address (ICE over TCP), unless turned off.
    pub tcp_addr: Option<SocketAddr>,
    /// Internal address of the TCP thread, unless TCP is off.
    pub tcp_internal_addr: Option<SocketAddr>,
    shutdown: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    workers: Vec<JoinHandle<io::Result<()>>>,
    cache: Option<JoinHandle<()>>,
}

impl Relay {
    /// Binds every socket, then starts the threads.
    pub fn start(cfg: Config) -> Result<Self, StartError> {
        let metrics = Arc::new(Metrics::new());
        let shutdown = Arc::new(AtomicBool::new(false));
        let sockets = worker::bind_sockets(&cfg).map_err(io_err("binding UDP sockets"))?;
        let public_addr = sockets[0]
            .public
            .local_addr()
            .map_err(io_err("reading the public address"))?;
        let internal_addrs = sockets
            .iter()
            .map(|s| s.internal.local_addr())
            .collect::<io::Result<Vec<_>>>()
            .map_err(io_err("reading the internal addresses"))?;
        let tcp_sockets = match &cfg.tcp {
            Some(tcp) => Some(bind_tcp(&cfg, tcp, public_addr)?),
            None => None,
        };
        let (tcp_addr, tcp_internal_addr) = match &tcp_sockets {
            Some((listener, internal)) => (
                Some(
                    listener
                        .local_addr()
                        .map_err(io_err("reading the TCP address"))?,
                ),
                Some(
                    internal
                        .local_addr()
                        .map_err(io_err("reading the TCP internal address"))?,
                ),
            ),
            None => (None, None),
        };
        let listener = TcpListener::bind(cfg.metrics_listen)
            .map_err(io_err("binding the metrics endpoint"))?;
        let metrics_addr = listener
            .local_addr()
            .map_err(io_err("reading the metrics address"))?;

        let mut polls = Vec::with_capacity(cfg.workers);
        let mut wakers = Vec::with_capacity(cfg.workers);
        for _ in 0..cfg.workers {
            let (poll, waker) = worker::poll_with_waker().map_err(io_err("creating a poll"))?;
            polls.push(poll);
            wakers.push(waker);
        }

        let (links, cache) = start_route_cache(&cfg, &wakers, &metrics, &shutdown)?;
        let mut workers = start_workers(&cfg, sockets, polls, links, &metrics, &shutdown)?;
        let metrics_for_http = Arc::clone(&metrics);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || crate::metrics_http::serve(listener, metrics_for_http))
            .map_err(io_err("spawning the metrics endpoint"))?;

        if let (Some((listener, internal)), Some(tcp)) = (tcp_sockets, cfg.tcp.clone()) {
            let (poll, waker) = worker::poll_with_waker().map_err(io_err("creating a poll"))?;
            wakers.push(waker);
            workers.push(spawn_tcp_thread(TcpSetup {
                listener,
                internal,
                poll,
                routing: cfg.routing.clone(),
                tcp,
                metrics: metrics.tcp(),
                publish_every: cfg.metrics_interval,
                shutdown: Arc::clone(&shutdown),
            })?);
        }

        Ok(Self {
            public_addr,
            internal_addrs,
            metrics_addr,
            tcp_addr,
            tcp_internal_addr,
            shutdown,
            wakers,
            workers,
            cache,
        })
    }
}

/// Each worker's link to the route cache, in worker order; `None` without a cache.
type CacheLinks = Vec<Option<CacheLink>>;

/// Links of each worker to the route cache (`None` without `--redis`) and the cache's
/// thread: one request queue shared by the workers, one answer queue each.
fn start_route_cache(
    cfg: &Config,
    wakers: &[Arc<Waker>],
    metrics: &Metrics,
    shutdown: &Arc<AtomicBool>,
) -> Result<(CacheLinks, Option<JoinHandle<()>>), StartError> {
    let mut links: CacheLinks = (0..cfg.workers).map(|_| None).collect();
    let Some(url) = &cfg.redis else {
        return Ok((links, None));
    };
    let (req_tx, req_rx) = crossbeam_channel::bounded(route_cache::REQUEST_QUEUE);
    let mut worker_links = Vec::with_capacity(cfg.workers);
    for (link, waker) in links.iter_mut().zip(wakers) {
        let (ans_tx, ans_rx) = crossbeam_channel::bounded(route_cache::ANSWER_QUEUE);
        *link = Some(CacheLink {
            requests: req_tx.clone(),
            answers: ans_rx,
        });
        worker_links.push(WorkerLink {
            answers: ans_tx,
            waker: Arc::clone(waker),
        });
    }
    let rc = RouteCache::new(
        url.expose(),
        cfg.route_ttl,
        req_rx,
        worker_links,
        metrics.cache(),
        Arc::clone(shutdown),
    )?;
    let cache = std::thread::Builder::new()
        .name("route-cache".into())
        .spawn(move || rc.run())
        .map_err(io_err("spawning the route cache"))?;
    Ok((links, Some(cache)))
}

/// Starts one thread per worker and waits until each is ready to forward.
fn start_workers(
    cfg: &Config,
    sockets: Vec<WorkerSockets>,
    polls: Vec<Poll>,
    links: CacheLinks,
    metrics: &Metrics,
    shutdown: &Arc<AtomicBool>,
) -> Result<Vec<JoinHandle<io::Result<()>>>, StartError> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let mut workers = Vec::with_capacity(cfg.workers);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    for (id, ((sockets, poll), cache)) in sockets.into_iter().zip(polls).zip(links).enumerate() {
        let setup = WorkerSetup {
            id,
            core: (!cores.is_empty()).then(|| cores[id % cores.len()]),
            sockets,
            poll,
            routing: cfg.routing.clone(),
            cache,
            metrics: metrics.worker(id),
            publish_every: cfg.metrics_interval,
            shutdown: Arc::clone(shutdown),
            ready: ready_tx.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("relay-worker-{id}"))
            .spawn(move || {
                let id = setup.id;
                let result = worker::run(setup);
                if let Err(e) = &result {
                    tracing::error!(worker = id, error = %e, "worker stopped");
                }
                result
            })
            .map_err(io_err("spawning a worker"))?;
        workers.push(handle);
    }
    // The workers prefault their flow tables, sized for --max-flows, before they forward
    // (which takes a while, longest in a debug build). The relay counts as started, and its metrics endpoint
    // answers, only once they have: a caller that waits for the endpoint then sees the
    // relay's steady memory, not a table still being touched in. A worker that failed to
    // start drops its sender; the wait then ends and its error surfaces on join.
    drop(ready_tx);
    for _ in 0..cfg.workers {
        if ready_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .is_err()
        {
            break;
        }
    }
    Ok(workers)
}

/// Starts the TCP thread (ICE over TCP).
fn spawn_tcp_thread(setup: TcpSetup) -> Result<JoinHandle<io::Result<()>>, StartError> {
    std::thread::Builder::new()
        .name("relay-tcp".into())
        .spawn(move || {
            let result = tcp_loop::run(setup);
            if let Err(e) = &result {
                tracing::error!(error = %e, "TCP thread stopped");
            }
            result
        })
        .map_err(io_err("spawning the TCP thread"))
}

/// Binds the public TCP listener (default: the UDP public address) and the TCP thread's
/// internal UDP socket.
fn bind_tcp(
    cfg: &Config,
    tcp: &TcpConfig,
    udp_public: SocketAddr,
) -> Result<(TcpListener, std::net::UdpSocket), StartError> {
    let addr = tcp.listen.unwrap_or(udp_public);
    let listener = tcp_listener(addr).map_err(io_err("binding the TCP listener"))?;
    let internal = worker::udp_socket(tcp.internal_listen, false, cfg.socket_buffer_bytes)
        .map_err(io_err("binding the TCP thread's internal socket"))?;
    Ok((listener, internal))
}

/// A non-blocking listener with a deep backlog (a burst of ICE-TCP clients must not be
/// refused by the kernel before the caps see them).
fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        socket.set_only_v6(false)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind TCP {addr}: {e}")))?;
    socket.listen(1024)?;
    Ok(socket.into())
}

impl Relay {
    /// Asks every thread to stop and waits for the workers and the route cache (each worker
    /// publishes its counters one last time). The metrics thread dies with the process.
    pub fn stop(self) {
        self.shutdown.store(true, Ordering::Relaxed);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
        for handle in self.workers {
            let _ = handle.join();
        }
        if let Some(cache) = self.cache {
            let _ = cache.join();
        }
    }
}
