//! How much of its socket a loop reads before it turns to timers and commands.
//!
//! A loop used to read until a batch came back short. Input at the loop's capacity (even junk
//! it drops at once) then never ends a read pass, and every session's timers, downlink pacing
//! and control commands wait behind it. The budget caps a pass at a fixed number of batches;
//! a pass that ends on the cap leaves datagrams in the kernel, so the loop must come back to
//! the socket without waiting for a new readiness edge ([`ReceiveBudget::pending`]).
//!
//! A pass also ends early, after the batch in hand, once a timer has come due: with the cap
//! alone, a pass of forged checks (each fails str0m's HMAC) ran long in a debug build, and a
//! downlink tick due at its start went out that late (`hostile_media`'s junk-flood test saw it
//! in the downlink's gaps under the flood). Ending on a due timer bounds that lateness by one
//! batch.

/// What the loop does after a `recvmmsg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Read another batch.
    ReadAgain,
    /// The socket is empty: wait for the next readiness edge.
    Drained,
    /// The pass used its budget: run timers and commands, then read again without waiting.
    Yield,
}

#[derive(Debug, Clone)]
pub struct ReceiveBudget {
    batches_per_pass: u32,
    used: u32,
    pending: bool,
}

impl ReceiveBudget {
    /// A budget of `batches_per_pass` batches per pass (at least one).
    pub fn new(batches_per_pass: u32) -> Self {
        ReceiveBudget {
            batches_per_pass: batches_per_pass.max(1),
            used: 0,
            pending: false,
        }
    }

    /// Starts a read pass of at most `batches` batches (capped by the budget).
    pub fn begin(&mut self, batches: u32) {
        self.used = self.batches_per_pass.saturating_sub(batches.max(1));
    }

    /// After a batch that brought `received` datagrams into `capacity` slots; `timer_due`
    /// says whether a timer has come due since the pass began.
    pub fn after_batch(&mut self, received: usize, capacity: usize, timer_due: bool) -> Next {
        if received < capacity {
            // A short batch emptied the queue: on Linux every later datagram raises a new edge.
            self.pending = false;
            return Next::Drained;
        }
        if timer_due {
            self.pending = true;
            return Next::Yield;
        }
        self.spend()
    }

    /// The socket said `EWOULDBLOCK`.
    pub fn would_block(&mut self) {
        self.pending = false;
    }

    /// A receive error (e.g. an ICMP report for one peer) costs a batch, so a socket that keeps
    /// failing cannot hold the loop either.
    pub fn after_error(&mut self) -> Next {
        self.spend()
    }

    fn spend(&mut self) -> Next {
        self.used += 1;
        if self.used >= self.batches_per_pass {
            self.pending = true;
            Next::Yield
        } else {
            Next::ReadAgain
        }
    }

    /// Whether datagrams may be waiting that no readiness edge will announce.
    pub fn pending(&self) -> bool {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_socket_yields_after_the_budget() {
        let mut b = ReceiveBudget::new(4);
        b.begin(u32::MAX);
        for _ in 0..3 {
            assert_eq!(b.after_batch(32, 32, false), Next::ReadAgain);
        }
        assert_eq!(b.after_batch(32, 32, false), Next::Yield);
        assert!(b.pending(), "the loop must come back without a new edge");
    }

    #[test]
    fn a_short_batch_ends_the_pass_and_clears_pending() {
        let mut b = ReceiveBudget::new(4);
        b.begin(u32::MAX);
        for _ in 0..3 {
            b.after_batch(32, 32, false);
        }
        assert_eq!(b.after_batch(32, 32, false), Next::Yield);
        b.begin(u32::MAX);
        assert_eq!(b.after_batch(5, 32, false), Next::Drained);
        assert!(!b.pending());
    }

    #[test]
    fn a_smaller_pass_takes_fewer_batches() {
        let mut b = ReceiveBudget::new(8);
        b.begin(1);
        assert_eq!(b.after_batch(32, 32, false), Next::Yield);
        b.begin(0); // at least one batch
        assert_eq!(b.after_batch(32, 32, false), Next::Yield);
        b.begin(2);
        assert_eq!(b.after_batch(32, 32, false), Next::ReadAgain);
        assert_eq!(b.after_batch(32, 32, false), Next::Yield);
    }

    #[test]
    fn a_due_timer_ends_the_pass_after_the_batch_in_hand() {
        let mut b = ReceiveBudget::new(8);
        b.begin(u32::MAX);
        assert_eq!(b.after_batch(32, 32, false), Next::ReadAgain);
        assert_eq!(b.after_batch(32, 32, true), Next::Yield);
        assert!(b.pending(), "the rest is read right after the timers");
        // A short batch still means the socket is empty, due timer or not.
        b.begin(u32::MAX);
        assert_eq!(b.after_batch(3, 32, true), Next::Drained);
        assert!(!b.pending());
    }

    #[test]
    fn errors_spend_the_budget_and_would_block_drains() {
        let mut b = ReceiveBudget::new(2);
        b.begin(u32::MAX);
        assert_eq!(b.after_error(), Next::ReadAgain);
        assert_eq!(b.after_error(), Next::Yield);
        assert!(b.pending());
        b.would_block();
        assert!(!b.pending());
    }
}
