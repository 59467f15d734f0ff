//! What a client session tells its owner: lifecycle changes as they happen, and when each
//! milestone came.

use std::time::Duration;

use str0m::IceConnectionState;

/// Lifecycle changes, for owners that want to react instead of polling state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// The ICE connection state changed.
    IceState(IceConnectionState),
    /// ICE and DTLS are up; uplink audio starts.
    Connected,
    /// The data channel opened.
    ChannelOpen,
    /// The data channel closed.
    ChannelClosed,
    /// The session ended (locally, by the peer, or by failure).
    Closed,
}

/// When things happened, measured from the start of signaling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionTimings {
    /// Answer SDP accepted.
    pub answer: Option<Duration>,
    /// First ICE state Connected or Completed.
    pub ice_connected: Option<Duration>,
    /// DTLS handshake done.
    pub dtls_connected: Option<Duration>,
    /// First uplink RTP datagram handed out for sending.
    pub first_audio_sent: Option<Duration>,
    /// First downlink audio frame received.
    pub first_audio_received: Option<Duration>,
}
