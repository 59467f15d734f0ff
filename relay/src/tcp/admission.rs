//! Which TCP connections the relay takes: at most `max_per_source` open connections per
//! client source (an IPv4 address, or an IPv6 /64, as for tentative UDP flows) and at most
//! `max_total` in all. Sans-IO; the listener asks before it keeps an accepted socket and
//! tells when one closes.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::client_source::client_source;

/// Why an accepted connection was closed at once: the `reason` label of
/// `tcp_connections_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client's source already holds `--tcp-max-per-ip` connections.
    PerIpCap,
    /// The relay already holds `--tcp-max-connections` connections.
    GlobalCap,
}

impl Refusal {
    /// Every reason, in label order.
    pub const ALL: [Refusal; 2] = [Self::PerIpCap, Self::GlobalCap];

    /// Short snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerIpCap => "per_ip_cap",
            Self::GlobalCap => "global_cap",
        }
    }

    /// Index into a per-reason counter array.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Open connections per source and in all.
pub struct Admission {
    per_source: HashMap<IpAddr, u32>,
    total: usize,
    max_per_source: u32,
    max_total: usize,
}

impl Admission {
    /// Caps as configured; the per-source map is allocated for `max_total` sources up front.
    pub fn new(max_per_source: u32, max_total: usize) -> Self {
        Self {
            per_source: HashMap::with_capacity(max_total.min(1 << 16)),
            total: 0,
            max_per_source,
            max_total,
        }
    }

    /// Takes a slot for a connection from `ip`, or says why not.
    pub fn admit(&mut self, ip: IpAddr) -> Result<(), Refusal> {
        if self.total >= self.max_total {
            return Err(Refusal::GlobalCap);
        }
        let n = self.per_source.entry(client_source(ip)).or_insert(0);
        if *n >= self.max_per_source {
            return Err(Refusal::PerIpCap);
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    /// Gives back the slot of a closed connection from `ip`.
    pub fn release(&mut self, ip: IpAddr) {
        let source = client_source(ip);
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }

    /// Open connections.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests;
