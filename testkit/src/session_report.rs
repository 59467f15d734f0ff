//! A snapshot of one session: identity, timings, counters, state.

use std::net::SocketAddr;
use std::time::Duration;

/// Everything a test or the load generator reads about one session, by value.
///
/// Timings are measured from the moment the signaling POST started.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionReport {
    /// Server session id (last segment of `location`); empty before the answer.
    pub session_id: String,
    /// `Location` header of the `201`.
    pub location: String,
    /// The session's local UDP address.
    pub local_addr: SocketAddr,
    /// The server's current ICE ufrag (its routing hint); changes on ICE restart.
    pub server_ufrag: String,
    /// ICE connected, DTLS up, and not closed.
    pub connected: bool,
    /// Answer SDP received.
    pub t_answer: Option<Duration>,
    /// First ICE state Connected/Completed.
    pub t_ice_connected: Option<Duration>,
    /// DTLS handshake done (`Event::Connected`).
    pub t_dtls_connected: Option<Duration>,
    /// First uplink RTP datagram handed to the socket.
    pub t_first_audio_sent: Option<Duration>,
    /// First downlink audio frame received.
    pub t_first_audio_received: Option<Duration>,
    /// Uplink 20 ms frames written to str0m.
    pub audio_frames_written: u64,
    /// Uplink RTP datagrams handed to the socket.
    pub audio_packets_sent: u64,
    /// Uplink RTP datagrams dropped by loss injection.
    pub audio_packets_dropped: u64,
    /// Downlink RTP packets received.
    pub audio_packets_received: u64,
    /// Downlink packets missing from the sequence.
    pub audio_packets_lost: u64,
    /// Downlink frames decoded.
    pub frames_decoded: u64,
    /// Downlink frames synthesised by concealment.
    pub frames_concealed: u64,
    /// Data channel open (and not closed since).
    pub channel_open: bool,
    /// Text or binary messages received on the data channel.
    pub channel_messages_received: u64,
    /// Current ICE connection state, e.g. `"Connected"`.
    pub ice_state: String,
    /// ICE restarts completed (answer accepted).
    pub ice_restarts: u32,
    /// Datagrams received on the session's socket (or TCP connection).
    pub datagrams_received: u64,
    /// Of `datagrams_received`, those that came as RFC 4571 frames over TCP.
    pub tcp_frames_received: u64,
    /// Datagrams handed to the I/O layer for sending.
    pub datagrams_sent: u64,
    /// Of those, datagrams the socket refused (buffer full, network error).
    pub send_errors: u64,
    /// The session ended: closed locally, closed by the peer, or failed.
    pub closed: bool,
    /// Why the session failed, if it did.
    pub last_error: Option<String>,
}
