//! Which resume credentials this transceiver has resumed a call with: one (call, generation)
//! resumes at most once here, however many credentials were minted for it (the session
//! refreshes its credential while it lives) and however often one is presented. Sans-IO: the
//! caller passes the Unix time.
//!
//! A (call, generation) is taken when a resume POST starts, so two concurrent resumes of one
//! credential cannot both pass, and given back only if the POST failed in a way that lets the
//! caller retry (admission refused it, no backend answered in time); a resume the backend
//! refused or accepted stays taken until the credential expires (after that it fails its
//! `exp` anyway). Across transceivers the backend decides (it accepts a resume only at the
//! generation it serves the call at); this table answers a replay here at once, without asking
//! it. Memory is bounded like [`super::token_uses`]: when full, expired entries are swept out
//! (at most once a second); if it is still full, resumes are refused (fail closed).

use std::collections::HashMap;

/// Most (call, generation) pairs remembered at once by default.
pub const MAX_RESUMES: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResumeRefused {
    #[error("this resume credential was used already")]
    Replayed,
    #[error("too many resumes are in progress on this transceiver")]
    Full,
}

impl ResumeRefused {
    /// The `outcome` label of `voxgate_resume_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            ResumeRefused::Replayed => "replayed",
            ResumeRefused::Full => "table_full",
        }
    }
}

#[derive(Debug)]
pub struct ResumeUses {
    /// (call id, generation) → when the credential (the longest-lived one seen) expires.
    entries: HashMap<(u128, u32), u64>,
    max: usize,
    last_sweep: Option<u64>,
}

impl Default for ResumeUses {
    fn default() -> Self {
        ResumeUses::new(MAX_RESUMES)
    }
}

impl ResumeUses {
    pub fn new(max: usize) -> Self {
        ResumeUses {
            entries: HashMap::new(),
            max,
            last_sweep: None,
        }
    }

    /// Takes (call, generation) for a resume starting at Unix time `now`.
    pub fn take(
        &mut self,
        call: u128,
        generation: u32,
        expires_at: u64,
        now: u64,
    ) -> Result<(), ResumeRefused> {
        if let Some(exp) = self.entries.get(&(call, generation)) {
            if *exp > now {
                return Err(ResumeRefused::Replayed);
            }
        }
        if self.entries.len() >= self.max {
            self.sweep(now);
            if self.entries.len() >= self.max {
                return Err(ResumeRefused::Full);
            }
        }
        self.entries.insert((call, generation), expires_at);
        Ok(())
    }

    /// Gives back a pair taken by a resume the caller may retry.
    pub fn give_back(&mut self, call: u128, generation: u32) {
        self.entries.remove(&(call, generation));
    }

    fn sweep(&mut self, now: u64) {
        if self.last_sweep == Some(now) {
            return;
        }
        self.last_sweep = Some(now);
        self.entries.retain(|_, exp| *exp > now);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_resumes_once_until_given_back() {
        let mut u = ResumeUses::default();
        assert_eq!(u.take(1, 1, 100, 0), Ok(()));
        assert_eq!(u.take(1, 1, 100, 5), Err(ResumeRefused::Replayed));
        // Another generation of the same call, and another call, are other pairs.
        assert_eq!(u.take(1, 2, 100, 5), Ok(()));
        assert_eq!(u.take(2, 1, 100, 5), Ok(()));
        u.give_back(1, 1);
        assert_eq!(u.take(1, 1, 100, 6), Ok(()));
    }

    #[test]
    fn a_full_table_sweeps_expired_pairs_and_then_fails_closed() {
        let mut u = ResumeUses::new(2);
        u.take(1, 1, 10, 0).unwrap();
        u.take(2, 1, 50, 0).unwrap();
        assert_eq!(u.take(3, 1, 50, 5), Err(ResumeRefused::Full));
        // At 11 the first has expired: swept, room for one more.
        assert_eq!(u.take(3, 1, 50, 11), Ok(()));
        assert_eq!(u.take(4, 1, 50, 12), Err(ResumeRefused::Full));
        assert_eq!(u.len(), 2);
    }

    #[test]
    fn an_expired_pair_may_be_taken_again() {
        // Its credential fails `exp` by then anyway; this keeps a stale entry from blocking.
        let mut u = ResumeUses::default();
        u.take(1, 1, 10, 0).unwrap();
        assert_eq!(u.take(1, 1, 20, 10), Ok(()));
    }
}
