//! The flow table's side of the route cache: which unknown clients may be looked up now.
//!
//! A lookup is deduplicated while one is in flight (for at most [`LOOKUP_TIMEOUT`]), a client
//! the cache had no route for is not asked about again for `lookup_negative_ttl`, and lookups
//! start at most `lookup_rate` a second (a token bucket) with at most
//! [`MAX_PENDING_LOOKUPS`] in flight. Sans-IO like the table: time comes in as `now`, and
//! every map is preallocated to its cap (none at all without a cache).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::prefault::prefault_map;
use crate::drop_reason::DropReason;

/// A lookup with no answer after this long may be asked again.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// Lookups in flight per table.
pub const MAX_PENDING_LOOKUPS: usize = 1024;
/// Clients remembered as "cache said no".
pub const MAX_NEGATIVE_ENTRIES: usize = 16_384;

/// Lookups in flight, recent misses and the rate limit of one table.
pub struct Lookups {
    /// Client → until when its lookup counts as in flight.
    pending: HashMap<SocketAddr, Instant>,
    /// Client → until when "no route" stands.
    negative: HashMap<SocketAddr, Instant>,
    /// Lookups per second, and the bucket's size.
    rate: u32,
    tokens: f64,
    refilled: Option<Instant>,
}

impl Lookups {
    /// Bookkeeping for `rate` lookups a second; `enabled` false (no cache) allocates nothing.
    pub fn new(enabled: bool, rate: u32) -> Self {
        Self {
            pending: HashMap::with_capacity(if enabled { MAX_PENDING_LOOKUPS } else { 0 }),
            negative: HashMap::with_capacity(if enabled { MAX_NEGATIVE_ENTRIES } else { 0 }),
            rate,
            tokens: f64::from(rate),
            refilled: None,
        }
    }

    /// May `client` be looked up at `now`? If so, the lookup is in flight until the returned
    /// instant; if not, why its datagram is dropped without one.
    pub fn start(&mut self, now: Instant, client: SocketAddr) -> Result<Instant, DropReason> {
        if self.negative.get(&client).is_some_and(|until| *until > now) {
            return Err(DropReason::UnknownFlow);
        }
        if self.pending.get(&client).is_some_and(|until| *until > now) {
            return Err(DropReason::LookupPending);
        }
        let rate = f64::from(self.rate);
        let elapsed = self
            .refilled
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.refilled = Some(now);
        if self.tokens < 1.0 || self.pending.len() >= MAX_PENDING_LOOKUPS {
            return Err(DropReason::LookupLimited);
        }
        self.tokens -= 1.0;
        let until = now + LOOKUP_TIMEOUT;
        self.pending.insert(client, until);
        Ok(until)
    }

    /// The cache answered for `client` (with a route or without): its lookup is over.
    pub fn answered(&mut self, client: SocketAddr) {
        self.pending.remove(&client);
    }

    /// The cache has no route for `client`: refuse to ask again until `now + ttl`, which is
    /// returned, unless the table of misses is full.
    pub fn missed(&mut self, now: Instant, client: SocketAddr, ttl: Duration) -> Option<Instant> {
        self.answered(client);
        if self.negative.len() >= MAX_NEGATIVE_ENTRIES {
            return None;
        }
        let until = now + ttl;
        self.negative.insert(client, until);
        Some(until)
    }

    /// Forgets lookups and misses whose time is up; returns the earliest deadline left.
    pub fn expire(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for map in [&mut self.pending, &mut self.negative] {
            map.retain(|_, until| {
                if *until > now {
                    next = Some(next.map_or(*until, |n| n.min(*until)));
                    true
                } else {
                    false
                }
            });
        }
        next
    }

    /// Touches every page of both maps once (see [`FlowTable::prefault`](super::FlowTable::prefault));
    /// returns the bytes of map storage touched.
    pub fn prefault(&mut self, now: Instant) -> usize {
        let addr = |i: usize| SocketAddr::from((std::net::Ipv6Addr::from(i as u128), 0));
        prefault_map(&mut self.pending, addr, |_| now)
            + prefault_map(&mut self.negative, addr, |_| now)
    }
}
