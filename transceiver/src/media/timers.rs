//! The media loop's timer structure: the earliest deadline of every session.
//!
//! A binary heap of `(deadline, session key, session serial)`. A session records the one entry
//! it relies on (`Session::scheduled`); an entry that no longer matches is stale and skipped
//! when popped. A session pushes only when its deadline moves *earlier*, so the heap holds
//! O(sessions) entries rather than one per packet; a later deadline is found by waking at the
//! old one, which str0m treats as a no-op timeout.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::media::demux::SessionKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimerEntry {
    pub at: Instant,
    pub key: SessionKey,
    pub serial: u64,
}

#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<TimerEntry>>,
}

impl Timers {
    /// Schedules `deadline` if it is earlier than what `scheduled` already covers; updates
    /// `scheduled`.
    pub fn schedule(
        &mut self,
        scheduled: &mut Option<Instant>,
        deadline: Instant,
        key: SessionKey,
        serial: u64,
    ) {
        if scheduled.is_some_and(|s| s <= deadline) {
            return;
        }
        *scheduled = Some(deadline);
        self.heap.push(Reverse(TimerEntry {
            at: deadline,
            key,
            serial,
        }));
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|r| r.0.at)
    }

    /// Pops the next entry due at or before `now` (possibly stale: the caller checks).
    pub fn pop_due(&mut self, now: Instant) -> Option<TimerEntry> {
        if self.heap.peek()?.0.at <= now {
            self.heap.pop().map(|r| r.0)
        } else {
            None
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn later_deadlines_do_not_grow_the_heap() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        let mut sched = None;
        t.schedule(&mut sched, t0 + Duration::from_millis(10), 0, 1);
        for i in 11..1000 {
            t.schedule(&mut sched, t0 + Duration::from_millis(i), 0, 1);
        }
        assert_eq!(t.len(), 1);
        assert_eq!(sched, Some(t0 + Duration::from_millis(10)));
    }

    #[test]
    fn earlier_deadline_supersedes_and_pops_first() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        let mut sched = None;
        t.schedule(&mut sched, t0 + Duration::from_millis(50), 4, 9);
        t.schedule(&mut sched, t0 + Duration::from_millis(5), 4, 9);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(5)));
        assert!(t.pop_due(t0).is_none());
        let e = t.pop_due(t0 + Duration::from_millis(5)).unwrap();
        assert_eq!(e.at, sched.unwrap());
        // The 50 ms entry is now stale: it no longer matches `scheduled`.
        let stale = t.pop_due(t0 + Duration::from_millis(60)).unwrap();
        assert_ne!(Some(stale.at), sched);
    }
}
