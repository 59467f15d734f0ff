//! How many sessions each per-call token has created: a token creates at most its `uses`
//! (one unless the minter said more), however often it is presented. Sans-IO: the caller
//! passes the Unix time.
//!
//! A token is remembered from its first session until it expires (after that it fails its
//! `exp` anyway), so the table holds only live tokens, whose lifetime is capped
//! ([`super::call_token::MAX_LIFETIME_SECS`]). Memory is bounded: at most `max_tokens`
//! entries. When the table is full, expired entries are swept out (at most once a second);
//! if it is still full, new tokens are refused rather than old ones forgotten, since
//! forgetting would let a spent token create sessions again (fail closed). A use is taken
//! when a POST starts and given back if it creates no session, so a caller whose POST was
//! refused (503, a bad offer) may retry with the same token, and two concurrent POSTs of one
//! token cannot both pass.

use std::collections::HashMap;
use std::sync::Mutex;

use super::call_token::{CallClaims, CallTokenId};

/// Most tokens remembered at once by default (a few MiB at most).
pub const MAX_TOKENS: usize = 200_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UseRefused {
    #[error("this per-call token has already created {0} session(s), all it may")]
    Spent(u32),
    #[error(
        "too many per-call tokens are in use on this transceiver; mint tokens with a shorter \
         lifetime"
    )]
    Full,
}

impl UseRefused {
    /// The `reason` label of `voxgate_signaling_rejected_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            UseRefused::Spent(_) => "token_reused",
            UseRefused::Full => "token_table_full",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    expires_at: u64,
    used: u32,
}

#[derive(Debug)]
pub struct TokenUses {
    entries: HashMap<CallTokenId, Entry>,
    max_tokens: usize,
    last_sweep: Option<u64>,
}

impl Default for TokenUses {
    fn default() -> Self {
        TokenUses::new(MAX_TOKENS)
    }
}

impl TokenUses {
    pub fn new(max_tokens: usize) -> Self {
        TokenUses {
            entries: HashMap::new(),
            max_tokens,
            last_sweep: None,
        }
    }

    /// Takes one of `claims`' uses at Unix time `now`.
    pub fn take(&mut self, claims: &CallClaims, now: u64) -> Result<(), UseRefused> {
        if let Some(e) = self.entries.get_mut(&claims.id) {
            if e.used >= claims.uses {
                return Err(UseRefused::Spent(claims.uses));
            }
            e.used += 1;
            return Ok(());
        }
        if self.entries.len() >= self.max_tokens {
            self.sweep(now);
            if self.entries.len() >= self.max_tokens {
                return Err(UseRefused::Full);
            }
        }
        self.entries.insert(
            claims.id,
            Entry {
                expires_at: claims.expires_at,
                used: 1,
            },
        );
        Ok(())
    }

    /// Gives back a use taken for a POST that created no session.
    pub fn give_back(&mut self, id: CallTokenId) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.used = e.used.saturating_sub(1);
            if e.used == 0 {
                self.entries.remove(&id);
            }
        }
    }

    fn sweep(&mut self, now: u64) {
        if self.last_sweep == Some(now) {
            return;
        }
        self.last_sweep = Some(now);
        self.entries.retain(|_, e| e.expires_at > now);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A use taken for a POST under way: given back when dropped (the POST failed, or its client
/// left), unless [`TakenUse::keep`] says the session exists.
#[must_use]
pub struct TakenUse<'a> {
    table: &'a Mutex<TokenUses>,
    id: Option<CallTokenId>,
}

impl TakenUse<'_> {
    pub fn keep(mut self) {
        self.id = None;
    }
}

impl Drop for TakenUse<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.table
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .give_back(id);
        }
    }
}

/// Takes a use of `claims` (a per-call token; `None` for any other credential, which has no
/// uses to count) from `table` at Unix time `now`.
pub fn take_use<'a>(
    table: &'a Mutex<TokenUses>,
    claims: Option<&CallClaims>,
    now: u64,
) -> Result<TakenUse<'a>, UseRefused> {
    let id = match claims {
        Some(c) => {
            let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
            t.take(c, now)?;
            Some(c.id)
        }
        None => None,
    };
    Ok(TakenUse { table, id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(id: u8, expires_at: u64, uses: u32) -> CallClaims {
        CallClaims {
            id: CallTokenId([id; 16]),
            expires_at,
            uses,
            ..Default::default()
        }
    }

    #[test]
    fn a_token_creates_as_many_sessions_as_it_may_and_no_more() {
        let mut t = TokenUses::new(10);
        let once = claims(1, 100, 1);
        assert_eq!(t.take(&once, 0), Ok(()));
        assert_eq!(t.take(&once, 1), Err(UseRefused::Spent(1)));
        let thrice = claims(2, 100, 3);
        for _ in 0..3 {
            assert_eq!(t.take(&thrice, 0), Ok(()));
        }
        assert_eq!(t.take(&thrice, 0), Err(UseRefused::Spent(3)));
    }

    #[test]
    fn a_use_given_back_can_be_taken_again() {
        let mut t = TokenUses::new(10);
        let once = claims(1, 100, 1);
        t.take(&once, 0).unwrap();
        t.give_back(once.id);
        assert!(t.is_empty());
        assert_eq!(t.take(&once, 0), Ok(()));
    }

    #[test]
    fn a_taken_use_comes_back_unless_kept() {
        let table = Mutex::new(TokenUses::new(10));
        let once = claims(1, 100, 1);
        drop(take_use(&table, Some(&once), 0).unwrap());
        take_use(&table, Some(&once), 0).unwrap().keep();
        assert!(matches!(
            take_use(&table, Some(&once), 0),
            Err(UseRefused::Spent(1))
        ));
        assert!(take_use(&table, None, 0).is_ok());
    }

    #[test]
    fn a_full_table_sweeps_expired_tokens_and_otherwise_refuses_new_ones() {
        let mut t = TokenUses::new(2);
        t.take(&claims(1, 10, 1), 0).unwrap();
        t.take(&claims(2, 50, 1), 0).unwrap();
        assert_eq!(t.take(&claims(3, 50, 1), 5), Err(UseRefused::Full));
        // Spent tokens are never forgotten while they live: 2 is still refused.
        assert_eq!(t.take(&claims(2, 50, 1), 5), Err(UseRefused::Spent(1)));
        // Token 1 expired at 10: its place is free.
        assert_eq!(t.take(&claims(3, 50, 1), 11), Ok(()));
        assert_eq!(t.len(), 2);
    }
}
