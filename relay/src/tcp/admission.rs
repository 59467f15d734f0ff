//! Which TCP connections the relay takes: at most `max_total` open connections in all, and
//! from one network at most its share ([`voxgate_proto::source_caps`]): per client source (an
//! IPv4 address, or an IPv6 /64, as for tentative UDP flows), per IPv6 /56 and per IPv6 /48.
//! Sans-IO; the listener asks before it keeps an accepted socket and tells when one closes.

use std::net::IpAddr;

use voxgate_proto::source_caps::{SourceCounts, SourceLimits, SourceRefusal};

/// Why an accepted connection was closed at once: the `reason` label of
/// `tcp_connections_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client's source already holds `--tcp-max-per-ip` connections.
    PerIpCap,
    /// The relay already holds `--tcp-max-connections` connections.
    GlobalCap,
    /// The client's IPv6 /56 already holds `--tcp-max-per-56` connections.
    Per56Cap,
    /// The client's IPv6 /48 already holds `--tcp-max-per-48` connections.
    Per48Cap,
}

impl Refusal {
    /// Every reason, in label order.
    pub const ALL: [Refusal; 4] = [
        Self::PerIpCap,
        Self::GlobalCap,
        Self::Per56Cap,
        Self::Per48Cap,
    ];

    /// Short snake_case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerIpCap => "per_ip_cap",
            Self::GlobalCap => "global_cap",
            Self::Per56Cap => "per_56_cap",
            Self::Per48Cap => "per_48_cap",
        }
    }

    /// Index into a per-reason counter array.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl From<SourceRefusal> for Refusal {
    fn from(r: SourceRefusal) -> Self {
        match r {
            SourceRefusal::PerSource => Refusal::PerIpCap,
            SourceRefusal::Per56 => Refusal::Per56Cap,
            SourceRefusal::Per48 => Refusal::Per48Cap,
        }
    }
}

/// Open connections per source, per /56 and /48, and in all.
pub struct Admission {
    sources: SourceCounts,
    total: usize,
    max_total: usize,
}

impl Admission {
    /// At most `max_per_source` per source and `max_total` in all (no cap per /56 or /48 of
    /// its own: see [`Admission::with_limits`]); the per-source map is allocated for
    /// `max_total` sources up front.
    pub fn new(max_per_source: u32, max_total: usize) -> Self {
        Self::with_limits(SourceLimits::per_source(max_per_source), max_total)
    }

    /// At most `limits` per source, /56 and /48, and `max_total` in all.
    pub fn with_limits(limits: SourceLimits, max_total: usize) -> Self {
        Self {
            sources: SourceCounts::with_capacity(limits, max_total.min(1 << 16)),
            total: 0,
            max_total,
        }
    }

    /// Whether a newcomer gets in by closing the oldest of the `tentative` connections (those
    /// not answered yet): past the tentative cap, or into a full tier that holds one. Then
    /// [`Admission::admit_making_room`] takes its slot. A tier full of established connections
    /// refuses it instead, as a full flow table does.
    pub fn must_make_room(&self, tentative: usize, max_tentative: usize) -> bool {
        tentative >= max_tentative.min(self.max_total)
            || (self.total >= self.max_total && tentative > 0)
    }

    /// Takes a slot for a connection from `ip`, or says why not.
    pub fn admit(&mut self, ip: IpAddr) -> Result<(), Refusal> {
        if self.total >= self.max_total {
            return Err(Refusal::GlobalCap);
        }
        self.admit_making_room(ip)
    }

    /// Takes a slot for a connection from `ip` whatever the total: the caller closes another
    /// connection (the oldest tentative one) to make room. Only the caps per source, /56 and
    /// /48 can refuse.
    pub fn admit_making_room(&mut self, ip: IpAddr) -> Result<(), Refusal> {
        self.sources.admit(ip)?;
        self.total += 1;
        Ok(())
    }

    /// Gives back the slot of a closed connection from `ip`.
    pub fn release(&mut self, ip: IpAddr) {
        if self.sources.release(ip) {
            self.total -= 1;
        }
    }

    /// Open connections.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests;
