//! The control plane's index of sessions: which loop owns which session id, who created it
//! (only that credential, or the operator's, may reach it again), its ICE-restart bucket, and
//! admission.
//!
//! Only signaling and loop events touch it (never the packet path), so a plain mutex is fine.
//! Admission reserves a slot on the least-loaded loop before the (slow) offer handling, so
//! concurrent POSTs cannot overshoot `--max-sessions` or `--max-sessions-per-ip`.
//!
//! A [`Reservation`] is a guard: it gives its slot back when dropped, unless it was committed
//! to a session. hyper drops a request's future when the client goes away, so a POST aborted
//! at any await point still returns its slot. The `voxgate_sessions_reserved` gauge is updated
//! under the same lock as the counts, so it always equals sessions plus open reservations.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;

use crate::auth::{Creator, Credential};
use crate::control::ingress::IngressChoice;
use crate::control::rate_limit::{client_key, TokenBucket, RESTARTS_PER_SESSION};
use crate::media::session::SessionId;

/// Whose call a session carries: the credential that created the call (only it, the
/// operator, and the call's resume credentials control the session), the call's id (its first
/// session's) and this session's generation in it (1 for the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOf {
    pub creator: Creator,
    pub call_id: SessionId,
    pub generation: u32,
}

/// What the index knows of a live session.
#[derive(Debug)]
struct Entry {
    loop_index: usize,
    /// The client key its per-IP count is held under.
    client: Option<IpAddr>,
    /// The relay ingress its answer advertised (`None` in direct mode).
    ingress: Option<IngressChoice>,
    /// Who created its call, and which call (and generation) it carries.
    call: CallOf,
    /// Its ICE restarts ([`RESTARTS_PER_SESSION`]).
    restarts: TokenBucket,
}

#[derive(Debug)]
struct Inner {
    sessions: HashMap<SessionId, Entry>,
    per_loop: Vec<usize>,
    /// Sessions and open reservations per client key (IPv4 address or IPv6 /64).
    per_client: HashMap<IpAddr, usize>,
    reserved: usize,
}

impl Inner {
    fn release_client(&mut self, client: Option<IpAddr>) {
        let Some(c) = client else { return };
        if let Some(n) = self.per_client.get_mut(&c) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&c);
            }
        }
    }

    fn held(&self) -> usize {
        self.sessions.len() + self.reserved
    }
}

#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    max_sessions: usize,
    /// 0 = no per-client cap.
    max_per_client: usize,
    held_gauge: Gauge,
}

/// A reserved slot on a loop. Turn it into a session with [`Registry::commit`]; dropping it
/// in any other way gives the slot back.
#[derive(Debug)]
#[must_use]
pub struct Reservation<'a> {
    pub loop_index: usize,
    client: Option<IpAddr>,
    registry: &'a Registry,
    committed: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let mut g = self.registry.lock();
        g.reserved -= 1;
        g.per_loop[self.loop_index] -= 1;
        g.release_client(self.client);
        self.registry.held_gauge.set(g.held() as i64);
    }
}

/// Why no slot was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `--max-sessions` sessions exist (or are being set up).
    AtCapacity,
    /// Every loop is past `--max-loop-busy`.
    LoopsSaturated,
    /// This client already holds `--max-sessions-per-ip` sessions.
    ClientCap,
}

impl Registry {
    pub fn new(loops: usize, max_sessions: usize, max_per_client: usize, held: Gauge) -> Self {
        held.set(0);
        Registry {
            inner: Mutex::new(Inner {
                sessions: HashMap::new(),
                per_loop: vec![0; loops],
                per_client: HashMap::new(),
                reserved: 0,
            }),
            max_sessions,
            max_per_client,
            held_gauge: held,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the maps inconsistent (single inserts
        // and removes), so recover rather than poison the control plane.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves a slot for a session of `client` on the least-loaded loop among those
    /// `has_room` accepts.
    pub fn reserve(
        &self,
        client: Option<IpAddr>,
        has_room: impl Fn(usize) -> bool,
    ) -> Result<Reservation<'_>, Refusal> {
        let client = client.map(client_key);
        let mut g = self.lock();
        if g.held() >= self.max_sessions {
            return Err(Refusal::AtCapacity);
        }
        if let Some(c) = client {
            let n = g.per_client.get(&c).copied().unwrap_or(0);
            if self.max_per_client > 0 && n >= self.max_per_client {
                return Err(Refusal::ClientCap);
            }
        }
        let loop_index = g
            .per_loop
            .iter()
            .enumerate()
            .filter(|(i, _)| has_room(*i))
            .min_by_key(|(_, n)| **n)
            .map(|(i, _)| i)
            .ok_or(Refusal::LoopsSaturated)?;
        g.per_loop[loop_index] += 1;
        g.reserved += 1;
        if let Some(c) = client {
            *g.per_client.entry(c).or_insert(0) += 1;
        }
        self.held_gauge.set(g.held() as i64);
        Ok(Reservation {
            loop_index,
            client,
            registry: self,
            committed: false,
        })
    }

    pub fn commit(
        &self,
        mut r: Reservation<'_>,
        id: SessionId,
        ingress: Option<IngressChoice>,
        call: CallOf,
    ) {
        let mut g = self.lock();
        g.reserved -= 1;
        let entry = Entry {
            loop_index: r.loop_index,
            client: r.client,
            ingress,
            call,
            restarts: TokenBucket::full(&RESTARTS_PER_SESSION, Instant::now()),
        };
        g.sessions.insert(id, entry);
        r.committed = true;
        self.held_gauge.set(g.held() as i64);
    }

    pub fn loop_of(&self, id: SessionId) -> Option<usize> {
        self.lock().sessions.get(&id).map(|e| e.loop_index)
    }

    /// Session `id`'s loop, if it exists and `caller` controls it: to anyone else a session
    /// of another creator is as unknown as one that does not exist.
    pub fn loop_for(&self, id: SessionId, caller: &Credential) -> Option<usize> {
        let g = self.lock();
        let e = g.sessions.get(&id)?;
        caller
            .controls(&e.call.creator, e.call.call_id.0)
            .then_some(e.loop_index)
    }

    /// Session `id`'s call, if it exists and `caller` controls it.
    pub fn call_of(&self, id: SessionId, caller: &Credential) -> Option<CallOf> {
        let g = self.lock();
        let e = g.sessions.get(&id)?;
        caller
            .controls(&e.call.creator, e.call.call_id.0)
            .then_some(e.call)
    }

    /// Takes an ICE restart from session `id`'s bucket at `now`; `Err` holds the wait until
    /// the next one (an unknown session has none to take).
    pub fn take_restart(&self, id: SessionId, now: Instant) -> Result<(), Duration> {
        let mut g = self.lock();
        match g.sessions.get_mut(&id) {
            Some(e) => e.restarts.take(now, &RESTARTS_PER_SESSION),
            None => Ok(()),
        }
    }

    /// The ingress session `id` was steered to (`None` if unknown or in direct mode).
    pub fn ingress_of(&self, id: SessionId) -> Option<IngressChoice> {
        self.lock().sessions.get(&id)?.ingress.clone()
    }

    /// Forgets an ended session; returns whether it was known.
    pub fn remove(&self, id: SessionId) -> bool {
        let mut g = self.lock();
        let known = match g.sessions.remove(&id) {
            Some(e) => {
                g.per_loop[e.loop_index] -= 1;
                g.release_client(e.client);
                true
            }
            None => false,
        };
        self.held_gauge.set(g.held() as i64);
        known
    }

    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sessions plus open reservations (what `voxgate_sessions_reserved` shows).
    pub fn held(&self) -> usize {
        self.lock().held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_call(creator: Creator, id: u128) -> CallOf {
        CallOf {
            creator,
            call_id: SessionId(id),
            generation: 1,
        }
    }

    fn registry(loops: usize, max: usize, per_client: usize) -> Registry {
        Registry::new(loops, max, per_client, Gauge::default())
    }

    #[test]
    fn sessions_spread_over_loops_by_load() {
        let r = registry(2, 10, 0);
        let a = r.reserve(None, |_| true).unwrap();
        let b = r.reserve(None, |_| true).unwrap();
        assert_ne!(a.loop_index, b.loop_index);
        r.commit(a, SessionId(1), None, first_call(Creator::Anyone, 1));
        r.commit(b, SessionId(2), None, first_call(Creator::Anyone, 2));
        assert_eq!(r.len(), 2);
        assert!(r.remove(SessionId(1)));
        assert!(!r.remove(SessionId(1)));
        assert_eq!(r.reserve(None, |_| true).unwrap().loop_index, 0);
    }

    #[test]
    fn reservations_count_against_capacity_and_dropping_one_gives_it_back() {
        let r = registry(1, 2, 0);
        let a = r.reserve(None, |_| true).unwrap();
        let _b = r.reserve(None, |_| true).unwrap();
        assert_eq!(r.reserve(None, |_| true).unwrap_err(), Refusal::AtCapacity);
        assert_eq!(r.held(), 2);
        drop(a);
        assert_eq!(r.held(), 1);
        assert!(r.reserve(None, |_| true).is_ok());
    }

    #[test]
    fn a_reservation_held_by_a_dropped_future_is_given_back() {
        let r = registry(1, 1, 0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let fut = async {
                let _slot = r.reserve(None, |_| true).unwrap();
                std::future::pending::<()>().await;
            };
            // Poll it once (it reserves), then drop it, as hyper does when a client leaves.
            let r2 = tokio::time::timeout(std::time::Duration::from_millis(10), fut).await;
            assert!(r2.is_err());
        });
        assert_eq!(r.held(), 0);
        assert!(r.reserve(None, |_| true).is_ok());
    }

    #[test]
    fn the_gauge_tracks_sessions_plus_reservations() {
        let g = Gauge::default();
        let r = Registry::new(1, 10, 0, g.clone());
        let a = r.reserve(None, |_| true).unwrap();
        let b = r.reserve(None, |_| true).unwrap();
        assert_eq!(g.get(), 2);
        r.commit(a, SessionId(1), None, first_call(Creator::Anyone, 1));
        assert_eq!(g.get(), 2);
        drop(b);
        assert_eq!(g.get(), 1);
        r.remove(SessionId(1));
        assert_eq!(g.get(), 0);
    }

    #[test]
    fn a_client_is_capped_and_its_slots_come_back() {
        let r = registry(1, 100, 2);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let a = r.reserve(Some(ip), |_| true).unwrap();
        r.commit(a, SessionId(1), None, first_call(Creator::Anyone, 1));
        let _b = r.reserve(Some(ip), |_| true).unwrap();
        assert_eq!(
            r.reserve(Some(ip), |_| true).unwrap_err(),
            Refusal::ClientCap
        );
        assert!(r.reserve(Some(other), |_| true).is_ok());
        r.remove(SessionId(1));
        assert!(r.reserve(Some(ip), |_| true).is_ok());
    }

    #[test]
    fn saturated_loops_are_skipped_and_all_saturated_is_refused() {
        let r = registry(3, 100, 0);
        // Loop 0 is the least loaded but saturated: the next least-loaded loop with room wins.
        let a = r.reserve(None, |i| i != 0).unwrap();
        assert_eq!(a.loop_index, 1);
        let b = r.reserve(None, |i| i != 0).unwrap();
        assert_eq!(b.loop_index, 2);
        assert_eq!(
            r.reserve(None, |_| false).unwrap_err(),
            Refusal::LoopsSaturated
        );
        // A refusal reserves nothing.
        assert_eq!(r.reserve(None, |_| true).unwrap().loop_index, 0);
    }

    #[test]
    fn a_session_is_reached_only_by_its_creator_or_the_operator() {
        use crate::auth::{CallClaims, CallTokenId};
        let r = registry(1, 10, 0);
        let call = |b: u8| {
            Credential::Call(CallClaims {
                id: CallTokenId([b; 16]),
                ..Default::default()
            })
        };
        let a = r.reserve(None, |_| true).unwrap();
        r.commit(a, SessionId(1), None, first_call(call(1).creator(), 1));
        assert_eq!(r.loop_for(SessionId(1), &call(1)), Some(0));
        assert_eq!(r.loop_for(SessionId(1), &call(2)), None);
        assert_eq!(r.loop_for(SessionId(1), &Credential::Operator), Some(0));
        assert_eq!(r.loop_for(SessionId(2), &Credential::Operator), None);
    }

    #[test]
    fn a_session_restarts_a_few_times_then_at_its_rate() {
        let r = registry(1, 10, 0);
        let a = r.reserve(None, |_| true).unwrap();
        r.commit(a, SessionId(1), None, first_call(Creator::Anyone, 1));
        let now = Instant::now();
        for _ in 0..RESTARTS_PER_SESSION.burst {
            assert!(r.take_restart(SessionId(1), now).is_ok());
        }
        let wait = r.take_restart(SessionId(1), now).unwrap_err();
        assert!(wait > Duration::from_secs(1), "{wait:?}");
        assert!(r.take_restart(SessionId(1), now + wait).is_ok());
    }
}
