//! Loop `Instant`s as wall-clock microseconds, the time base every timestamp a backend gets
//! shares (uplink arrivals, downlink sends, events), so the two legs of a call line up.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Maps loop `Instant`s to wall-clock microseconds (captured once, so no syscall per packet).
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    base_instant: Instant,
    base_unix_micros: i64,
}

impl WallClock {
    /// Reads both clocks back to back (a base taken earlier would bias every timestamp).
    pub fn now() -> Self {
        let base_instant = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        WallClock {
            base_instant,
            base_unix_micros: unix,
        }
    }

    pub fn unix_micros(&self, t: Instant) -> i64 {
        match t.checked_duration_since(self.base_instant) {
            Some(d) => self.base_unix_micros + d.as_micros() as i64,
            None => self.base_unix_micros - (self.base_instant - t).as_micros() as i64,
        }
    }
}
