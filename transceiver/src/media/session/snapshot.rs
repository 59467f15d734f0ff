//! What `GET /v1/sessions/{id}` shows of a session: its counters and a point-in-time view.

use serde::Serialize;

use crate::media::quality::QualitySnapshot;
use crate::media::session::path::ClientPath;
use crate::media::session::state::SessionState;
use crate::media::turn_timing::TurnsSnapshot;
use crate::metrics::BridgeCounters;

/// Per-session counters, owned by the loop, reported by `GET /v1/sessions/{id}`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct SessionCounters {
    pub datagrams_in: u64,
    pub bytes_in: u64,
    pub datagrams_out: u64,
    pub bytes_out: u64,
    pub audio_packets_in: u64,
    pub audio_packets_out: u64,
    pub channel_messages_in: u64,
    pub ice_restarts: u64,
}

/// A point-in-time view of a session for the control plane.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSnapshot {
    pub id: String,
    pub state: SessionState,
    #[serde(rename = "loop")]
    pub loop_index: usize,
    pub server_ufrag: String,
    pub client_addrs: Vec<String>,
    /// Every authenticated path: the client address, `udp`/`tcp`, and the relay (if any).
    pub client_paths: Vec<PathSnapshot>,
    /// Relays the client's datagrams arrive through (empty in direct mode).
    pub relays: Vec<String>,
    pub age_ms: u64,
    pub connect_ms: Option<u64>,
    pub data_channel_open: bool,
    pub backend_attached: bool,
    pub taps: usize,
    pub counters: SessionCounters,
    pub bridge: BridgeCounters,
    /// The caller's network: RTT, jitter, loss and MOS per direction, and the last minute's
    /// samples (see `media::quality`).
    pub quality: QualitySnapshot,
    /// The caller's turns: how many, reports dropped, and the last few splits (see
    /// `media::turn_timing`).
    pub turns: TurnsSnapshot,
}

/// One authenticated path of a session, as `GET /v1/sessions/{id}` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PathSnapshot {
    pub addr: String,
    pub transport: &'static str,
    pub via: Option<String>,
}

/// What `GET /v1/sessions/{id}` shows of a session's authenticated paths.
pub struct PathsShown {
    pub client_addrs: Vec<String>,
    pub client_paths: Vec<PathSnapshot>,
    /// Each relay the paths go through, once, sorted.
    pub relays: Vec<String>,
}

impl PathsShown {
    pub fn of<'a>(paths: impl Iterator<Item = &'a ClientPath>) -> Self {
        let paths: Vec<&ClientPath> = paths.collect();
        let mut relays: Vec<String> = paths
            .iter()
            .filter_map(|p| p.via.map(|v| v.to_string()))
            .collect();
        relays.sort();
        relays.dedup();
        PathsShown {
            client_addrs: paths.iter().map(|p| p.addr.to_string()).collect(),
            client_paths: paths
                .iter()
                .map(|p| PathSnapshot {
                    addr: p.addr.to_string(),
                    transport: p.transport.as_str(),
                    via: p.via.map(|v| v.to_string()),
                })
                .collect(),
            relays,
        }
    }
}
