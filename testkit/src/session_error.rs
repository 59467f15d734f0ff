//! How a client session's operations fail.

use str0m::error::{IceError, SdpError};
use str0m::RtcError;

/// Failures of a client session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// str0m refused an operation.
    #[error("webrtc: {0}")]
    Rtc(#[from] RtcError),
    /// The answer SDP did not parse.
    #[error("bad answer SDP: {0}")]
    Sdp(#[from] SdpError),
    /// The local address cannot be an ICE host candidate (e.g. 0.0.0.0).
    #[error("bad local candidate: {0}")]
    Candidate(#[from] IceError),
    /// libopus failed to set up.
    #[error("opus: {0}")]
    Opus(#[from] opus::Error),
    /// An answer arrived but no offer was outstanding.
    #[error("no offer is pending")]
    NoPendingOffer,
    /// str0m produced no offer for the requested change.
    #[error("nothing to offer")]
    NothingToOffer,
    /// The answer did not negotiate Opus for the audio m-line.
    #[error("Opus was not negotiated")]
    NoOpus,
    /// The data channel is not open (not offered, not yet open, or closed).
    #[error("data channel is not open")]
    ChannelNotOpen,
    /// The data channel's send buffer is full.
    #[error("data channel send buffer is full")]
    ChannelBufferFull,
    /// The session has ended.
    #[error("session is closed")]
    Closed,
}
