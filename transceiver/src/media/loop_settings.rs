//! How every media loop of the process behaves: the media flags, the same for all loops.

use std::time::Duration;

use crate::media::audio_bridge::CoarseTicks;
use crate::media::tcp_server::TcpLimits;
use crate::media::thread_priority::LoopPriority;

/// How every loop of the process behaves (the media flags; the same for all loops).
#[derive(Debug, Clone)]
pub struct LoopSettings {
    /// Scheduling priority for the loop's thread (`--loop-priority`).
    pub priority: LoopPriority,
    /// Networks allowed to send relay-framed datagrams (`--relays`); empty: none.
    pub relays: Vec<ipnet::IpNet>,
    /// Most taps a session may have (`--max-taps`).
    pub max_taps: usize,
    /// Which passthrough owners tick on coarse grids (`--coarse-ticks-up-to`,
    /// `--coarse-tick-grids`; see `audio_bridge::tick_grid`).
    pub coarse_ticks: CoarseTicks,
    /// Limits of the loop's own ICE-TCP listener.
    pub tcp_limits: TcpLimits,
    /// Under steady traffic, read the socket at most once per this window (`--read-window-us`;
    /// zero: read every datagram as it wakes the loop). See `read_coalescing`.
    pub read_window: Duration,
}
