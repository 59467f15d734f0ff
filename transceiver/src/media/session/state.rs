//! Who a session is and where it is in its life: its id, its state, why it ended.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use serde::Serialize;

/// Random 128-bit session id, shown as 32 lowercase hex chars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub u128);

impl SessionId {
    pub fn random() -> Self {
        SessionId(rand::random())
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for SessionId {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        u128::from_str_radix(s, 16).map(SessionId).map_err(|_| ())
    }
}

/// How a session lost its owning backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerLoss {
    /// The owner's stream ended without a hangup.
    StreamEnded,
    /// The owner left its uplink queue full past `--backend-stall-secs` and was dropped.
    Stalled,
}

/// Why a session ended; also the `reason` label of `voxgate_sessions_ended_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    Deleted,
    IceDisconnected,
    ConnectTimeout,
    ClosedByPeer,
    RtcError,
    Shutdown,
    /// The backend hung up (Downlink.hangup).
    BackendHangup,
    /// No backend took the session within the dispatch policy.
    NoBackend,
    /// The session reached `--max-session-secs`.
    MaxDuration,
    /// The session was opened to resume a call, and no backend took it (the credential was
    /// used already, or nobody serves the call).
    ResumeRefused,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Deleted => "deleted",
            EndReason::IceDisconnected => "ice_disconnected",
            EndReason::ConnectTimeout => "connect_timeout",
            EndReason::ClosedByPeer => "closed_by_peer",
            EndReason::RtcError => "rtc_error",
            EndReason::Shutdown => "shutdown",
            EndReason::BackendHangup => "backend_hangup",
            EndReason::NoBackend => "no_backend",
            EndReason::MaxDuration => "max_duration",
            EndReason::ResumeRefused => "resume_refused",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Connecting,
    Connected,
    Ended,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("offer rejected: {0}")]
    Offer(String),
    #[error("bad candidate address {0}: {1}")]
    Candidate(SocketAddr, String),
    #[error("session is not connected yet; ICE restart needs an established session")]
    NotConnected,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_round_trips_through_hex() {
        let id = SessionId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(text.parse::<SessionId>(), Ok(id));
        assert!("xyz".parse::<SessionId>().is_err());
        assert!("+0000000000000000000000000000000"
            .parse::<SessionId>()
            .is_err());
    }
}
