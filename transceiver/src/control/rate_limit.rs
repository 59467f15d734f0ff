//! Per-client token buckets for `POST /v1/sessions` and for ICE restarts (`PATCH`): a Sans-IO
//! limiter with an injected clock, and the [`TokenBucket`] it is made of (a session holds one
//! of its own for its restarts, [`RESTARTS_PER_SESSION`]).
//!
//! Each client (an IPv4 address, or an IPv6 /64: one subscriber usually holds a whole /64)
//! gets a bucket of `burst` tokens that refills at `rate` per second; a POST takes one. An
//! empty bucket answers with the time until the next token (`Retry-After`).
//!
//! Memory is bounded: at most `max_clients` buckets. A bucket that has refilled completely is
//! the same as no bucket, so when the table is full those are swept out (at most once per
//! second, so a flood of new addresses cannot make every request pay for a sweep). New clients
//! that still find the table full share one overflow bucket: a flood from many addresses then
//! limits itself, and never grows memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The client key: an IPv4 address, or the /64 prefix of an IPv6 address.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RateLimitConfig {
    /// Tokens per second; 0 turns the limiter off.
    pub rate: f64,
    /// Bucket size: POSTs a client may make at once.
    pub burst: u32,
    /// Most clients with their own bucket.
    pub max_clients: usize,
}

/// A session's own ICE restarts: a few at once (a network change, a retry), then one every
/// 5 s. Each restart has str0m parse an offer and the media loop rework the session, so a
/// caller looping on PATCH would spend the loop's time that its neighbours' media needs.
pub const RESTARTS_PER_SESSION: RateLimitConfig = RateLimitConfig {
    rate: 0.2,
    burst: 4,
    max_clients: 1,
};

/// `burst` tokens, refilled at `rate` a second.
#[derive(Debug, Clone, Copy)]
pub struct TokenBucket {
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn full(cfg: &RateLimitConfig, now: Instant) -> Self {
        TokenBucket {
            tokens: f64::from(cfg.burst),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant, cfg: &RateLimitConfig) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * cfg.rate).min(f64::from(cfg.burst));
        self.at = now;
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant, cfg: &RateLimitConfig) -> Result<(), Duration> {
        self.refill(now, cfg);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / cfg.rate))
        }
    }

    fn is_full(&self, now: Instant, cfg: &RateLimitConfig) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens + dt * cfg.rate >= f64::from(cfg.burst)
    }
}

#[derive(Debug)]
pub struct RateLimiter {
    cfg: RateLimitConfig,
    buckets: HashMap<IpAddr, TokenBucket>,
    overflow: TokenBucket,
    last_sweep: Option<Instant>,
}

impl RateLimiter {
    pub fn new(cfg: RateLimitConfig, now: Instant) -> Self {
        RateLimiter {
            cfg,
            buckets: HashMap::new(),
            overflow: TokenBucket::full(&cfg, now),
            last_sweep: None,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.cfg.rate > 0.0 && self.cfg.burst > 0
    }

    /// Takes a token for a POST from `ip`; `Err` holds the wait until the next one.
    pub fn check(&mut self, now: Instant, ip: IpAddr) -> Result<(), Duration> {
        if !self.is_enabled() {
            return Ok(());
        }
        let key = client_key(ip);
        let cfg = self.cfg;
        if !self.buckets.contains_key(&key) && self.buckets.len() >= cfg.max_clients {
            self.sweep(now);
            if self.buckets.len() >= cfg.max_clients {
                return self.overflow.take(now, &cfg);
            }
        }
        self.buckets
            .entry(key)
            .or_insert(TokenBucket::full(&cfg, now))
            .take(now, &cfg)
    }

    /// Drops buckets that have refilled completely (they equal a fresh one).
    fn sweep(&mut self, now: Instant) {
        if self
            .last_sweep
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_sweep = Some(now);
        let cfg = self.cfg;
        self.buckets.retain(|_, b| !b.is_full(now, &cfg));
    }

    pub fn tracked_clients(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(rate: f64, burst: u32, max_clients: usize) -> RateLimitConfig {
        RateLimitConfig {
            rate,
            burst,
            max_clients,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds_and_retry_after_is_the_refill_time() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(cfg(2.0, 3, 100), t0);
        for _ in 0..3 {
            assert!(l.check(t0, ip("10.0.0.1")).is_ok());
        }
        let wait = l.check(t0, ip("10.0.0.1")).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        // Another client is not affected.
        assert!(l.check(t0, ip("10.0.0.2")).is_ok());
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert!(l.check(t1, ip("10.0.0.1")).is_ok());
        assert!(l.check(t1, ip("10.0.0.1")).is_err());
    }

    #[test]
    fn an_ipv6_slash_64_is_one_client() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(cfg(1.0, 1, 100), t0);
        assert!(l.check(t0, ip("2001:db8::1")).is_ok());
        assert!(l.check(t0, ip("2001:db8::ffff:2")).is_err());
        assert!(l.check(t0, ip("2001:db8:0:1::1")).is_ok());
        assert_eq!(client_key(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
    }

    #[test]
    fn a_full_table_sweeps_refilled_buckets_then_shares_an_overflow_bucket() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(cfg(1.0, 2, 2), t0);
        assert!(l.check(t0, ip("10.0.0.1")).is_ok());
        assert!(l.check(t0, ip("10.0.0.2")).is_ok());
        // Table full, nothing refilled: newcomers share the overflow bucket (burst 2).
        assert!(l.check(t0, ip("10.0.0.3")).is_ok());
        assert!(l.check(t0, ip("10.0.0.4")).is_ok());
        assert!(l.check(t0, ip("10.0.0.5")).is_err());
        assert_eq!(l.tracked_clients(), 2);
        // Both buckets refill after a second: the next newcomer gets a bucket of its own.
        let t1 = t0 + Duration::from_secs(2);
        assert!(l.check(t1, ip("10.0.0.6")).is_ok());
        assert_eq!(l.tracked_clients(), 1);
    }

    #[test]
    fn rate_zero_turns_the_limiter_off() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(cfg(0.0, 1, 1), t0);
        for _ in 0..100 {
            assert!(l.check(t0, ip("10.0.0.1")).is_ok());
        }
        assert_eq!(l.tracked_clients(), 0);
    }

    proptest! {
        /// Whatever the traffic, memory stays within `max_clients`, and no client gets more
        /// than burst + rate * elapsed tokens.
        #[test]
        fn memory_and_admissions_stay_bounded(
            reqs in proptest::collection::vec((0u32..5000, 0u64..50), 1..400)
        ) {
            let t0 = Instant::now();
            let c = cfg(4.0, 5, 64);
            let mut l = RateLimiter::new(c, t0);
            let mut now = t0;
            let mut ok_for_0 = 0u32;
            for (who, dt_ms) in reqs {
                now += Duration::from_millis(dt_ms);
                let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000u32 + who));
                if l.check(now, addr).is_ok() && who == 0 {
                    ok_for_0 += 1;
                }
                prop_assert!(l.tracked_clients() <= 64);
            }
            let elapsed = now.duration_since(t0).as_secs_f64();
            // Client 0 may also have drawn on the shared overflow bucket.
            prop_assert!(f64::from(ok_for_0) <= 2.0 * (5.0 + 4.0 * elapsed) + 1.0);
        }
    }
}
