//! Prometheus metrics of the relay (served by [`crate::metrics_http`]).
//!
//! Workers never touch these on the packet path: they keep plain integer counters
//! ([`WorkerSnapshot`]) and every `--metrics-interval-ms` publish the difference since the
//! last publication through the handles in [`WorkerMetrics`]. The route cache thread, which
//! is off the packet path, updates its own handles ([`CacheMetrics`]) directly.
//!
//! Every metric is prefixed `voxgate_relay_`; counters end in `_total`.
//!
//! The series both transports share (`packets_forwarded`, `bytes_forwarded`, `drops`,
//! `flows_active`, `flows_created`) carry `transport="udp"` from the workers and
//! `transport="tcp"` (with `worker="tcp"`) from the TCP thread, which publishes
//! ([`TcpSnapshot`]) the same way; `flows_created` and `flows_active` of TCP count connections
//! whose first frame was accepted, `flows_established` those the transceiver answered on. The
//! `tcp_connections_*` families are TCP's own.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

use crate::drop_reason::DropReason;
use crate::tcp::{CloseReason, Refusal};

type Labels = Vec<(&'static str, String)>;
type Counters = Family<Labels, Counter>;
type Gauges = Family<Labels, Gauge>;

/// Forwarding direction label values, indexed by [`DIR_TO_TRANSCEIVER`] / [`DIR_TO_CLIENT`].
pub const DIRECTIONS: [&str; 2] = ["to_transceiver", "to_client"];
/// Index of "towards the transceiver" (client datagrams, and a peer's hand-over).
pub const DIR_TO_TRANSCEIVER: usize = 0;
/// Index of "towards the client" (replies, including those returned to a peer relay).
pub const DIR_TO_CLIENT: usize = 1;
/// Socket label values, indexed by [`SOCK_PUBLIC`] / [`SOCK_INTERNAL`].
pub const SOCKETS: [&str; 2] = ["public", "internal"];
/// Index of the public socket.
pub const SOCK_PUBLIC: usize = 0;
/// Index of the internal socket.
pub const SOCK_INTERNAL: usize = 1;

/// Every metric family of the process.
pub struct Metrics {
    registry: Registry,
    packets: Counters,
    bytes: Counters,
    drops: Counters,
    flows_active: Gauges,
    flows_tentative: Gauges,
    flows_created: Counters,
    flows_established: Counters,
    flows_expired: Counters,
    flows_evicted: Counters,
    recv_batches: Counters,
    recv_datagrams: Counters,
    send_batches: Counters,
    send_datagrams: Counters,
    lookups: Counters,
    routes_installed: Counters,
    routes_rejected: Counters,
    cache_queue_drops: Counters,
    redis_lookups: Counters,
    redis_writes: Counter,
    redis_errors: Counter,
    redis_connected: Gauge,
    scrapes_refused: [Counter; ScrapeRefusal::ALL.len()],
    tcp_open: Gauge,
    tcp_tentative: Gauge,
    tcp_accepted: Counter,
    tcp_refused: Counters,
    tcp_closed: Counters,
}

/// Why the metrics endpoint closed a connection without answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrapeRefusal {
    /// The request (or reading the response) took longer than the connection deadline.
    Timeout,
    /// Closed to make room for a newer connection.
    Evicted,
    /// The request was too large.
    BadRequest,
}

impl ScrapeRefusal {
    /// Every reason.
    pub const ALL: [ScrapeRefusal; 3] = [Self::Timeout, Self::Evicted, Self::BadRequest];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Evicted => "evicted",
            Self::BadRequest => "bad_request",
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every family (in this order, which is the exposition's).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("voxgate_relay");
        let r = &mut registry;
        Self {
            packets: register(r, "packets_forwarded", "Datagrams sent on, by worker and direction"),
            bytes: register(
                r,
                "bytes_forwarded",
                "Bytes sent on (relay header included), by worker and direction",
            ),
            drops: register(r, "drops", "Datagrams not forwarded, by worker and reason"),
            flows_created: register(
                r,
                "flows_created",
                "Flows created from a valid hint or a cached route",
            ),
            flows_established: register(
                r,
                "flows_established",
                "Flows that saw their first reply on the return path",
            ),
            flows_expired: register(
                r,
                "flows_expired",
                "Flows expired, by state (tentative: no reply; established: idle)",
            ),
            flows_evicted: register(
                r,
                "flows_evicted",
                "Tentative flows evicted, oldest first, to admit a new flow past the tentative cap \
                 or into a full table",
            ),
            recv_batches: register(r, "recv_batches", "recvmmsg calls that returned datagrams"),
            recv_datagrams: register(
                r,
                "recv_datagrams",
                "Datagrams received (recv_datagrams / recv_batches = mean batch size)",
            ),
            send_batches: register(r, "send_batches", "sendmmsg batches flushed"),
            send_datagrams: register(
                r,
                "send_datagrams",
                "Datagrams queued into send batches (send_datagrams / send_batches = mean batch size)",
            ),
            lookups: register(
                r,
                "route_lookups",
                "Route cache lookups started by workers (unknown non-STUN packets)",
            ),
            routes_installed: register(
                r,
                "routes_installed",
                "Cached routes turned into flows after a lookup",
            ),
            routes_rejected: register(
                r,
                "routes_rejected",
                "Cached routes refused (destination not allowed, caps, flow already known)",
            ),
            cache_queue_drops: register(
                r,
                "cache_queue_drops",
                "Messages between workers and the route cache dropped because a queue was full",
            ),
            redis_lookups: register(r, "redis_lookups", "Redis route lookups, by result"),
            redis_writes: register(r, "redis_writes", "Routes written to Redis"),
            redis_errors: register(r, "redis_errors", "Redis connection and command errors"),
            flows_active: register(r, "flows_active", "Flows in the table, by worker"),
            flows_tentative: register(
                r,
                "flows_tentative",
                "Flows waiting for their first reply, by worker",
            ),
            scrapes_refused: {
                let family: Counters = register(
                    r,
                    "scrapes_refused",
                    "Connections to /metrics closed without an answer, by reason",
                );
                ScrapeRefusal::ALL
                    .map(|reason| handle(&family, &vec![("reason", reason.as_str().to_owned())]))
            },
            redis_connected: register(
                r,
                "redis_connected",
                "1 while the route cache holds a Redis connection",
            ),
            tcp_open: register(
                r,
                "tcp_connections_open",
                "Client TCP connections held (awaiting their first frame or forwarding)",
            ),
            tcp_tentative: register(
                r,
                "tcp_connections_tentative",
                "Client TCP connections not answered by their transceiver yet (awaiting their \
                 first frame, or its reply)",
            ),
            tcp_accepted: register(
                r,
                "tcp_connections_accepted",
                "Client TCP connections accepted past the caps",
            ),
            tcp_refused: register(
                r,
                "tcp_connections_refused",
                "Client TCP connections closed at accept, by reason (per_ip_cap, global_cap, per_56_cap, \
                 per_48_cap)",
            ),
            tcp_closed: register(
                r,
                "tcp_connections_closed",
                "Client TCP connections closed after accept, by reason",
            ),
            registry,
        }
    }

    /// Counts a connection the metrics endpoint closed unanswered.
    pub fn scrape_refused(&self, reason: ScrapeRefusal) {
        self.scrapes_refused[reason as usize].inc();
    }

    /// Handles for worker `id`, resolved once so that publishing takes no locks per label.
    pub fn worker(&self, id: usize) -> WorkerMetrics {
        let w = |extra: Option<(&'static str, &str)>| -> Labels {
            let mut l = vec![("worker", id.to_string())];
            if let Some((k, v)) = extra {
                l.push((k, v.to_owned()));
            }
            l
        };
        let udp = |extra: Option<(&'static str, &str)>| -> Labels {
            let mut l = w(extra);
            l.push(("transport", "udp".to_owned()));
            l
        };
        let by = |f: &Counters, key: &'static str, values: [&str; 2]| {
            values.map(|v| handle(f, &w(Some((key, v)))))
        };
        let shared = self.shared(udp);
        WorkerMetrics {
            packets: shared.packets,
            bytes: shared.bytes,
            drops: shared.drops,
            flows_active: shared.flows_active,
            flows_tentative: handle(&self.flows_tentative, &w(None)),
            flows_created: shared.flows_created,
            flows_established: handle(&self.flows_established, &w(None)),
            flows_expired: by(&self.flows_expired, "state", ["tentative", "established"]),
            flows_evicted: handle(&self.flows_evicted, &w(None)),
            recv_batches: by(&self.recv_batches, "socket", SOCKETS),
            recv_datagrams: by(&self.recv_datagrams, "socket", SOCKETS),
            send_batches: by(&self.send_batches, "socket", SOCKETS),
            send_datagrams: by(&self.send_datagrams, "socket", SOCKETS),
            lookups: handle(&self.lookups, &w(None)),
            routes_installed: handle(&self.routes_installed, &w(None)),
            routes_rejected: handle(&self.routes_rejected, &w(None)),
            queue_drops: by(&self.cache_queue_drops, "queue", ["request", "route_write"]),
        }
    }

    /// Handles of the series both transports publish, under `labels(extra)`.
    fn shared(&self, labels: impl Fn(Option<(&'static str, &str)>) -> Labels) -> SharedMetrics {
        let by_direction =
            |f: &Counters| DIRECTIONS.map(|d| handle(f, &labels(Some(("direction", d)))));
        SharedMetrics {
            packets: by_direction(&self.packets),
            bytes: by_direction(&self.bytes),
            drops: DropReason::ALL
                .iter()
                .map(|r| handle(&self.drops, &labels(Some(("reason", r.as_str())))))
                .collect(),
            flows_active: handle(&self.flows_active, &labels(None)),
            flows_created: handle(&self.flows_created, &labels(None)),
        }
    }

    /// Handles for the TCP thread (`worker="tcp"`, `transport="tcp"`).
    pub fn tcp(&self) -> TcpMetrics {
        let labels = |extra: Option<(&'static str, &str)>| -> Labels {
            let mut l = vec![("worker", "tcp".to_owned())];
            if let Some((k, v)) = extra {
                l.push((k, v.to_owned()));
            }
            l.push(("transport", "tcp".to_owned()));
            l
        };
        let reason = |f: &Counters, r: &str| handle(f, &vec![("reason", r.to_owned())]);
        TcpMetrics {
            established: handle(&self.flows_established, &labels(None)),
            shared: self.shared(labels),
            open: self.tcp_open.clone(),
            tentative: self.tcp_tentative.clone(),
            accepted: self.tcp_accepted.clone(),
            refused: Refusal::ALL.map(|r| reason(&self.tcp_refused, r.as_str())),
            closed: CloseReason::ALL.map(|r| reason(&self.tcp_closed, r.as_str())),
        }
    }

    /// Handles for the route cache thread.
    pub fn cache(&self) -> CacheMetrics {
        CacheMetrics {
            hits: handle(&self.redis_lookups, &vec![("result", "hit".to_owned())]),
            misses: handle(&self.redis_lookups, &vec![("result", "miss".to_owned())]),
            writes: self.redis_writes.clone(),
            errors: self.redis_errors.clone(),
            connected: self.redis_connected.clone(),
            answer_drops: handle(
                &self.cache_queue_drops,
                &vec![("queue", "answer".to_owned())],
            ),
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// One worker's counters as plain integers: what it publishes.
#[derive(Debug, Clone, Default)]
pub struct WorkerSnapshot {
    /// Datagrams sent, per direction.
    pub packets: [u64; 2],
    /// Bytes sent, per direction.
    pub bytes: [u64; 2],
    /// Drops per [`DropReason::index`] (table and worker level combined).
    pub drops: [u64; DropReason::COUNT],
    /// Flows in the table now.
    pub flows_active: u64,
    /// Tentative flows now.
    pub flows_tentative: u64,
    /// Flows created.
    pub flows_created: u64,
    /// Flows established.
    pub flows_established: u64,
    /// Flows expired, tentative / established.
    pub flows_expired: [u64; 2],
    /// Tentative flows evicted.
    pub flows_evicted: u64,
    /// recvmmsg calls with data, per socket.
    pub recv_batches: [u64; 2],
    /// Datagrams received, per socket.
    pub recv_datagrams: [u64; 2],
    /// sendmmsg flushes, per socket.
    pub send_batches: [u64; 2],
    /// Datagrams queued for sending, per socket.
    pub send_datagrams: [u64; 2],
    /// Lookups started.
    pub lookups: u64,
    /// Routes installed.
    pub routes_installed: u64,
    /// Routes rejected.
    pub routes_rejected: u64,
    /// Messages to the cache dropped: lookup requests / route writes.
    pub queue_drops: [u64; 2],
}

/// Metric handles of one worker.
pub struct WorkerMetrics {
    packets: [Counter; 2],
    bytes: [Counter; 2],
    drops: Vec<Counter>,
    flows_active: Gauge,
    flows_tentative: Gauge,
    flows_created: Counter,
    flows_established: Counter,
    flows_expired: [Counter; 2],
    flows_evicted: Counter,
    recv_batches: [Counter; 2],
    recv_datagrams: [Counter; 2],
    send_batches: [Counter; 2],
    send_datagrams: [Counter; 2],
    lookups: Counter,
    routes_installed: Counter,
    routes_rejected: Counter,
    queue_drops: [Counter; 2],
}

/// One labelled metric of a family. The family's lock guard is dropped on return: holding it
/// while creating another label of the same family would deadlock.
/// A new metric (or family) registered as `name` with `help`; the registry keeps a handle.
fn register<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

fn handle<M: Clone + Default>(family: &Family<Labels, M>, labels: &Labels) -> M {
    family.get_or_create(labels).clone()
}

fn add(counter: &Counter, now: u64, before: u64) {
    let delta = now.saturating_sub(before);
    if delta > 0 {
        counter.inc_by(delta);
    }
}

fn add_all(counters: &[Counter], now: &[u64], before: &[u64]) {
    for ((c, n), b) in counters.iter().zip(now).zip(before) {
        add(c, *n, *b);
    }
}

fn gauge(g: &Gauge, v: u64) {
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
}

impl WorkerMetrics {
    /// Publishes `now`, given what was published last time (`before`).
    pub fn publish(&self, now: &WorkerSnapshot, before: &WorkerSnapshot) {
        add_all(&self.packets, &now.packets, &before.packets);
        add_all(&self.bytes, &now.bytes, &before.bytes);
        add_all(&self.drops, &now.drops, &before.drops);
        gauge(&self.flows_active, now.flows_active);
        gauge(&self.flows_tentative, now.flows_tentative);
        add(&self.flows_created, now.flows_created, before.flows_created);
        add(
            &self.flows_established,
            now.flows_established,
            before.flows_established,
        );
        add_all(
            &self.flows_expired,
            &now.flows_expired,
            &before.flows_expired,
        );
        add(&self.flows_evicted, now.flows_evicted, before.flows_evicted);
        add_all(&self.recv_batches, &now.recv_batches, &before.recv_batches);
        add_all(
            &self.recv_datagrams,
            &now.recv_datagrams,
            &before.recv_datagrams,
        );
        add_all(&self.send_batches, &now.send_batches, &before.send_batches);
        add_all(
            &self.send_datagrams,
            &now.send_datagrams,
            &before.send_datagrams,
        );
        add(&self.lookups, now.lookups, before.lookups);
        add(
            &self.routes_installed,
            now.routes_installed,
            before.routes_installed,
        );
        add(
            &self.routes_rejected,
            now.routes_rejected,
            before.routes_rejected,
        );
        add_all(&self.queue_drops, &now.queue_drops, &before.queue_drops);
    }
}

/// Handles of the series UDP workers and the TCP thread both publish.
struct SharedMetrics {
    packets: [Counter; 2],
    bytes: [Counter; 2],
    drops: Vec<Counter>,
    flows_active: Gauge,
    flows_created: Counter,
}

/// The TCP thread's counters as plain integers: what it publishes.
#[derive(Debug, Clone, Default)]
pub struct TcpSnapshot {
    /// Frames sent on, per direction (to the client: written whole to the socket).
    pub packets: [u64; 2],
    /// Bytes sent on: relay header included towards transceivers, length prefix included
    /// towards clients.
    pub bytes: [u64; 2],
    /// Frames and replies not forwarded, per [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
    /// Connections forwarding now.
    pub flows_active: u64,
    /// Connections whose first frame was accepted.
    pub flows_created: u64,
    /// Connections the transceiver answered on (no longer tentative).
    pub flows_established: u64,
    /// Connections held now.
    pub open: u64,
    /// Connections held now that are still tentative.
    pub tentative: u64,
    /// Connections accepted past the caps.
    pub accepted: u64,
    /// Connections refused at accept, per [`Refusal::index`].
    pub refused: [u64; Refusal::ALL.len()],
    /// Connections closed, per [`CloseReason::index`].
    pub closed: [u64; CloseReason::ALL.len()],
}

/// Metric handles of the TCP thread.
pub struct TcpMetrics {
    shared: SharedMetrics,
    established: Counter,
    open: Gauge,
    tentative: Gauge,
    accepted: Counter,
    refused: [Counter; Refusal::ALL.len()],
    closed: [Counter; CloseReason::ALL.len()],
}

impl TcpMetrics {
    /// Publishes `now`, given what was published last time (`before`).
    pub fn publish(&self, now: &TcpSnapshot, before: &TcpSnapshot) {
        let s = &self.shared;
        add_all(&s.packets, &now.packets, &before.packets);
        add_all(&s.bytes, &now.bytes, &before.bytes);
        add_all(&s.drops, &now.drops, &before.drops);
        gauge(&s.flows_active, now.flows_active);
        add(&s.flows_created, now.flows_created, before.flows_created);
        add(
            &self.established,
            now.flows_established,
            before.flows_established,
        );
        gauge(&self.open, now.open);
        gauge(&self.tentative, now.tentative);
        add(&self.accepted, now.accepted, before.accepted);
        add_all(&self.refused, &now.refused, &before.refused);
        add_all(&self.closed, &now.closed, &before.closed);
    }
}

/// Metric handles of the route cache thread (updated directly: it is off the packet path).
#[derive(Clone)]
pub struct CacheMetrics {
    /// Lookups that found a route.
    pub hits: Counter,
    /// Lookups that found nothing usable.
    pub misses: Counter,
    /// Routes written.
    pub writes: Counter,
    /// Connection and command errors.
    pub errors: Counter,
    /// 1 while connected.
    pub connected: Gauge,
    /// Answers dropped because a worker's queue was full.
    pub answer_drops: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_deltas_add_up_to_the_worker_totals() {
        let m = Metrics::new();
        let w = m.worker(3);
        let mut before = WorkerSnapshot::default();
        let mut now = WorkerSnapshot::default();
        now.packets[DIR_TO_CLIENT] = 5;
        now.drops[DropReason::BadHint.index()] = 7;
        now.flows_active = 2;
        w.publish(&now, &before);
        before = now.clone();
        now.packets[DIR_TO_CLIENT] = 9;
        now.flows_active = 1;
        w.publish(&now, &before);
        let text = m.encode();
        assert!(
            text.contains(
                "voxgate_relay_packets_forwarded_total{worker=\"3\",direction=\"to_client\",transport=\"udp\"} 9"
            ),
            "{text}"
        );
        assert!(text.contains(
            "voxgate_relay_drops_total{worker=\"3\",reason=\"bad_hint\",transport=\"udp\"} 7"
        ));
        assert!(text.contains("voxgate_relay_flows_active{worker=\"3\",transport=\"udp\"} 1"));
    }

    #[test]
    fn every_drop_reason_is_exposed_from_the_start() {
        let m = Metrics::new();
        let _w = m.worker(0);
        let _t = m.tcp();
        let text = m.encode();
        for r in DropReason::ALL {
            for transport in ["udp", "tcp"] {
                let needle = format!("reason=\"{}\",transport=\"{transport}\"}} 0", r.as_str());
                assert!(text.contains(&needle), "{needle}");
            }
        }
        for r in CloseReason::ALL {
            let needle = format!(
                "tcp_connections_closed_total{{reason=\"{}\"}} 0",
                r.as_str()
            );
            assert!(text.contains(&needle), "{needle}");
        }
    }

    #[test]
    fn tcp_series_carry_the_transport_label_beside_the_workers() {
        let m = Metrics::new();
        let w = m.worker(0);
        let t = m.tcp();
        let mut udp = WorkerSnapshot::default();
        udp.packets[DIR_TO_TRANSCEIVER] = 4;
        w.publish(&udp, &WorkerSnapshot::default());
        let mut tcp = TcpSnapshot::default();
        tcp.packets[DIR_TO_TRANSCEIVER] = 3;
        tcp.refused[Refusal::PerIpCap.index()] = 2;
        tcp.open = 5;
        t.publish(&tcp, &TcpSnapshot::default());
        let text = m.encode();
        for needle in [
            "packets_forwarded_total{worker=\"0\",direction=\"to_transceiver\",transport=\"udp\"} 4",
            "packets_forwarded_total{worker=\"tcp\",direction=\"to_transceiver\",transport=\"tcp\"} 3",
            "tcp_connections_refused_total{reason=\"per_ip_cap\"} 2",
            "tcp_connections_open 5",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
    }

    #[test]
    fn tcp_tentative_and_established_connections_and_the_new_reasons_are_published() {
        let m = Metrics::new();
        let t = m.tcp();
        let mut tcp = TcpSnapshot {
            tentative: 7,
            flows_established: 3,
            ..TcpSnapshot::default()
        };
        tcp.refused[Refusal::Per56Cap.index()] = 1;
        tcp.closed[CloseReason::TentativeEvicted.index()] = 2;
        t.publish(&tcp, &TcpSnapshot::default());
        let text = m.encode();
        for needle in [
            "tcp_connections_tentative 7",
            "flows_established_total{worker=\"tcp\",transport=\"tcp\"} 3",
            "tcp_connections_refused_total{reason=\"per_56_cap\"} 1",
            "tcp_connections_refused_total{reason=\"per_48_cap\"} 0",
            "tcp_connections_closed_total{reason=\"tentative_evicted\"} 2",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
    }
}
