//! The Redis route cache: one background thread owns the Redis connection; workers reach it
//! only through bounded channels with `try_send`, so Redis being down or slow costs lookups
//! and counted drops, never a stalled packet path.
//!
//! * **Writes.** When a flow is established (its first reply passed the return path), and
//!   again every TTL/2 while it carries traffic, the worker queues `client → next hop`; the
//!   thread runs `SET voxgate:route:{client} {next hop} EX {ttl}`.
//! * **Lookups.** An unknown client sending non-STUN (a relay restart, or a flow landing on
//!   another relay) makes the worker queue a lookup; the thread runs `GET` and sends the
//!   answer to that worker's channel, then wakes its poll loop. The worker restores the flow
//!   with [`FlowTable::install_route`](crate::flow_table::FlowTable::install_route).
//!
//! Requests are pipelined: whatever is queued (up to [`MAX_PIPELINE`]) goes out in one round
//! trip. On any error the connection is dropped, pending lookups are answered "no route"
//! (the client falls back to its next STUN consent check), and reconnection is retried with
//! exponential backoff. Errors are counted, and logged at most every [`LOG_EVERY`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use mio::Waker;

use crate::flow_table::RouteWrite;
use crate::metrics::CacheMetrics;

/// Requests queued per round trip at most.
pub const MAX_PIPELINE: usize = 256;
/// Connect, read and write timeout of the Redis connection.
pub const IO_TIMEOUT: Duration = Duration::from_millis(500);
/// First reconnection delay; doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest reconnection delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// At most one error log line per this period (the rest are counted in the next line).
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Capacity of the shared worker → cache queue.
pub const REQUEST_QUEUE: usize = 8192;
/// Capacity of each cache → worker answer queue.
pub const ANSWER_QUEUE: usize = 1024;

/// The Redis key of a client's route.
pub fn route_key(client: SocketAddr) -> String {
    format!("voxgate:route:{client}")
}

/// What a worker asks of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheRequest {
    /// Remember this route.
    Write(RouteWrite),
    /// Where does `client`'s flow go? Answer to worker `worker`.
    Lookup {
        /// Worker index.
        worker: usize,
        /// The client.
        client: SocketAddr,
    },
}

/// The cache's answer to a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteAnswer {
    /// The client asked about.
    pub client: SocketAddr,
    /// Its next hop, or `None` (no route, unparsable value, or Redis unavailable).
    pub route: Option<SocketAddr>,
}

/// How the cache reaches one worker.
pub struct WorkerLink {
    /// The worker's answer queue.
    pub answers: Sender<RouteAnswer>,
    /// Wakes the worker's poll loop.
    pub waker: Arc<Waker>,
}

/// Why the cache could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The URL does not parse (not echoed: it may hold a password).
    #[error("invalid --redis URL: {0}")]
    BadUrl(String),
}

/// The route cache thread's state.
pub struct RouteCache {
    client: redis::Client,
    ttl_secs: u64,
    requests: Receiver<CacheRequest>,
    workers: Vec<WorkerLink>,
    metrics: CacheMetrics,
    shutdown: Arc<AtomicBool>,
    conn: Option<redis::Connection>,
    backoff: Duration,
    retry_at: Instant,
    log: LogLimiter,
}

impl RouteCache {
    /// Validates the URL; nothing connects until [`run`](Self::run).
    pub fn new(
        url: &str,
        ttl: Duration,
        requests: Receiver<CacheRequest>,
        workers: Vec<WorkerLink>,
        metrics: CacheMetrics,
        shutdown: Arc<AtomicBool>,
    ) -> Result<Self, CacheError> {
        let client = redis::Client::open(url).map_err(|e| {
            // Redis' own message can quote the URL; keep only its category.
            CacheError::BadUrl(format!("{:?}", e.kind()))
        })?;
        Ok(Self {
            client,
            ttl_secs: ttl.as_secs().max(1),
            requests,
            workers,
            metrics,
            shutdown,
            conn: None,
            backoff: MIN_BACKOFF,
            retry_at: Instant::now(),
            log: LogLimiter::default(),
        })
    }

    /// Serves requests until every worker is gone or shutdown is flagged.
    pub fn run(mut self) {
        let mut batch = Vec::with_capacity(MAX_PIPELINE);
        let mut woken = vec![false; self.workers.len()];
        self.ensure_connected();
        loop {
            match self.requests.recv_timeout(Duration::from_millis(200)) {
                Ok(r) => batch.push(r),
                Err(RecvTimeoutError::Timeout) => {
                    if self.shutdown.load(Ordering::Relaxed) {
                        return;
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while batch.len() < MAX_PIPELINE {
                match self.requests.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            let answers = self.execute(&batch);
            let mut lookups = batch.iter().filter_map(|r| match r {
                CacheRequest::Lookup { worker, client } => Some((*worker, *client)),
                CacheRequest::Write(_) => None,
            });
            let mut answers = answers.into_iter();
            for (worker, client) in lookups.by_ref() {
                let route = answers.next().flatten();
                if route.is_some() {
                    self.metrics.hits.inc();
                } else {
                    self.metrics.misses.inc();
                }
                let Some(link) = self.workers.get(worker) else {
                    continue;
                };
                match link.answers.try_send(RouteAnswer { client, route }) {
                    Ok(()) => woken[worker] = true,
                    Err(TrySendError::Full(_)) => {
                        self.metrics.answer_drops.inc();
                    }
                    Err(TrySendError::Disconnected(_)) => {}
                }
            }
            for (i, flag) in woken.iter_mut().enumerate() {
                if std::mem::take(flag) {
                    if let Err(e) = self.workers[i].waker.wake() {
                        tracing::warn!(worker = i, error = %e, "cannot wake worker");
                    }
                }
            }
            batch.clear();
        }
    }

    /// Runs `batch` as one pipeline; returns one entry per lookup, in order (`None` for a
    /// miss, a bad value, or an error).
    fn execute(&mut self, batch: &[CacheRequest]) -> Vec<Option<SocketAddr>> {
        let lookups = batch
            .iter()
            .filter(|r| matches!(r, CacheRequest::Lookup { .. }))
            .count();
        let misses = vec![None; lookups];
        if !self.ensure_connected() {
            return misses;
        }
        let mut pipe = redis::pipe();
        let mut writes = 0u64;
        for request in batch {
            match request {
                CacheRequest::Write(w) => {
                    writes += 1;
                    pipe.cmd("SET")
                        .arg(route_key(w.client))
                        .arg(w.to.to_string())
                        .arg("EX")
                        .arg(self.ttl_secs)
                        .ignore();
                }
                CacheRequest::Lookup { client, .. } => {
                    pipe.cmd("GET").arg(route_key(*client));
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return misses;
        };
        let result: redis::RedisResult<Vec<Option<String>>> = if lookups == 0 {
            pipe.query::<()>(conn).map(|()| Vec::new())
        } else {
            pipe.query(conn)
        };
        match result {
            Ok(values) => {
                self.metrics.writes.inc_by(writes);
                values
                    .into_iter()
                    .map(|v| v.and_then(|s| s.parse::<SocketAddr>().ok()))
                    .collect()
            }
            Err(e) => {
                self.fail("redis command failed", &e);
                misses
            }
        }
    }

    /// Connects if disconnected and the backoff allows; returns whether connected.
    fn ensure_connected(&mut self) -> bool {
        if self.conn.is_some() {
            return true;
        }
        let now = Instant::now();
        if now < self.retry_at {
            return false;
        }
        let connected = self
            .client
            .get_connection_with_timeout(IO_TIMEOUT)
            .and_then(|c| {
                c.set_read_timeout(Some(IO_TIMEOUT))?;
                c.set_write_timeout(Some(IO_TIMEOUT))?;
                Ok(c)
            });
        match connected {
            Ok(c) => {
                self.conn = Some(c);
                self.backoff = MIN_BACKOFF;
                self.metrics.connected.set(1);
                tracing::info!("route cache connected to redis");
                true
            }
            Err(e) => {
                self.fail("redis connect failed", &e);
                false
            }
        }
    }

    fn fail(&mut self, what: &'static str, e: &redis::RedisError) {
        self.metrics.errors.inc();
        self.metrics.connected.set(0);
        self.conn = None;
        self.retry_at = Instant::now() + self.backoff;
        let backoff = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        if let Some(suppressed) = self.log.allow(Instant::now()) {
            tracing::warn!(
                error = %e,
                retry_in_ms = backoff.as_millis() as u64,
                suppressed,
                "{what}; forwarding continues without the route cache"
            );
        }
    }
}

/// Lets one log line through per [`LOG_EVERY`], counting the others.
#[derive(Default)]
struct LogLimiter {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    /// `Some(lines suppressed since the last one)` if a line may be logged now.
    fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(at) if now.saturating_duration_since(at) < LOG_EVERY => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_key_spells_the_client_address() {
        assert_eq!(
            route_key("198.51.100.7:5000".parse().unwrap()),
            "voxgate:route:198.51.100.7:5000"
        );
        assert_eq!(
            route_key("[2001:db8::1]:443".parse().unwrap()),
            "voxgate:route:[2001:db8::1]:443"
        );
    }

    #[test]
    fn log_limiter_lets_one_line_through_per_period() {
        let mut l = LogLimiter::default();
        let t0 = Instant::now();
        assert_eq!(l.allow(t0), Some(0));
        assert_eq!(l.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(l.allow(t0 + Duration::from_secs(2)), None);
        assert_eq!(l.allow(t0 + LOG_EVERY), Some(2));
    }

    #[test]
    fn unreachable_redis_answers_lookups_with_no_route_and_counts_errors() {
        let metrics = crate::metrics::Metrics::new();
        let cm = metrics.cache();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let (atx, arx) = crossbeam_channel::bounded(16);
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), mio::Token(9)).unwrap());
        // Port 1 on loopback: connection refused at once.
        let cache = RouteCache::new(
            "redis://127.0.0.1:1",
            Duration::from_secs(60),
            rx,
            vec![WorkerLink {
                answers: atx,
                waker,
            }],
            cm.clone(),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        let thread = std::thread::spawn(move || cache.run());
        let client: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        tx.send(CacheRequest::Lookup { worker: 0, client }).unwrap();
        let answer = arx.recv_timeout(Duration::from_secs(3)).unwrap();
        assert_eq!(
            answer,
            RouteAnswer {
                client,
                route: None
            }
        );
        assert!(cm.errors.get() >= 1);
        assert_eq!(cm.connected.get(), 0);
        drop(tx);
        thread.join().unwrap();
    }
}
