//! The control plane's index of sessions: which loop owns which session id, and admission.
//!
//! Only signaling and loop events touch it (never the packet path), so a plain mutex is fine.
//! Admission reserves a slot on the least-loaded loop before the (slow) offer handling, so
//! concurrent POSTs cannot overshoot `--max-sessions`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::media::session::SessionId;

#[derive(Debug)]
struct Inner {
    sessions: HashMap<SessionId, usize>,
    per_loop: Vec<usize>,
    reserved: usize,
}

#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    max_sessions: usize,
}

/// A reserved slot on a loop; turn it into a session with [`Registry::commit`] or give it back
/// with [`Registry::cancel`].
#[derive(Debug)]
#[must_use]
pub struct Reservation {
    pub loop_index: usize,
}

/// Why no slot was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `--max-sessions` sessions exist (or are being set up).
    AtCapacity,
    /// Every loop is past `--max-loop-busy`.
    LoopsSaturated,
}

impl Registry {
    pub fn new(loops: usize, max_sessions: usize) -> Self {
        Registry {
            inner: Mutex::new(Inner {
                sessions: HashMap::new(),
                per_loop: vec![0; loops],
                reserved: 0,
            }),
            max_sessions,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the maps inconsistent (single inserts
        // and removes), so recover rather than poison the control plane.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves a slot on the least-loaded loop among those `has_room` accepts.
    pub fn reserve(&self, has_room: impl Fn(usize) -> bool) -> Result<Reservation, Refusal> {
        let mut g = self.lock();
        if g.sessions.len() + g.reserved >= self.max_sessions {
            return Err(Refusal::AtCapacity);
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
        Ok(Reservation { loop_index })
    }

    pub fn commit(&self, r: Reservation, id: SessionId) {
        let mut g = self.lock();
        g.reserved -= 1;
        g.sessions.insert(id, r.loop_index);
    }

    pub fn cancel(&self, r: Reservation) {
        let mut g = self.lock();
        g.reserved -= 1;
        g.per_loop[r.loop_index] -= 1;
    }

    pub fn loop_of(&self, id: SessionId) -> Option<usize> {
        self.lock().sessions.get(&id).copied()
    }

    /// Forgets an ended session; returns whether it was known.
    pub fn remove(&self, id: SessionId) -> bool {
        let mut g = self.lock();
        match g.sessions.remove(&id) {
            Some(l) => {
                g.per_loop[l] -= 1;
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_spread_over_loops_by_load() {
        let r = Registry::new(2, 10);
        let a = r.reserve(|_| true).unwrap();
        let b = r.reserve(|_| true).unwrap();
        assert_ne!(a.loop_index, b.loop_index);
        r.commit(a, SessionId(1));
        r.commit(b, SessionId(2));
        assert_eq!(r.len(), 2);
        assert!(r.remove(SessionId(1)));
        assert!(!r.remove(SessionId(1)));
        assert_eq!(r.reserve(|_| true).unwrap().loop_index, 0);
    }

    #[test]
    fn reservations_count_against_capacity() {
        let r = Registry::new(1, 2);
        let a = r.reserve(|_| true).unwrap();
        let _b = r.reserve(|_| true).unwrap();
        assert_eq!(r.reserve(|_| true).unwrap_err(), Refusal::AtCapacity);
        r.cancel(a);
        assert!(r.reserve(|_| true).is_ok());
    }

    #[test]
    fn saturated_loops_are_skipped_and_all_saturated_is_refused() {
        let r = Registry::new(3, 100);
        // Loop 0 is the least loaded but saturated: the next least-loaded loop with room wins.
        let a = r.reserve(|i| i != 0).unwrap();
        assert_eq!(a.loop_index, 1);
        let b = r.reserve(|i| i != 0).unwrap();
        assert_eq!(b.loop_index, 2);
        assert_eq!(r.reserve(|_| false).unwrap_err(), Refusal::LoopsSaturated);
        // A refusal reserves nothing.
        assert_eq!(r.reserve(|_| true).unwrap().loop_index, 0);
    }
}
