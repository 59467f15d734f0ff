//! Dispatch of sessions to backend workers: a Sans-IO state machine.
//!
//! Workers register with a capacity and report load; each new session is offered to the
//! worker with the lowest load ratio that has room. A worker accepts by attaching (a `Session`
//! stream) or declines (`Reject`, or silence past the attach timeout); a declined session is
//! offered to another worker. A session whose owner is lost (stream broken, worker gone) is
//! queued again at the front. Sessions wait in a FIFO queue while no worker has room, for at
//! most the dispatch timeout (if set); a session that exhausts its attempts or its wait ends
//! with `no_backend`. Attempts are counted afresh from each attach that held (the loop took
//! the owner, [`Dispatcher::attach_held`]): a call served until its backend's stream broke
//! gets as many offers as a new one, so a stream that one hostile message broke cannot use up
//! the attempts of the calls that were fine on it. Time comes in as `now`; actions come out of
//! [`Dispatcher::poll_action`].
//!
//! A session that resumes a call (`SessionInfo::resume`) is offered first to the worker that
//! owned the call, with or without room (the call is already its own), then to the others, as
//! many as there are; its signaling waits for the verdict ([`DispatchAction::Decided`]): taken
//! (an attach held), refused as stale (a worker serves the call at a later generation: final),
//! unknown to every worker, or no backend in time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::media::session::SessionId;

pub type WorkerId = String;

#[derive(Debug, Clone, Copy)]
pub struct DispatchConfig {
    /// A worker must attach an offered session within this time, or it counts as declined.
    pub attach_timeout: Duration,
    /// Longest wait in the queue; `None` waits forever.
    pub dispatch_timeout: Option<Duration>,
    /// Offers per session (first dispatch included) before it ends with `no_backend`.
    pub max_attempts: u32,
}

/// What a backend is told about a session when it is offered one: the signaling metadata
/// and the relay ingress the caller was steered to, with why (empty strings in direct mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// Both maps below merged, the signed entries winning (for backends that read no other).
    pub metadata: HashMap<String, String>,
    /// What the application signed into the per-call token.
    pub signed_metadata: HashMap<String, String>,
    /// What the caller sent: query parameters and `X-Voxgate-*` headers.
    pub caller_metadata: HashMap<String, String>,
    pub ingress: String,
    /// `header`, `cidr` or `default`.
    pub ingress_reason: String,
    /// The call the session carries (its own id for a new call).
    pub call_id: Option<SessionId>,
    /// Set when the session resumes a call another session carried.
    pub resume: Option<ResumeOf>,
}

/// What a resuming session continues: from its verified resume credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeOf {
    pub call_id: SessionId,
    /// The credential's generation (the session it was minted for).
    pub generation: u32,
    pub previous_session: SessionId,
    /// The worker that owned the call when the credential was minted ("" if none did yet).
    pub preferred_worker: WorkerId,
}

/// How a resume ended (what its signaling answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeVerdict {
    /// A worker attached the new session and the attach held.
    Accepted,
    /// A worker serves the call at a later generation: the credential was used already.
    Stale,
    /// Every worker offered it declined: nobody serves the call.
    Unknown,
    /// No worker decided within the dispatch policy.
    NoBackend,
}

impl ResumeVerdict {
    /// The `outcome` label of `voxgate_resume_total`.
    pub fn outcome(self) -> &'static str {
        match self {
            ResumeVerdict::Accepted => "resumed",
            ResumeVerdict::Stale => "stale",
            ResumeVerdict::Unknown => "unknown",
            ResumeVerdict::NoBackend => "no_backend",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchAction {
    /// Send `WorkerCommand.dispatch` to `worker`.
    Offer {
        worker: WorkerId,
        session: SessionId,
        /// Boxed: the metadata maps make it much larger than the other actions.
        info: Box<SessionInfo>,
        attempt: u32,
    },
    /// No backend will take the session: end it.
    End { session: SessionId },
    /// A resuming session's verdict (its signaling waits for it; anything but `Accepted`
    /// ends the session there).
    Decided {
        session: SessionId,
        verdict: ResumeVerdict,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DispatchError {
    #[error("worker id {0:?} is already registered")]
    WorkerExists(WorkerId),
    #[error("capacity must be at least 1")]
    ZeroCapacity,
    #[error("session is not known to the dispatcher")]
    UnknownSession,
    #[error("session already has an owner (use Tap to listen)")]
    AlreadyOwned,
}

#[derive(Debug)]
struct Worker {
    capacity: u32,
    reported_active: u32,
    /// Sessions offered to or owned by this worker.
    holding: HashSet<SessionId>,
}

impl Worker {
    fn active(&self) -> u32 {
        self.reported_active.max(self.holding.len() as u32)
    }

    fn has_room(&self) -> bool {
        self.active() < self.capacity
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    Queued {
        since: Instant,
    },
    Offered {
        worker: WorkerId,
        deadline: Instant,
    },
    /// Owned by a worker, or by a direct attach (`None`), through attachment `owner`.
    Owned {
        worker: Option<WorkerId>,
        owner: u64,
    },
}

#[derive(Debug)]
struct Tracked {
    stage: Stage,
    /// Offers made so far (`Dispatch.attempt` of the latest): never reset, so a late decline
    /// of an old offer stays recognisable.
    attempts: u32,
    /// `attempts` when an attach last held (the loop took the owner): the offers since count
    /// against `max_attempts`, so a call served until its backend broke gets them all again.
    attempts_before: u32,
    declined_by: Vec<WorkerId>,
    info: SessionInfo,
    /// A resume still waiting for its verdict, with its own number of offers (one per worker).
    resume_budget: Option<u32>,
}

impl Tracked {
    fn attempts_left(&self, max_attempts: u32) -> bool {
        self.attempts - self.attempts_before < self.resume_budget.unwrap_or(max_attempts)
    }

    /// The worker a pending resume goes to first, while it has not declined.
    fn preferred(&self) -> Option<&str> {
        self.resume_budget?;
        let w = self.info.resume.as_ref()?.preferred_worker.as_str();
        (!w.is_empty() && !self.declined_by.iter().any(|d| d == w)).then_some(w)
    }
}

#[derive(Debug)]
pub struct Dispatcher {
    config: DispatchConfig,
    workers: HashMap<WorkerId, Worker>,
    sessions: HashMap<SessionId, Tracked>,
    queue: VecDeque<SessionId>,
    actions: VecDeque<DispatchAction>,
}

impl Dispatcher {
    pub fn new(config: DispatchConfig) -> Self {
        Dispatcher {
            config,
            workers: HashMap::new(),
            sessions: HashMap::new(),
            queue: VecDeque::new(),
            actions: VecDeque::new(),
        }
    }

    pub fn register(&mut self, worker: &str, capacity: u32) -> Result<(), DispatchError> {
        if capacity == 0 {
            return Err(DispatchError::ZeroCapacity);
        }
        if self.workers.contains_key(worker) {
            return Err(DispatchError::WorkerExists(worker.to_string()));
        }
        self.workers.insert(
            worker.to_string(),
            Worker {
                capacity,
                reported_active: 0,
                holding: HashSet::new(),
            },
        );
        Ok(())
    }

    pub fn load(&mut self, worker: &str, active: u32, capacity: u32) {
        if let Some(w) = self.workers.get_mut(worker) {
            w.reported_active = active;
            if capacity > 0 {
                w.capacity = capacity;
            }
        }
    }

    /// A worker's subscription ended: its sessions go back to the front of the queue.
    pub fn worker_gone(&mut self, now: Instant, worker: &str) {
        let Some(w) = self.workers.remove(worker) else {
            return;
        };
        for id in w.holding {
            self.requeue_front(now, id, Some(worker));
        }
    }

    pub fn new_session(&mut self, now: Instant, id: SessionId, info: SessionInfo) {
        let resume_budget = info.resume.as_ref().map(|_| {
            let workers = u32::try_from(self.workers.len()).unwrap_or(u32::MAX);
            self.config.max_attempts.max(workers.saturating_add(1))
        });
        self.sessions.insert(
            id,
            Tracked {
                stage: Stage::Queued { since: now },
                attempts: 0,
                attempts_before: 0,
                declined_by: Vec::new(),
                info,
                resume_budget,
            },
        );
        self.queue.push_back(id);
    }

    /// `worker` declined offer number `attempt` of session `id` (0: whichever offer is open).
    /// A decline of an earlier offer is stale and changes nothing: a worker can decline an offer
    /// it learned was lost (its stream broke) after the attach timeout already made a new one.
    /// `stale_resume`: the worker serves the call at a later generation; a pending resume ends
    /// there (no other worker is asked).
    pub fn rejected(
        &mut self,
        now: Instant,
        id: SessionId,
        worker: &str,
        attempt: u32,
        stale_resume: bool,
    ) {
        let Some(t) = self.sessions.get(&id) else {
            return;
        };
        let offered_here = matches!(&t.stage, Stage::Offered { worker: w, .. } if w == worker)
            && (attempt == 0 || attempt == t.attempts);
        if !offered_here {
            return;
        }
        let resuming = t.resume_budget.is_some();
        self.release(id, worker);
        if stale_resume && resuming {
            self.sessions.remove(&id);
            self.actions.push_back(DispatchAction::Decided {
                session: id,
                verdict: ResumeVerdict::Stale,
            });
            return;
        }
        self.requeue_front(now, id, Some(worker));
    }

    /// A `Session` stream attached. `worker` is the attaching worker's id, if any; `owner`
    /// names the attachment.
    pub fn attached(
        &mut self,
        id: SessionId,
        worker: Option<&str>,
        owner: u64,
    ) -> Result<(), DispatchError> {
        let t = self
            .sessions
            .get_mut(&id)
            .ok_or(DispatchError::UnknownSession)?;
        let previous = match &t.stage {
            Stage::Owned { .. } => return Err(DispatchError::AlreadyOwned),
            Stage::Offered { worker, .. } => Some(worker.clone()),
            Stage::Queued { .. } => None,
        };
        let owner_worker = worker
            .filter(|w| self.workers.contains_key(*w))
            .map(str::to_string);
        t.stage = Stage::Owned {
            worker: owner_worker.clone(),
            owner,
        };
        self.queue.retain(|q| *q != id);
        if let Some(p) = previous {
            if owner_worker.as_deref() != Some(p.as_str()) {
                self.release(id, &p);
            }
        }
        if let Some(w) = owner_worker.and_then(|o| self.workers.get_mut(&o)) {
            w.holding.insert(id);
        }
        Ok(())
    }

    /// Attachment `owner` of the session holds: its loop took the owner's queues. From here
    /// the session has a full `max_attempts` again should it lose this owner, and the workers
    /// that declined it before are forgotten. A confirmation of an earlier owner (the session
    /// has moved on since) changes nothing.
    pub fn attach_held(&mut self, id: SessionId, owner: u64) {
        if let Some(t) = self.sessions.get_mut(&id) {
            if matches!(t.stage, Stage::Owned { owner: o, .. } if o == owner) {
                t.attempts_before = t.attempts;
                t.declined_by.clear();
                if t.resume_budget.take().is_some() {
                    // Taken: should the session need a backend again, it is offered as the call
                    // it now is, not as a resume (the worker serves it at this generation).
                    t.info.resume = None;
                    self.actions.push_back(DispatchAction::Decided {
                        session: id,
                        verdict: ResumeVerdict::Accepted,
                    });
                }
            }
        }
    }

    /// Attachment `owner` of the session broke before the session ended: dispatch it again.
    /// A report about an earlier owner (the session has moved on since) changes nothing.
    /// Returns whether the session was queued again.
    pub fn owner_lost(&mut self, now: Instant, id: SessionId, lost: u64) -> bool {
        let owner = match self.sessions.get(&id).map(|t| &t.stage) {
            Some(Stage::Owned { worker, owner }) if *owner == lost => worker.clone(),
            _ => return false,
        };
        if let Some(w) = &owner {
            self.release(id, w);
        }
        self.requeue_front(now, id, owner.as_deref());
        true
    }

    pub fn session_ended(&mut self, id: SessionId) {
        if let Some(t) = self.sessions.remove(&id) {
            match t.stage {
                Stage::Offered { worker, .. }
                | Stage::Owned {
                    worker: Some(worker),
                    ..
                } => self.release(id, &worker),
                _ => {}
            }
        }
        self.queue.retain(|q| *q != id);
    }

    /// Is there a worker with room (for `--require-backend` admission)?
    pub fn has_room(&self) -> bool {
        let waiting = self.queue.len() as u64;
        let room: u64 = self
            .workers
            .values()
            .map(|w| u64::from(w.capacity.saturating_sub(w.active())))
            .sum();
        room > waiting
    }

    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Which worker holds (was offered or owns) `id`.
    pub fn holder(&self, id: SessionId) -> Option<&str> {
        match &self.sessions.get(&id)?.stage {
            Stage::Offered { worker, .. } => Some(worker),
            Stage::Owned { worker, .. } => worker.as_deref(),
            Stage::Queued { .. } => None,
        }
    }

    fn release(&mut self, id: SessionId, worker: &str) {
        if let Some(w) = self.workers.get_mut(worker) {
            w.holding.remove(&id);
        }
    }

    fn requeue_front(&mut self, now: Instant, id: SessionId, declined_by: Option<&str>) {
        let Some(t) = self.sessions.get_mut(&id) else {
            return;
        };
        if let Some(w) = declined_by {
            t.declined_by.push(w.to_string());
        }
        t.stage = Stage::Queued { since: now };
        if !t.attempts_left(self.config.max_attempts) {
            let action = match t.resume_budget {
                Some(_) => DispatchAction::Decided {
                    session: id,
                    verdict: ResumeVerdict::Unknown,
                },
                None => DispatchAction::End { session: id },
            };
            self.actions.push_back(action);
            self.sessions.remove(&id);
            return;
        }
        self.queue.push_front(id);
    }

    /// Runs timeouts and assignments; returns the next action to carry out.
    pub fn poll_action(&mut self, now: Instant) -> Option<DispatchAction> {
        if let Some(a) = self.actions.pop_front() {
            return Some(a);
        }
        self.expire(now);
        self.assign(now);
        self.actions.pop_front()
    }

    fn expire(&mut self, now: Instant) {
        let late: Vec<(SessionId, WorkerId)> = self
            .sessions
            .iter()
            .filter_map(|(id, t)| match &t.stage {
                Stage::Offered { worker, deadline } if *deadline <= now => {
                    Some((*id, worker.clone()))
                }
                _ => None,
            })
            .collect();
        for (id, worker) in late {
            self.release(id, &worker);
            self.requeue_front(now, id, Some(&worker));
        }
        if let Some(limit) = self.config.dispatch_timeout {
            let expired: Vec<SessionId> = self
                .queue
                .iter()
                .copied()
                .filter(|id| {
                    matches!(self.sessions.get(id).map(|t| &t.stage),
                        Some(Stage::Queued { since }) if now.duration_since(*since) >= limit)
                })
                .collect();
            for id in expired {
                self.queue.retain(|q| *q != id);
                let resuming = self
                    .sessions
                    .remove(&id)
                    .is_some_and(|t| t.resume_budget.is_some());
                self.actions.push_back(if resuming {
                    DispatchAction::Decided {
                        session: id,
                        verdict: ResumeVerdict::NoBackend,
                    }
                } else {
                    DispatchAction::End { session: id }
                });
            }
        }
    }

    fn assign(&mut self, now: Instant) {
        let mut skipped = VecDeque::new();
        while let Some(id) = self.queue.pop_front() {
            let Some(t) = self.sessions.get(&id) else {
                continue;
            };
            // Prefer workers that have not declined this session; if every worker with room
            // has, try them again (attempts still bound the total).
            let pick = |skip_declined: bool| {
                self.workers
                    .iter()
                    .filter(|(wid, w)| {
                        w.has_room() && !(skip_declined && t.declined_by.contains(*wid))
                    })
                    .min_by(|(an, a), (bn, b)| {
                        // Lowest load ratio; ties by fewer sessions, then id (deterministic).
                        let ra = u64::from(a.active()) * u64::from(b.capacity);
                        let rb = u64::from(b.active()) * u64::from(a.capacity);
                        ra.cmp(&rb)
                            .then(a.active().cmp(&b.active()))
                            .then(an.cmp(bn))
                    })
                    .map(|(wid, _)| wid.clone())
            };
            // A resume goes to the call's worker first, room or not: the call is its own.
            let preferred = t
                .preferred()
                .filter(|w| self.workers.contains_key(*w))
                .map(str::to_string);
            let fresh = preferred.or_else(|| pick(true));
            if fresh.is_none() && t.resume_budget.is_some() && pick(false).is_some() {
                // Every worker with room declined the resume: nobody here serves the call.
                self.sessions.remove(&id);
                self.actions.push_back(DispatchAction::Decided {
                    session: id,
                    verdict: ResumeVerdict::Unknown,
                });
                continue;
            }
            let best = fresh.or_else(|| pick(false));
            let Some(worker) = best else {
                // No worker has room: keep FIFO order and wait for capacity.
                skipped.push_back(id);
                break;
            };
            let Some(t) = self.sessions.get_mut(&id) else {
                continue;
            };
            t.attempts += 1;
            t.stage = Stage::Offered {
                worker: worker.clone(),
                deadline: now + self.config.attach_timeout,
            };
            let action = DispatchAction::Offer {
                worker: worker.clone(),
                session: id,
                info: Box::new(t.info.clone()),
                attempt: t.attempts,
            };
            if let Some(w) = self.workers.get_mut(&worker) {
                w.holding.insert(id);
            }
            self.actions.push_back(action);
        }
        while let Some(id) = skipped.pop_back() {
            self.queue.push_front(id);
        }
    }

    /// When `poll_action` must run next for timeouts.
    pub fn next_deadline(&self) -> Option<Instant> {
        let offers = self.sessions.values().filter_map(|t| match &t.stage {
            Stage::Offered { deadline, .. } => Some(*deadline),
            _ => None,
        });
        let waits = self.config.dispatch_timeout.and_then(|limit| {
            self.queue
                .iter()
                .filter_map(|id| match self.sessions.get(id).map(|t| &t.stage) {
                    Some(Stage::Queued { since }) => Some(*since + limit),
                    _ => None,
                })
                .min()
        });
        offers.chain(waits).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DispatchConfig {
        DispatchConfig {
            attach_timeout: Duration::from_secs(2),
            dispatch_timeout: Some(Duration::from_secs(10)),
            max_attempts: 3,
        }
    }

    fn drain(d: &mut Dispatcher, now: Instant) -> Vec<DispatchAction> {
        std::iter::from_fn(|| d.poll_action(now)).collect()
    }

    fn offered_to(actions: &[DispatchAction]) -> Vec<(SessionId, String)> {
        actions
            .iter()
            .filter_map(|a| match a {
                DispatchAction::Offer {
                    worker, session, ..
                } => Some((*session, worker.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn six_sessions_spread_over_three_workers_by_load_and_the_seventh_waits() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        for w in ["a", "b", "c"] {
            d.register(w, 2).unwrap();
        }
        for i in 0..7 {
            d.new_session(t0, SessionId(i), SessionInfo::default());
        }
        let offers = offered_to(&drain(&mut d, t0));
        assert_eq!(offers.len(), 6);
        for w in ["a", "b", "c"] {
            assert_eq!(
                offers.iter().filter(|(_, x)| x == w).count(),
                2,
                "{offers:?}"
            );
        }
        // Round robin by load: the first three go to three different workers.
        let first: HashSet<_> = offers[..3].iter().map(|(_, w)| w.clone()).collect();
        assert_eq!(first.len(), 3);
        assert_eq!(d.queued(), 1, "the 7th waits");
        assert!(!d.has_room());
        for (s, w) in &offers {
            d.attached(*s, Some(w), 1).unwrap();
        }
        // A session ends: the waiting one is offered the freed slot.
        d.session_ended(offers[0].0);
        let next = offered_to(&drain(&mut d, t0));
        assert_eq!(next, vec![(SessionId(6), offers[0].1.clone())]);
    }

    #[test]
    fn lost_worker_sessions_are_redispatched_to_others_with_their_info() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("a", 2).unwrap();
        d.register("b", 2).unwrap();
        let info = SessionInfo {
            metadata: HashMap::from([("lang".to_string(), "en".to_string())]),
            ingress: "eu".into(),
            ingress_reason: "header".into(),
            ..Default::default()
        };
        d.new_session(t0, SessionId(1), info.clone());
        let offers = offered_to(&drain(&mut d, t0));
        let first = offers[0].1.clone();
        d.attached(SessionId(1), Some(&first), 1).unwrap();
        d.worker_gone(t0, &first);
        let again = drain(&mut d, t0);
        let other = if first == "a" { "b" } else { "a" };
        assert_eq!(
            again,
            vec![DispatchAction::Offer {
                worker: other.to_string(),
                session: SessionId(1),
                info: Box::new(info),
                attempt: 2
            }]
        );
    }

    #[test]
    fn a_late_loss_report_of_an_earlier_owner_does_not_move_the_new_one() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("a", 2).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        drain(&mut d, t0);
        d.attached(SessionId(1), Some("a"), 10).unwrap();
        d.worker_gone(t0, "a");
        d.register("b", 2).unwrap();
        let o = offered_to(&drain(&mut d, t0));
        assert_eq!(o, vec![(SessionId(1), "b".to_string())]);
        d.attached(SessionId(1), Some("b"), 11).unwrap();
        // a's stream closing is reported only now: b keeps the session.
        assert!(!d.owner_lost(t0, SessionId(1), 10));
        assert_eq!(d.holder(SessionId(1)), Some("b"));
        assert!(drain(&mut d, t0).is_empty());
        // b's own loss does move it.
        assert!(d.owner_lost(t0, SessionId(1), 11));
        assert_eq!(d.queued(), 1);
    }

    #[test]
    fn silent_or_rejecting_workers_exhaust_attempts_and_end_the_session() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(DispatchConfig {
            max_attempts: 2,
            ..cfg()
        });
        d.register("a", 5).unwrap();
        d.register("b", 5).unwrap();
        d.new_session(t0, SessionId(9), SessionInfo::default());
        let o = offered_to(&drain(&mut d, t0));
        d.rejected(t0, SessionId(9), &o[0].1, 1, false);
        let o2 = offered_to(&drain(&mut d, t0));
        assert_ne!(
            o2[0].1, o[0].1,
            "not offered again to the worker that declined"
        );
        // The second worker never attaches: after the attach timeout, attempts are used up.
        let late = t0 + Duration::from_secs(3);
        assert_eq!(
            drain(&mut d, late),
            vec![DispatchAction::End {
                session: SessionId(9)
            }]
        );
    }

    #[test]
    fn a_lone_worker_that_declined_is_asked_again_until_attempts_run_out() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("only", 5).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        for attempt in 1..=3 {
            let o = drain(&mut d, t0);
            assert_eq!(
                offered_to(&o),
                vec![(SessionId(1), "only".to_string())],
                "{attempt}"
            );
            d.rejected(t0, SessionId(1), "only", attempt, false);
        }
        assert_eq!(
            drain(&mut d, t0),
            vec![DispatchAction::End {
                session: SessionId(1)
            }]
        );
    }

    #[test]
    fn a_decline_of_an_earlier_offer_leaves_the_open_one_alone() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("only", 5).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        assert_eq!(offered_to(&drain(&mut d, t0)).len(), 1);
        // Attempt 1 goes unanswered past the attach timeout: attempt 2 is offered.
        let late = t0 + Duration::from_secs(3);
        let again = drain(&mut d, late);
        assert!(
            matches!(again.as_slice(), [DispatchAction::Offer { attempt: 2, .. }]),
            "{again:?}"
        );
        // The worker's decline of attempt 1 arrives only now: attempt 2 stays open.
        d.rejected(late, SessionId(1), "only", 1, false);
        assert_eq!(drain(&mut d, late), vec![], "no new offer");
        d.attached(SessionId(1), Some("only"), 7).unwrap();
        // A decline that names no attempt (a worker older than the field) still acts.
        d.new_session(late, SessionId(2), SessionInfo::default());
        assert_eq!(offered_to(&drain(&mut d, late)).len(), 1);
        d.rejected(late, SessionId(2), "only", 0, false);
        let second = drain(&mut d, late);
        assert!(
            matches!(
                second.as_slice(),
                [DispatchAction::Offer { attempt: 2, .. }]
            ),
            "{second:?}"
        );
    }

    #[test]
    fn queued_session_ends_after_the_dispatch_timeout() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.new_session(t0, SessionId(1), SessionInfo::default());
        assert!(drain(&mut d, t0).is_empty());
        assert_eq!(d.next_deadline(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(
            drain(&mut d, t0 + Duration::from_secs(10)),
            vec![DispatchAction::End {
                session: SessionId(1)
            }]
        );
    }

    #[test]
    fn direct_attach_takes_a_queued_session_and_a_second_owner_is_refused() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.new_session(t0, SessionId(1), SessionInfo::default());
        d.attached(SessionId(1), None, 1).unwrap();
        assert_eq!(d.queued(), 0);
        assert_eq!(
            d.attached(SessionId(1), None, 2),
            Err(DispatchError::AlreadyOwned)
        );
        assert_eq!(
            d.attached(SessionId(2), None, 3),
            Err(DispatchError::UnknownSession)
        );
    }

    #[test]
    fn a_session_that_held_an_attach_gets_its_full_attempts_after_each_loss() {
        // Issue 37: a backend's stream broke twice (each break also cost a decline of an offer
        // its dead stream could not attach): with attempts never reset, the third loss ended a
        // call that had been served all along.
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("a", 5).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        let mut owner = 0;
        for round in 0..5 {
            // Every offer but the last of the round is declined: max_attempts - 1 of them.
            for _ in 1..cfg().max_attempts {
                let o = drain(&mut d, t0);
                assert!(
                    matches!(o.as_slice(), [DispatchAction::Offer { .. }]),
                    "round {round}: {o:?}"
                );
                d.rejected(t0, SessionId(1), "a", 0, false);
            }
            let o = drain(&mut d, t0);
            assert!(
                matches!(o.as_slice(), [DispatchAction::Offer { .. }]),
                "round {round}: the last attempt is offered: {o:?}"
            );
            owner += 1;
            d.attached(SessionId(1), Some("a"), owner).unwrap();
            d.attach_held(SessionId(1), owner);
            assert!(d.owner_lost(t0, SessionId(1), owner));
        }
        // Offer numbers keep counting: a late decline of an old offer stays recognisable.
        let o = drain(&mut d, t0);
        assert!(
            matches!(o.as_slice(), [DispatchAction::Offer { attempt: 16, .. }]),
            "{o:?}"
        );
    }

    #[test]
    fn an_attach_the_loop_never_took_does_not_renew_the_attempts() {
        // Approved by the dispatcher, refused by the loop: the owner is lost at once, and a
        // backend failing that way every time must still run the session out of attempts.
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("a", 5).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        for owner in 1..=3 {
            let o = drain(&mut d, t0);
            assert!(
                matches!(o.as_slice(), [DispatchAction::Offer { .. }]),
                "{o:?}"
            );
            d.attached(SessionId(1), Some("a"), owner).unwrap();
            d.owner_lost(t0, SessionId(1), owner);
        }
        assert_eq!(
            drain(&mut d, t0),
            vec![DispatchAction::End {
                session: SessionId(1)
            }]
        );
        // A confirmation of an owner that is not the current one changes nothing.
        d.new_session(t0, SessionId(2), SessionInfo::default());
        drain(&mut d, t0);
        d.attached(SessionId(2), Some("a"), 9).unwrap();
        d.attach_held(SessionId(2), 8);
        assert!(d.owner_lost(t0, SessionId(2), 9));
    }

    #[test]
    fn duplicate_worker_ids_and_zero_capacity_are_refused() {
        let mut d = Dispatcher::new(cfg());
        d.register("a", 1).unwrap();
        assert!(matches!(
            d.register("a", 1),
            Err(DispatchError::WorkerExists(_))
        ));
        assert_eq!(d.register("b", 0), Err(DispatchError::ZeroCapacity));
    }

    #[test]
    fn reported_load_steers_dispatch() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("busy", 10).unwrap();
        d.register("idle", 10).unwrap();
        d.load("busy", 9, 0);
        d.new_session(t0, SessionId(1), SessionInfo::default());
        let o = offered_to(&drain(&mut d, t0));
        assert_eq!(o[0].1, "idle");
    }

    fn resume_info(preferred: &str) -> SessionInfo {
        SessionInfo {
            call_id: Some(SessionId(77)),
            resume: Some(ResumeOf {
                call_id: SessionId(77),
                generation: 1,
                previous_session: SessionId(77),
                preferred_worker: preferred.into(),
            }),
            ..SessionInfo::default()
        }
    }

    fn verdicts(actions: &[DispatchAction]) -> Vec<(SessionId, ResumeVerdict)> {
        actions
            .iter()
            .filter_map(|a| match a {
                DispatchAction::Decided { session, verdict } => Some((*session, *verdict)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_resume_goes_to_the_calls_worker_first_even_when_it_is_full() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("owner", 1).unwrap();
        d.register("idle", 10).unwrap();
        d.load("owner", 1, 0);
        d.new_session(t0, SessionId(1), resume_info("owner"));
        let a = drain(&mut d, t0);
        assert_eq!(offered_to(&a), vec![(SessionId(1), "owner".to_string())]);
        d.attached(SessionId(1), Some("owner"), 5).unwrap();
        assert!(
            verdicts(&drain(&mut d, t0)).is_empty(),
            "not before it held"
        );
        d.attach_held(SessionId(1), 5);
        assert_eq!(
            verdicts(&drain(&mut d, t0)),
            vec![(SessionId(1), ResumeVerdict::Accepted)]
        );
        // Decided once: the session is an ordinary owned one from here.
        d.attach_held(SessionId(1), 5);
        assert!(drain(&mut d, t0).is_empty());
    }

    #[test]
    fn a_stale_decline_ends_a_resume_at_once_and_asks_nobody_else() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("owner", 4).unwrap();
        d.register("other", 4).unwrap();
        d.new_session(t0, SessionId(1), resume_info("owner"));
        drain(&mut d, t0);
        d.rejected(t0, SessionId(1), "owner", 1, true);
        let a = drain(&mut d, t0);
        assert_eq!(verdicts(&a), vec![(SessionId(1), ResumeVerdict::Stale)]);
        assert!(offered_to(&a).is_empty(), "{a:?}");
        assert_eq!(d.holder(SessionId(1)), None);
    }

    #[test]
    fn a_resume_nobody_knows_is_offered_to_every_worker_then_unknown() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        for w in ["a", "b", "c", "d"] {
            d.register(w, 4).unwrap();
        }
        // The owner is not registered here: any worker may serve the call.
        d.new_session(t0, SessionId(1), resume_info("gone"));
        let mut asked = Vec::new();
        loop {
            let a = drain(&mut d, t0);
            if let Some(v) = verdicts(&a).first() {
                assert_eq!(*v, (SessionId(1), ResumeVerdict::Unknown));
                break;
            }
            let (_, w) = offered_to(&a).pop().expect("an offer");
            asked.push(w.clone());
            d.rejected(t0, SessionId(1), &w, 0, false);
        }
        asked.sort();
        // More workers than --max-dispatch-attempts (3): each is asked once.
        assert_eq!(asked, ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_stale_flag_on_an_ordinary_session_is_an_ordinary_decline() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.register("a", 4).unwrap();
        d.register("b", 4).unwrap();
        d.new_session(t0, SessionId(1), SessionInfo::default());
        let (_, w) = offered_to(&drain(&mut d, t0)).pop().unwrap();
        d.rejected(t0, SessionId(1), &w, 0, true);
        let a = drain(&mut d, t0);
        assert!(verdicts(&a).is_empty());
        assert_eq!(offered_to(&a).len(), 1, "offered to the other worker");
    }

    #[test]
    fn a_resume_that_waits_out_the_dispatch_timeout_has_no_backend() {
        let t0 = Instant::now();
        let mut d = Dispatcher::new(cfg());
        d.new_session(t0, SessionId(1), resume_info(""));
        assert!(drain(&mut d, t0).is_empty());
        let a = drain(&mut d, t0 + Duration::from_secs(10));
        assert_eq!(verdicts(&a), vec![(SessionId(1), ResumeVerdict::NoBackend)]);
    }
}
