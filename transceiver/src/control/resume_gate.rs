//! The control plane's side of a resume (docs/continuity.md): which call a new session
//! carries, taking a resume credential's (call, generation) so it resumes once here, and
//! waiting for the backend's verdict. The plane owns a [`ResumeGate`]; nothing here knows the
//! plane.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;

use crate::auth::resume_uses::{ResumeRefused, ResumeUses};
use crate::auth::{Credential, ResumeClaims};
use crate::backend::dispatch::{ResumeOf, ResumeVerdict};
use crate::control::control_error::ResumeFailure;
use crate::control::registry::CallOf;
use crate::media::session::SessionId;

/// Longest a resume POST waits for a backend to take the call. The call's worker answers in
/// a round trip; this bounds a backend that says nothing (the POST then answers 503 and the
/// client may retry with the same credential).
pub const RESUME_VERDICT_TIMEOUT: Duration = Duration::from_secs(10);

/// The call new session `id` carries: its own, or for a resume credential the credential's
/// call at the next generation, created by whoever created the call.
pub fn new_call(id: SessionId, credential: &Credential) -> CallOf {
    let resume = match credential {
        Credential::Resume(r) => Some(r),
        _ => None,
    };
    CallOf {
        creator: credential.creator(),
        call_id: resume.map_or(id, |r| SessionId(r.call_id)),
        generation: resume.map_or(1, |r| r.generation.saturating_add(1)),
    }
}

/// What the dispatcher is told a resuming session continues.
pub fn resume_of(call: CallOf, claims: &ResumeClaims) -> ResumeOf {
    ResumeOf {
        call_id: call.call_id,
        generation: claims.generation,
        previous_session: SessionId(claims.session_id),
        preferred_worker: claims.worker.clone(),
    }
}

/// The (call, generation) pairs resumed here.
#[derive(Debug, Default)]
pub struct ResumeGate {
    /// Held for one update at a time.
    uses: Mutex<ResumeUses>,
}

/// A (call, generation) taken for a resume in progress: given back when dropped, unless the
/// resume reached a final verdict.
#[derive(Debug)]
pub struct ResumeUse<'a> {
    uses: &'a Mutex<ResumeUses>,
    key: (u128, u32),
    kept: bool,
}

impl Drop for ResumeUse<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.uses
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .give_back(self.key.0, self.key.1);
        }
    }
}

impl ResumeGate {
    /// For a resume credential, its claims and their (call, generation) taken: a second
    /// resume with it here is refused at once. Other credentials pass with nothing taken.
    pub fn take<'a>(
        &'a self,
        credential: &'a Credential,
    ) -> Result<(Option<&'a ResumeClaims>, Option<ResumeUse<'a>>), ResumeFailure> {
        let Credential::Resume(claims) = credential else {
            return Ok((None, None));
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.uses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(claims.call_id, claims.generation, claims.expires_at, now)
            .map_err(|e| match e {
                ResumeRefused::Replayed => ResumeFailure::Replayed,
                ResumeRefused::Full => ResumeFailure::TableFull,
            })?;
        let taken = ResumeUse {
            uses: &self.uses,
            key: (claims.call_id, claims.generation),
            kept: false,
        };
        Ok((Some(claims), Some(taken)))
    }
}

/// Waits (at most [`RESUME_VERDICT_TIMEOUT`]) for the backend's verdict on a resume. A refusal
/// that is final (used already, nobody serves the call) keeps the credential spent; one the
/// caller may retry (no backend in time) gives it back.
pub async fn settle(
    verdict: oneshot::Receiver<ResumeVerdict>,
    mut taken: ResumeUse<'_>,
) -> Result<(), ResumeFailure> {
    let verdict = match tokio::time::timeout(RESUME_VERDICT_TIMEOUT, verdict).await {
        Ok(Ok(v)) => v,
        // Timed out, or the session ended before a verdict (the dispatcher dropped it).
        Ok(Err(_)) | Err(_) => ResumeVerdict::NoBackend,
    };
    let result = match verdict {
        ResumeVerdict::Accepted => Ok(()),
        ResumeVerdict::Stale => Err(ResumeFailure::Stale),
        ResumeVerdict::Unknown => Err(ResumeFailure::Unknown),
        ResumeVerdict::NoBackend => Err(ResumeFailure::NoBackend),
    };
    taken.kept = result != Err(ResumeFailure::NoBackend);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Creator;

    fn credential(call_id: u128, generation: u32) -> Credential {
        Credential::Resume(ResumeClaims {
            call_id,
            generation,
            session_id: 9,
            worker: "w".into(),
            creator: Creator::Operator,
            expires_at: u64::MAX / 2,
        })
    }

    #[test]
    fn a_resume_carries_its_call_at_the_next_generation() {
        let call = new_call(SessionId(5), &credential(1, 3));
        assert_eq!(call.call_id, SessionId(1));
        assert_eq!(call.generation, 4);
        assert_eq!(call.creator, Creator::Operator);
        let fresh = new_call(SessionId(5), &Credential::Open);
        assert_eq!((fresh.call_id, fresh.generation), (SessionId(5), 1));
    }

    #[tokio::test]
    async fn a_final_verdict_spends_the_credential_and_a_timeout_gives_it_back() {
        let gate = ResumeGate::default();
        let c = credential(1, 1);
        for (verdict, spent) in [
            (ResumeVerdict::Accepted, true),
            (ResumeVerdict::Stale, true),
            (ResumeVerdict::Unknown, true),
            (ResumeVerdict::NoBackend, false),
        ] {
            let (_, taken) = gate.take(&c).unwrap();
            assert_eq!(
                gate.take(&c).unwrap_err(),
                ResumeFailure::Replayed,
                "taken while in progress"
            );
            let (tx, rx) = oneshot::channel();
            tx.send(verdict).unwrap();
            let _ = settle(rx, taken.unwrap()).await;
            assert_eq!(gate.take(&c).is_err(), spent, "{verdict:?}");
            gate.uses.lock().unwrap().give_back(1, 1);
        }
        // A POST that went away (its future dropped) gives the pair back too.
        drop(gate.take(&c).unwrap());
        assert!(gate.take(&c).is_ok());
    }
}
