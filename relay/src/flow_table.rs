//! The relay's whole routing decision, Sans-IO: datagrams and `now` go in, a [`Verdict`]
//! comes out. No sockets, no threads, no clock of its own, no allocation per datagram (every
//! map is preallocated to its cap and never grows past it).
//!
//! # Rules
//!
//! * **Unknown client, STUN binding request.** Its USERNAME's server ufrag is a routing hint;
//!   if it authenticates under the keyring, is not too old (see *Hint age*) and names a loop
//!   inside `--transceivers`, a *tentative* flow `client → hint.loop_addr` is created (or
//!   `client → peer relay` when the hint names a `--peer-cluster`) and the datagram is
//!   forwarded behind a [`RelayHeader`]. Anything that fails creates no state.
//! * **Known client, any datagram.** Forwarded opaquely to the flow's next hop.
//! * **Unknown client, anything else.** With a route cache: [`Verdict::Lookup`] (rate
//!   limited, deduplicated, negatively cached), else dropped.
//! * **Relay-framed datagram on the public side.** Only from a peer relay's IP (the global
//!   tier): the header names the client, the peer is the hop replies go back to.
//! * **Return path (internal side).** Only from `--transceivers` networks or peer relay IPs,
//!   only for a known client, only from that flow's next hop. The first reply makes the flow
//!   *established*; the reply goes to the client with the header stripped (or, for a flow a
//!   peer delivered, back to that peer with the header kept). A reply whose header says TCP
//!   is never sent to a UDP client: it belongs on the TCP thread's socket.
//!
//! The relay never answers a sender by itself: every `Forward` goes to an address named by
//! an authenticated hint, a configured peer, or a route the cache returned (checked against
//! the same allow-lists); every `ToClient` goes to a client whose flow exists.
//!
//! # Hint age
//!
//! A hint carries its coarse mint time (minutes). It routes while its age, by the relay's
//! wall clock, is at most `hint_max_age` + [`HINT_CLOCK_SKEW`]; one minted more than
//! [`HINT_CLOCK_SKEW`] in the future is refused too (a transceiver with a broken clock would
//! otherwise mint ufrags that live for ever). The skew allowance also absorbs the rounding to
//! the minute. A version 1 hint (no mint time) routes only with `accept_untimed_hints`.
//!
//! Only the *creation* of a flow is judged. Every datagram of an existing flow, ICE consent
//! checks included, is forwarded opaquely, so a call that outlives the max age keeps its
//! flow, and an ICE restart gets a freshly minted ufrag from the transceiver. What an old
//! hint can no longer do is open a flow from a new client address, or reopen one after the
//! flow expired (restores from the route cache are flows that were established before, and
//! are checked against `--transceivers`, not by age). The wall clock is an input like `now`:
//! the worker re-reads it periodically ([`FlowTable::set_wall_clock`]).
//!
//! # Bounds
//!
//! At most `max_flows` flows. At most `max_tentative_per_ip` tentative flows per *client
//! source*: one IPv4 address, or one IPv6 /64 (what a single host or customer is usually
//! given, so a host cannot spread a flood over its 2^64 addresses); IPv4-mapped IPv6
//! addresses count as their IPv4 address. At most `max_tentative` tentative flows in all: a
//! new one past that cap, or into a full table, evicts the oldest tentative flow (counted),
//! never an established one. A table full of established flows refuses new ones.
//! Tentative flows expire `tentative_timeout` after creation, established ones after
//! `idle_timeout` without traffic either way. Expiry is swept at most every
//! [`SWEEP_GRANULARITY`], so a flow may outlive its deadline by that much.

mod lookups;
mod prefault;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use voxgate_proto::source_caps::client_source;
use voxgate_proto::{is_relay_framed, looks_like_stun, Direction, RelayHeader, Transport};

use crate::config::RoutingConfig;
use crate::drop_reason::DropReason;
pub use crate::first_hop::HINT_CLOCK_SKEW;
use crate::first_hop::{first_hop, routable_hint, WallClock};
use lookups::Lookups;
pub use lookups::{LOOKUP_TIMEOUT, MAX_NEGATIVE_ENTRIES, MAX_PENDING_LOOKUPS};
use prefault::prefault_map;

/// Expired flows are removed by a sweep that runs at most this often.
pub const SWEEP_GRANULARITY: Duration = Duration::from_millis(250);
/// Route writes queued between two drains by the worker.
pub const MAX_QUEUED_ROUTE_WRITES: usize = 4096;

/// What to do with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send from the internal socket to `to` (a transceiver loop or a peer relay). If
    /// `header` is `Some`, prepend it; if `None`, the datagram already carries its header
    /// and goes out unchanged.
    Forward {
        /// Next hop.
        to: SocketAddr,
        /// Header to prepend, if any.
        header: Option<RelayHeader>,
    },
    /// Send `datagram[payload_at..]` (header stripped) from the public socket to the client.
    ToClient {
        /// The client.
        to: SocketAddr,
        /// Length of the relay header in front of the payload.
        payload_at: usize,
    },
    /// Drop it, counted under this reason.
    Drop(DropReason),
    /// Drop it, and ask the route cache where this client's flow goes; the answer comes
    /// back through [`FlowTable::install_route`] or [`FlowTable::on_lookup_miss`].
    Lookup(SocketAddr),
}

/// A route to write to the cache: `client` is served by next hop `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteWrite {
    /// Client address as the relay sees it.
    pub client: SocketAddr,
    /// Transceiver loop (or peer relay ingress).
    pub to: SocketAddr,
}

/// Plain counters owned by the table; the worker publishes them periodically.
#[derive(Debug, Clone, Default)]
pub struct TableStats {
    /// Drops per [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
    /// Flows created (hint or cache).
    pub flows_created: u64,
    /// Flows that saw their first reply.
    pub flows_established: u64,
    /// Tentative flows expired without a reply.
    pub flows_expired_tentative: u64,
    /// Tentative flows evicted (oldest first) to admit a new one.
    pub flows_evicted_tentative: u64,
    /// Established flows expired idle.
    pub flows_expired_established: u64,
    /// Lookups handed to the cache.
    pub lookups_started: u64,
    /// Routes from the cache turned into flows.
    pub routes_installed: u64,
    /// Routes from the cache refused (unlisted destination, caps, already known).
    pub routes_rejected: u64,
    /// Route writes dropped because the queue was full.
    pub route_writes_dropped: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Count {
    packets: u64,
    bytes: u64,
}

impl Count {
    fn add(&mut self, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }
}

#[derive(Debug, Clone)]
struct Flow {
    /// Next hop towards the transceiver: a loop address or a peer relay ingress.
    to: SocketAddr,
    /// `to` is a peer relay: its replies come from its internal socket (same IP, any port).
    to_is_peer: bool,
    /// Peer relay that delivered this flow (global tier); replies go back there.
    downstream: Option<SocketAddr>,
    established: bool,
    /// Creation number: tells this flow's entry in the eviction queue from a stale one.
    seq: u64,
    created: Instant,
    last_seen: Instant,
    /// Last time this flow's route was queued for the cache.
    route_written: Option<Instant>,
    up: Count,
    down: Count,
}

impl Flow {
    fn deadline(&self, tentative: Duration, idle: Duration) -> Instant {
        if self.established {
            self.last_seen + idle
        } else {
            self.created + tentative
        }
    }
}

/// Per-client flows of one worker, with the caps, timers and lookup bookkeeping around them.
pub struct FlowTable {
    cfg: RoutingConfig,
    flows: HashMap<SocketAddr, Flow>,
    /// Tentative flows per [`client_source`].
    tentative_per_source: HashMap<IpAddr, u32>,
    tentative: usize,
    /// Tentative flows in creation order, as `(seq, client)`; entries whose flow has since
    /// been established, expired or evicted are skipped when met (and compacted when full).
    tentative_order: VecDeque<(u64, SocketAddr)>,
    next_seq: u64,
    /// Set by [`FlowTable::set_wall_clock`]; hint ages are judged against it.
    wall_clock: WallClock,
    lookups: Lookups,
    route_writes: Vec<RouteWrite>,
    next_sweep: Option<Instant>,
    /// No sweep before this (sweeps are O(flows), so at most one per SWEEP_GRANULARITY).
    sweep_floor: Option<Instant>,
    stats: TableStats,
}

impl FlowTable {
    /// An empty table; every map is allocated up front to its cap.
    pub fn new(cfg: RoutingConfig) -> Self {
        let lookups = cfg.lookups;
        Self {
            flows: HashMap::with_capacity(cfg.max_flows),
            tentative_per_source: HashMap::with_capacity(cfg.max_tentative),
            tentative: 0,
            tentative_order: VecDeque::with_capacity(order_capacity(cfg.max_tentative)),
            next_seq: 0,
            wall_clock: WallClock::default(),
            lookups: Lookups::new(lookups, cfg.lookup_rate),
            route_writes: Vec::with_capacity(if lookups { MAX_QUEUED_ROUTE_WRITES } else { 0 }),
            next_sweep: None,
            sweep_floor: None,
            stats: TableStats::default(),
            cfg,
        }
    }

    /// Touches every page of the flow maps once, so the worker's memory is resident from the
    /// start instead of page by page as flows land in new buckets. A table reserved for
    /// `--max-flows` (about 25 MiB per worker at the default 100,000) otherwise grows the
    /// process's RSS for as long as new client addresses keep arriving, which reads like a
    /// leak in a soak and hides the real footprint from a container memory limit until the
    /// busiest hour. Fills each map to its
    /// capacity with placeholders (never past it: no reallocation) and clears it; `clear`
    /// keeps the allocation. Returns the bytes of map storage touched.
    pub fn prefault(&mut self, now: Instant) -> usize {
        let placeholder = Flow {
            to: SocketAddr::from(([0, 0, 0, 0], 0)),
            to_is_peer: false,
            downstream: None,
            established: false,
            seq: 0,
            created: now,
            last_seen: now,
            route_written: None,
            up: Count::default(),
            down: Count::default(),
        };
        let addr = |i: usize| SocketAddr::from((std::net::Ipv6Addr::from(i as u128), 0));
        let ip = |i: usize| IpAddr::from(std::net::Ipv6Addr::from(i as u128));
        prefault_map(&mut self.flows, addr, |_| placeholder.clone())
            + prefault_map(&mut self.tentative_per_source, ip, |_| 0)
            + self.lookups.prefault(now)
    }

    /// A datagram that arrived on the public socket from `from`.
    pub fn on_client_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) -> Verdict {
        if is_relay_framed(bytes) {
            return self.on_peer_datagram(now, from, bytes);
        }
        if let Some(flow) = self.flows.get_mut(&from) {
            flow.up.add(bytes.len());
            touch(
                flow,
                from,
                now,
                &self.cfg,
                &mut self.route_writes,
                &mut self.stats,
            );
            let to = flow.to;
            return Verdict::Forward {
                to,
                header: Some(RelayHeader::udp(Direction::ToTransceiver, from)),
            };
        }
        if !looks_like_stun(bytes) {
            return if self.cfg.lookups {
                self.start_lookup(now, from)
            } else {
                self.drop(DropReason::UnknownFlow)
            };
        }
        let to = match first_hop(&self.cfg, &self.wall_clock, now, bytes) {
            Ok(to) => to,
            Err(reason) => return self.drop(reason),
        };
        if let Err(reason) = self.create(now, from, to, None) {
            return self.drop(reason);
        }
        self.count_up(from, bytes.len());
        Verdict::Forward {
            to,
            header: Some(RelayHeader::udp(Direction::ToTransceiver, from)),
        }
    }

    /// A relay-framed datagram on the public socket: a peer relay of another cluster hands
    /// us a client flow whose hint names our cluster.
    fn on_peer_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) -> Verdict {
        if !self.cfg.is_peer_ip(from.ip()) {
            return self.drop(DropReason::NotPeer);
        }
        let (header, payload) = match RelayHeader::decode(bytes) {
            Ok((h, p)) if h.direction == Direction::ToTransceiver => (h, p),
            _ => return self.drop(DropReason::BadHeader),
        };
        let client = header.client;
        if let Some(flow) = self.flows.get_mut(&client) {
            flow.downstream = Some(from);
            flow.up.add(bytes.len());
            touch(
                flow,
                client,
                now,
                &self.cfg,
                &mut self.route_writes,
                &mut self.stats,
            );
            return Verdict::Forward {
                to: flow.to,
                header: None,
            };
        }
        if !looks_like_stun(payload) {
            return self.drop(DropReason::UnknownFlow);
        }
        let hint = match routable_hint(&self.cfg, &self.wall_clock, now, payload) {
            Ok(hint) => hint,
            Err(reason) => return self.drop(reason),
        };
        // A peer only delivers flows of our cluster; anything else would bounce between tiers.
        if hint.cluster_id != self.cfg.cluster_id {
            return self.drop(DropReason::UnknownCluster);
        }
        if !self.cfg.is_transceiver(hint.loop_addr.ip()) {
            return self.drop(DropReason::HintDestination);
        }
        if let Err(reason) = self.create(now, client, hint.loop_addr, Some(from)) {
            return self.drop(reason);
        }
        self.count_up(client, bytes.len());
        Verdict::Forward {
            to: hint.loop_addr,
            header: None,
        }
    }

    /// A datagram that arrived on the internal socket: a reply for a client.
    pub fn on_internal_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Verdict {
        if !self.cfg.is_transceiver(from.ip()) && !self.cfg.is_peer_ip(from.ip()) {
            return self.drop(DropReason::SpoofedReturn);
        }
        let header = match RelayHeader::decode(bytes) {
            Ok((h, _)) if h.direction == Direction::ToClient => h,
            _ => return self.drop(DropReason::BadHeader),
        };
        let client = header.client;
        let Some(flow) = self.flows.get_mut(&client) else {
            return self.drop(DropReason::UnknownFlow);
        };
        let from_next_hop = flow.to == from || (flow.to_is_peer && flow.to.ip() == from.ip());
        if !from_next_hop {
            return self.drop(DropReason::WrongSource);
        }
        // A flow handed over by a peer relay passes the header on untouched (the peer may hold
        // the client's TCP connection); a flow of our own is a UDP client, and a TCP frame
        // written to it as a datagram would be a stray packet to the client.
        if flow.downstream.is_none() && header.transport != Transport::Udp {
            return self.drop(DropReason::WrongTransport);
        }
        flow.down.add(bytes.len());
        let was_tentative = !flow.established;
        flow.established = true;
        touch(
            flow,
            client,
            now,
            &self.cfg,
            &mut self.route_writes,
            &mut self.stats,
        );
        let downstream = flow.downstream;
        if was_tentative {
            self.stats.flows_established += 1;
            self.release_tentative(client);
        }
        match downstream {
            Some(peer) => Verdict::Forward {
                to: peer,
                header: None,
            },
            None => Verdict::ToClient {
                to: client,
                payload_at: header.encoded_len(),
            },
        }
    }

    /// The route cache says `client`'s flow goes to `to`: restore it as a tentative flow.
    /// Refused (and counted) unless `to` is in the transceiver networks or a peer ingress.
    pub fn install_route(&mut self, now: Instant, client: SocketAddr, to: SocketAddr) {
        self.lookups.answered(client);
        let allowed = self.cfg.is_transceiver(to.ip()) || self.cfg.is_peer_addr(to);
        if !allowed || self.flows.contains_key(&client) {
            self.stats.routes_rejected += 1;
            return;
        }
        match self.create(now, client, to, None) {
            Ok(()) => {
                self.stats.routes_installed += 1;
                if let Some(flow) = self.flows.get_mut(&client) {
                    // It is in the cache already; rewrite only once it is confirmed.
                    flow.route_written = Some(now);
                }
            }
            Err(_) => self.stats.routes_rejected += 1,
        }
    }

    /// The route cache has no route for `client` (or could not answer): do not ask again
    /// for `lookup_negative_ttl`.
    pub fn on_lookup_miss(&mut self, now: Instant, client: SocketAddr) {
        if let Some(until) = self
            .lookups
            .missed(now, client, self.cfg.lookup_negative_ttl)
        {
            self.schedule(until);
        }
    }

    /// Routes to write to the cache (flows that just got established, or whose cached route
    /// is due for a refresh). The worker drains this after every batch.
    pub fn drain_route_writes(&mut self) -> std::vec::Drain<'_, RouteWrite> {
        self.route_writes.drain(..)
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Expire flows, lookups in flight and negative entries whose time is up.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.next_sweep {
            Some(at) if at <= now => {}
            _ => return,
        }
        let (tentative_timeout, idle) = (self.cfg.tentative_timeout, self.cfg.idle_timeout);
        let mut next: Option<Instant> = None;
        let stats = &mut self.stats;
        let per_source = &mut self.tentative_per_source;
        let tentative = &mut self.tentative;
        self.flows.retain(|client, flow| {
            let deadline = flow.deadline(tentative_timeout, idle);
            if deadline > now {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
                return true;
            }
            if flow.established {
                stats.flows_expired_established += 1;
            } else {
                stats.flows_expired_tentative += 1;
                *tentative -= 1;
                decrement(per_source, client_source(client.ip()));
            }
            tracing::debug!(
                %client,
                to = %flow.to,
                established = flow.established,
                up_packets = flow.up.packets,
                up_bytes = flow.up.bytes,
                down_packets = flow.down.packets,
                down_bytes = flow.down.bytes,
                "flow expired"
            );
            false
        });
        if let Some(until) = self.lookups.expire(now) {
            next = Some(next.map_or(until, |n| n.min(until)));
        }
        let floor = now + SWEEP_GRANULARITY;
        self.sweep_floor = Some(floor);
        self.next_sweep = next.map(|n| n.max(floor));
    }

    /// The wall clock at `now`, as a duration since the Unix epoch. Hint ages are judged
    /// against it, extrapolated with `now` until the next call; until the first call every
    /// hint is refused as expired (there is nothing to judge its age by).
    pub fn set_wall_clock(&mut self, now: Instant, since_epoch: Duration) {
        self.wall_clock.set(now, since_epoch);
    }

    /// [`set_wall_clock`](Self::set_wall_clock) from a `SystemTime` (the worker's
    /// `SystemTime::now()`); a time before the epoch counts as the epoch.
    pub fn set_wall_clock_from(&mut self, now: Instant, wall: SystemTime) {
        self.wall_clock.set_from(now, wall);
    }

    /// Counters so far.
    pub fn stats(&self) -> &TableStats {
        &self.stats
    }

    /// Flows in the table (tentative and established).
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Flows still waiting for their first reply.
    pub fn tentative_count(&self) -> usize {
        self.tentative
    }

    /// Next hop of `client`'s flow and whether it is established, if there is one.
    pub fn route_of(&self, client: SocketAddr) -> Option<(SocketAddr, bool)> {
        self.flows.get(&client).map(|f| (f.to, f.established))
    }

    fn drop(&mut self, reason: DropReason) -> Verdict {
        self.stats.drops[reason.index()] += 1;
        Verdict::Drop(reason)
    }

    fn count_up(&mut self, client: SocketAddr, bytes: usize) {
        if let Some(flow) = self.flows.get_mut(&client) {
            flow.up.add(bytes);
        }
    }

    /// Creates a tentative flow. The per-source cap refuses; the global tentative cap and a
    /// full table evict the oldest tentative flow instead, so a flood can neither displace
    /// established flows nor lock new clients out for longer than it keeps refilling.
    fn create(
        &mut self,
        now: Instant,
        client: SocketAddr,
        to: SocketAddr,
        downstream: Option<SocketAddr>,
    ) -> Result<(), DropReason> {
        let source = client_source(client.ip());
        let on_source = self.tentative_per_source.get(&source).copied().unwrap_or(0);
        if on_source >= self.cfg.max_tentative_per_ip {
            return Err(DropReason::TentativeCap);
        }
        let full = self.flows.len() >= self.cfg.max_flows;
        if (full || self.tentative >= self.cfg.max_tentative) && !self.evict_oldest_tentative() {
            return Err(DropReason::TableFull);
        }
        *self.tentative_per_source.entry(source).or_insert(0) += 1;
        self.tentative += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.tentative_order.len() == self.tentative_order.capacity() {
            self.compact_tentative_order();
        }
        self.tentative_order.push_back((seq, client));
        self.flows.insert(
            client,
            Flow {
                to,
                to_is_peer: self.cfg.is_peer_addr(to),
                downstream,
                established: false,
                seq,
                created: now,
                last_seen: now,
                route_written: None,
                up: Count::default(),
                down: Count::default(),
            },
        );
        self.stats.flows_created += 1;
        self.schedule(now + self.cfg.tentative_timeout);
        Ok(())
    }

    fn release_tentative(&mut self, client: SocketAddr) {
        self.tentative -= 1;
        decrement(&mut self.tentative_per_source, client_source(client.ip()));
    }

    fn is_live_tentative(&self, seq: u64, client: SocketAddr) -> bool {
        self.flows
            .get(&client)
            .is_some_and(|f| !f.established && f.seq == seq)
    }

    /// Removes the oldest tentative flow; `false` if there is none.
    fn evict_oldest_tentative(&mut self) -> bool {
        while let Some((seq, client)) = self.tentative_order.pop_front() {
            if !self.is_live_tentative(seq, client) {
                continue;
            }
            self.flows.remove(&client);
            self.release_tentative(client);
            self.stats.flows_evicted_tentative += 1;
            return true;
        }
        false
    }

    /// Drops the stale entries of the eviction queue. Live entries are at most
    /// `max_tentative`, half the queue's capacity, so this runs at most once per
    /// `max_tentative` creations and the queue never reallocates.
    fn compact_tentative_order(&mut self) {
        let mut order = std::mem::take(&mut self.tentative_order);
        order.retain(|&(seq, client)| self.is_live_tentative(seq, client));
        self.tentative_order = order;
    }

    fn start_lookup(&mut self, now: Instant, client: SocketAddr) -> Verdict {
        let until = match self.lookups.start(now, client) {
            Ok(until) => until,
            Err(reason) => return self.drop(reason),
        };
        self.schedule(until);
        self.stats.lookups_started += 1;
        self.stats.drops[DropReason::AwaitingRoute.index()] += 1;
        Verdict::Lookup(client)
    }

    fn schedule(&mut self, at: Instant) {
        let at = self.sweep_floor.map_or(at, |floor| at.max(floor));
        self.next_sweep = Some(self.next_sweep.map_or(at, |n| n.min(at)));
    }
}

/// Traffic on a known flow: refresh its idle timer and, for an established flow owned by
/// this relay, queue its route for the cache when it is new or due for a refresh. (A free
/// function over split borrows, so the caller's single map lookup serves the whole packet.)
fn touch(
    flow: &mut Flow,
    client: SocketAddr,
    now: Instant,
    cfg: &RoutingConfig,
    writes: &mut Vec<RouteWrite>,
    stats: &mut TableStats,
) {
    flow.last_seen = now;
    if !flow.established || !cfg.lookups || flow.downstream.is_some() {
        return;
    }
    let due = flow
        .route_written
        .is_none_or(|at| now.saturating_duration_since(at) >= cfg.route_refresh);
    if !due {
        return;
    }
    if writes.len() < MAX_QUEUED_ROUTE_WRITES {
        flow.route_written = Some(now);
        writes.push(RouteWrite {
            client,
            to: flow.to,
        });
    } else {
        stats.route_writes_dropped += 1;
    }
}

fn decrement(per_source: &mut HashMap<IpAddr, u32>, source: IpAddr) {
    if let Some(n) = per_source.get_mut(&source) {
        *n -= 1;
        if *n == 0 {
            per_source.remove(&source);
        }
    }
}

/// Capacity of the eviction queue: twice the live entries it can hold, see
/// [`FlowTable::compact_tentative_order`].
fn order_capacity(max_tentative: usize) -> usize {
    max_tentative.saturating_mul(2).max(2)
}

#[cfg(test)]
mod tests;
