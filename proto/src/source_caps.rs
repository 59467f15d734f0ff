//! Who counts as one client for a per-source cap, and the caps the relay and the transceiver
//! both put on the ICE-TCP connections one network may hold at once. Sans-IO: the listener
//! asks before it keeps an accepted connection and tells when one closes.
//!
//! A *source* is an IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address) or
//! an IPv6 /64, what one host or subscriber is usually given, so that a host cannot spread a
//! flood over its 2^64 addresses. One IPv6 customer often holds more than a /64: a /56 is the
//! usual delegation to a home (RFC 6177), a /48 the usual one to a site. Without caps per /56
//! and per /48 such a customer could take a whole listener with connections spread over its
//! /64s (256 of them in a /56, 65,536 in a /48), each /64 within its own cap.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};

/// The unit a per-source cap counts: an IPv4 address (IPv4-mapped IPv6 included) or an IPv6
/// /64.
pub fn client_source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(prefix(v6, 64)),
        },
    }
}

/// The first `bits` bits of `ip`, the rest zero.
fn prefix(ip: Ipv6Addr, bits: u32) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(ip) & !(u128::MAX >> bits))
}

/// The caps: connections at once per source (an IPv4 address or an IPv6 /64), per IPv6 /56
/// and per IPv6 /48.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimits {
    pub per_source: u32,
    pub per_56: u32,
    pub per_48: u32,
}

impl SourceLimits {
    /// Only the per-source cap (no cap per /56 or /48 beyond what it implies).
    pub fn per_source(per_source: u32) -> Self {
        SourceLimits {
            per_source,
            per_56: u32::MAX,
            per_48: u32::MAX,
        }
    }
}

/// Which cap refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRefusal {
    /// The IPv4 address or IPv6 /64 holds its share.
    PerSource,
    /// The IPv6 /56 holds its share.
    Per56,
    /// The IPv6 /48 holds its share.
    Per48,
}

/// Open connections per source, per /56 and per /48.
#[derive(Debug)]
pub struct SourceCounts {
    limits: SourceLimits,
    per_source: HashMap<IpAddr, u32>,
    per_56: HashMap<Ipv6Addr, u32>,
    per_48: HashMap<Ipv6Addr, u32>,
}

impl SourceCounts {
    /// No connection yet; room for `sources` sources before a map grows.
    pub fn with_capacity(limits: SourceLimits, sources: usize) -> Self {
        SourceCounts {
            limits,
            per_source: HashMap::with_capacity(sources),
            per_56: HashMap::new(),
            per_48: HashMap::new(),
        }
    }

    /// Counts a connection from `ip`, or says which cap it is past (then nothing is counted).
    pub fn admit(&mut self, ip: IpAddr) -> Result<(), SourceRefusal> {
        let source = client_source(ip);
        if count(&self.per_source, source) >= self.limits.per_source {
            return Err(SourceRefusal::PerSource);
        }
        let wide = wide_prefixes(source);
        if let Some((p56, p48)) = wide {
            if count(&self.per_56, p56) >= self.limits.per_56 {
                return Err(SourceRefusal::Per56);
            }
            if count(&self.per_48, p48) >= self.limits.per_48 {
                return Err(SourceRefusal::Per48);
            }
            *self.per_56.entry(p56).or_insert(0) += 1;
            *self.per_48.entry(p48).or_insert(0) += 1;
        }
        *self.per_source.entry(source).or_insert(0) += 1;
        Ok(())
    }

    /// Gives back the count of a closed connection from `ip`; false (and nothing changes) if
    /// its source holds none.
    pub fn release(&mut self, ip: IpAddr) -> bool {
        let source = client_source(ip);
        if !decrement(&mut self.per_source, source) {
            return false;
        }
        if let Some((p56, p48)) = wide_prefixes(source) {
            decrement(&mut self.per_56, p56);
            decrement(&mut self.per_48, p48);
        }
        true
    }
}

/// The /56 and /48 of an IPv6 source; none for IPv4.
fn wide_prefixes(source: IpAddr) -> Option<(Ipv6Addr, Ipv6Addr)> {
    match source {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => Some((prefix(v6, 56), prefix(v6, 48))),
    }
}

/// `key`'s count (0 when it has none).
fn count<K: std::hash::Hash + Eq>(map: &HashMap<K, u32>, key: K) -> u32 {
    map.get(&key).copied().unwrap_or(0)
}

/// Takes one off `key`'s count (removing it at zero); false if it had none.
fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u32>, key: K) -> bool {
    let Some(n) = map.get_mut(&key) else {
        return false;
    };
    *n -= 1;
    if *n == 0 {
        map.remove(&key);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn limits() -> SourceLimits {
        SourceLimits {
            per_source: 2,
            per_56: 4,
            per_48: 6,
        }
    }

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_slash_64() {
        assert_eq!(client_source(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(client_source(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(
            client_source(ip("2001:db8:1:2:3:4:5:6")),
            ip("2001:db8:1:2::")
        );
    }

    #[test]
    fn each_slash_64_has_its_cap_and_a_slash_56_has_one_for_all_of_them() {
        let mut c = SourceCounts::with_capacity(limits(), 8);
        assert_eq!(c.admit(ip("2001:db8:0:100::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:100::2")), Ok(()));
        assert_eq!(
            c.admit(ip("2001:db8:0:100::3")),
            Err(SourceRefusal::PerSource)
        );
        // Two more /64s of the same /56: the /56 holds four.
        assert_eq!(c.admit(ip("2001:db8:0:101::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:102::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:103::1")), Err(SourceRefusal::Per56));
        // Another /56 of the same /48: two more, then the /48's six are taken.
        assert_eq!(c.admit(ip("2001:db8:0:200::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:300::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:400::1")), Err(SourceRefusal::Per48));
        // Another /48 is not touched, nor is IPv4.
        assert_eq!(c.admit(ip("2001:db8:1::1")), Ok(()));
        assert_eq!(c.admit(ip("192.0.2.1")), Ok(()));
        // A closed connection gives its counts back at every level.
        assert!(c.release(ip("2001:db8:0:100::1")));
        assert_eq!(c.admit(ip("2001:db8:0:400::1")), Ok(()));
        assert_eq!(c.admit(ip("2001:db8:0:500::1")), Err(SourceRefusal::Per48));
    }

    #[test]
    fn a_refused_or_unknown_connection_counts_nothing() {
        let mut c = SourceCounts::with_capacity(SourceLimits::per_source(1), 8);
        assert_eq!(c.admit(ip("192.0.2.1")), Ok(()));
        assert_eq!(c.admit(ip("192.0.2.1")), Err(SourceRefusal::PerSource));
        assert!(!c.release(ip("192.0.2.9")), "never admitted: ignored");
        assert!(c.release(ip("192.0.2.1")));
        assert_eq!(c.admit(ip("::ffff:192.0.2.1")), Ok(()), "the same source");
        // Without /56 and /48 caps, a /48 holds as many /64s as it likes.
        for n in 0..1000u16 {
            let v6 = Ipv6Addr::new(0x2001, 0xdb8, 7, n, 0, 0, 0, 1);
            assert_eq!(c.admit(IpAddr::V6(v6)), Ok(()));
        }
    }
}
