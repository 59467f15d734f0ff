//! The plain counters the media path keeps: integers a loop (and each session's bridge)
//! increments with no atomic operation, which [`crate::metrics::LoopMetrics`] publishes as
//! deltas once per wakeup. Depends on nothing outside `metrics`.

use crate::metrics::quality_histograms::QualityCounts;

/// A session's audio-bridge counts, kept by its bridge and summed by its loop.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub struct BridgeCounters {
    pub uplink_frames: u64,
    pub uplink_concealed: u64,
    pub uplink_dropped: u64,
    pub downlink_frames: u64,
    /// Of those, frames the PCM encoder made (one per talking PCM session per 20 ms).
    pub pcm_frames_encoded: u64,
    pub downlink_cleared: u64,
    pub tap_dropped: u64,
    /// Backend Opus packets too large for one frame (passthrough), dropped.
    pub downlink_oversize: u64,
    /// Backend audio of the other mode (Opus to a PCM owner or PCM to a passthrough one).
    pub downlink_wrong_mode: u64,
    /// Ticks at which the downlink queue held its 30 s bound, leaving backend messages in
    /// the channel (gRPC flow control then pushes back on the backend).
    pub downlink_full_ticks: u64,
    /// Uplink audio packets and data messages held while no backend owned the session, for
    /// the owner that attaches next.
    pub uplink_held: u64,
    /// Of those, the ones the hold had no room for (older audio past a second, data past its
    /// count or byte bound).
    pub uplink_held_dropped: u64,
}

impl BridgeCounters {
    /// `self - earlier`, field by field (counters only grow).
    pub fn since(&self, earlier: &BridgeCounters) -> BridgeCounters {
        BridgeCounters {
            uplink_frames: self.uplink_frames - earlier.uplink_frames,
            uplink_concealed: self.uplink_concealed - earlier.uplink_concealed,
            uplink_dropped: self.uplink_dropped - earlier.uplink_dropped,
            downlink_frames: self.downlink_frames - earlier.downlink_frames,
            pcm_frames_encoded: self.pcm_frames_encoded - earlier.pcm_frames_encoded,
            downlink_cleared: self.downlink_cleared - earlier.downlink_cleared,
            tap_dropped: self.tap_dropped - earlier.tap_dropped,
            downlink_oversize: self.downlink_oversize - earlier.downlink_oversize,
            downlink_wrong_mode: self.downlink_wrong_mode - earlier.downlink_wrong_mode,
            downlink_full_ticks: self.downlink_full_ticks - earlier.downlink_full_ticks,
            uplink_held: self.uplink_held - earlier.uplink_held,
            uplink_held_dropped: self.uplink_held_dropped - earlier.uplink_held_dropped,
        }
    }

    pub fn add(&mut self, d: &BridgeCounters) {
        self.uplink_frames += d.uplink_frames;
        self.uplink_concealed += d.uplink_concealed;
        self.uplink_dropped += d.uplink_dropped;
        self.downlink_frames += d.downlink_frames;
        self.pcm_frames_encoded += d.pcm_frames_encoded;
        self.downlink_cleared += d.downlink_cleared;
        self.tap_dropped += d.tap_dropped;
        self.downlink_oversize += d.downlink_oversize;
        self.downlink_wrong_mode += d.downlink_wrong_mode;
        self.downlink_full_ticks += d.downlink_full_ticks;
        self.uplink_held += d.uplink_held;
        self.uplink_held_dropped += d.uplink_held_dropped;
    }
}

/// Upper bounds (µs) of the hand-off latency buckets: socket arrival → frame in the backend
/// streams' queues. The last bucket is +Inf. Quarter-millisecond steps around the 1 ms target,
/// so a percentile estimated inside a bucket is off by at most 0.25 ms there.
pub const HANDOFF_BUCKETS_US: [u64; 14] = [
    25, 50, 100, 250, 500, 750, 1_000, 1_250, 1_500, 2_000, 2_500, 5_000, 10_000, 25_000,
];

/// A histogram counted in plain integers on the loop, published in bulk (no atomics per frame).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandoffHistogram {
    pub buckets: [u64; HANDOFF_BUCKETS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl HandoffHistogram {
    pub fn observe(&mut self, us: u64) {
        let i = HANDOFF_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(HANDOFF_BUCKETS_US.len());
        self.buckets[i] += 1;
        self.sum_us += us;
        self.count += 1;
    }

    pub fn add(&mut self, other: &HandoffHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.sum_us += other.sum_us;
        self.count += other.count;
    }
}

/// Why a media loop closed one of its direct ICE-TCP connections (or refused it at accept);
/// the `reason` label of `voxgate_tcp_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpCloseReason {
    /// A first frame that is not a STUN binding request with a USERNAME, or an empty frame.
    Garbage,
    /// A first frame naming no session of this loop.
    UnknownUfrag,
    /// A first binding request that str0m did not answer (bad integrity, or address held).
    Unauthenticated,
    /// A length prefix above the frame limit.
    Oversize,
    FirstFrameTimeout,
    /// No check str0m answered on an open connection for the idle timeout.
    IdleTimeout,
    /// Refused at accept: the client IP (IPv6 /64) has its share of connections.
    PerIpCap,
    /// Refused at accept: the loop has its share of connections.
    GlobalCap,
    PeerClosed,
    IoError,
    /// Closed while tentative (no answered check yet) to make room for a newer connection.
    TentativeEvicted,
    /// Its session ended.
    SessionEnded,
    /// Its session opened a newer connection past its share.
    SessionCap,
    /// Refused at accept: the client's IPv6 /56 has its share of connections.
    Per56Cap,
    /// Refused at accept: the client's IPv6 /48 has its share of connections.
    Per48Cap,
}

impl TcpCloseReason {
    pub const ALL: [TcpCloseReason; 15] = [
        TcpCloseReason::Garbage,
        TcpCloseReason::UnknownUfrag,
        TcpCloseReason::Unauthenticated,
        TcpCloseReason::Oversize,
        TcpCloseReason::FirstFrameTimeout,
        TcpCloseReason::IdleTimeout,
        TcpCloseReason::PerIpCap,
        TcpCloseReason::GlobalCap,
        TcpCloseReason::PeerClosed,
        TcpCloseReason::IoError,
        TcpCloseReason::TentativeEvicted,
        TcpCloseReason::SessionEnded,
        TcpCloseReason::SessionCap,
        TcpCloseReason::Per56Cap,
        TcpCloseReason::Per48Cap,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TcpCloseReason::Garbage => "garbage",
            TcpCloseReason::UnknownUfrag => "unknown_ufrag",
            TcpCloseReason::Unauthenticated => "unauthenticated",
            TcpCloseReason::Oversize => "oversize",
            TcpCloseReason::FirstFrameTimeout => "first_frame_timeout",
            TcpCloseReason::IdleTimeout => "idle_timeout",
            TcpCloseReason::PerIpCap => "per_ip_cap",
            TcpCloseReason::GlobalCap => "global_cap",
            TcpCloseReason::PeerClosed => "peer_closed",
            TcpCloseReason::IoError => "io_error",
            TcpCloseReason::TentativeEvicted => "tentative_evicted",
            TcpCloseReason::SessionEnded => "session_ended",
            TcpCloseReason::SessionCap => "session_cap",
            TcpCloseReason::Per56Cap => "per_56_cap",
            TcpCloseReason::Per48Cap => "per_48_cap",
        }
    }
}

/// A loop's direct ICE-TCP counts, plain integers published with the rest.
#[derive(Debug, Default, Clone)]
pub struct TcpCounters {
    pub accepted: u64,
    pub closed: [u64; TcpCloseReason::ALL.len()],
    pub frames_in: u64,
    pub frames_out: u64,
    /// Frames dropped from full per-connection write queues (a client that stops reading).
    pub write_dropped: u64,
}

impl TcpCounters {
    pub fn close(&mut self, reason: TcpCloseReason) {
        self.closed[reason as usize] += 1;
    }
}

/// Why a media loop dropped a datagram without handing it to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// STUN binding request whose server ufrag names no session on this loop.
    StunUnknownUfrag,
    /// STUN-looking datagram that is not a well-formed binding request with a USERNAME.
    StunMalformed,
    /// Non-STUN datagram from an address no session has authenticated.
    UnknownSource,
    /// Datagram of a known session that str0m could not parse or rejected.
    Rejected,
    /// Relay-framed datagram with a bad header.
    BadRelayHeader,
    /// Datagram larger than the receive buffer (truncated by the kernel).
    Oversize,
    /// Relay-framed datagram from a source outside `--relays`.
    RelayNotAllowed,
    /// Authenticated check from an address another session holds within its consent window:
    /// str0m's answer is withheld and the address stays where it is.
    AddrHeld,
    /// Binding request past its session's check rate (see `media::check_budget`).
    CheckRateLimited,
    /// Binding request from a new address of a session that has had its share of new
    /// addresses (see `media::check_budget`).
    CheckNewAddressCap,
}

impl DropReason {
    pub const ALL: [DropReason; 10] = [
        DropReason::StunUnknownUfrag,
        DropReason::StunMalformed,
        DropReason::UnknownSource,
        DropReason::Rejected,
        DropReason::BadRelayHeader,
        DropReason::Oversize,
        DropReason::RelayNotAllowed,
        DropReason::AddrHeld,
        DropReason::CheckRateLimited,
        DropReason::CheckNewAddressCap,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::StunUnknownUfrag => "stun_unknown_ufrag",
            DropReason::StunMalformed => "stun_malformed",
            DropReason::UnknownSource => "unknown_source",
            DropReason::Rejected => "rejected",
            DropReason::BadRelayHeader => "bad_relay_header",
            DropReason::Oversize => "oversize",
            DropReason::RelayNotAllowed => "relay_not_allowed",
            DropReason::AddrHeld => "addr_held",
            DropReason::CheckRateLimited => "check_rate_limited",
            DropReason::CheckNewAddressCap => "check_new_address_cap",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Counters a loop increments as plain integers, published as deltas by [`LoopMetrics::publish`].
#[derive(Debug, Default, Clone)]
pub struct LoopCounters {
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub datagrams_out: u64,
    pub bytes_out: u64,
    pub send_errors: u64,
    pub wakeups: u64,
    /// Rests of a saturated loop (see `media::core_share`).
    pub rests: u64,
    /// Read windows slept out under steady traffic (see `media::read_coalescing`).
    pub read_holds: u64,
    pub drops: [u64; DropReason::ALL.len()],
    /// Transmits with no authenticated path to their destination (not sent).
    pub unrouted: u64,
    /// Tap requests refused at `--max-taps`.
    pub taps_refused: u64,
    /// Reply paths moved to a trusted relay on authenticated media (a relay failover).
    pub media_path_moves: u64,
    pub bridge: BridgeCounters,
    pub handoff: HandoffHistogram,
    /// Sessions' quality samples (see `quality_histograms`).
    pub quality: QualityCounts,
}

impl LoopCounters {
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }
}
