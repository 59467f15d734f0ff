//! How one simulated client behaves: where it signals, what it says, what it keeps.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// Label of the data channel a client opens when [`SessionConfig::data_channel`] is set.
pub const DATA_CHANNEL_LABEL: &str = "oai-events";

/// Configuration of one client session. `Default` gives a loopback client sending a 440 Hz tone
/// for 10 s with a data channel and no loss.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Signaling base URL; the client POSTs to `{base_url}/v1/sessions`.
    pub base_url: String,
    /// Bearer token for signaling, if the server wants one.
    pub token: Option<String>,
    /// Query string for the POST (metadata), without or with a leading `?`.
    pub query: Option<String>,
    /// Local IP the session's UDP socket binds to (port 0) and advertises as host candidate.
    pub bind_ip: IpAddr,
    /// Uplink tone frequency; 0 sends silence.
    pub tone_hz: f32,
    /// Uplink tone peak as a fraction of full scale (`0.0..=1.0`); 0 sends silence.
    pub amplitude: f32,
    /// How long to send uplink audio once connected; `Duration::ZERO` sends none and
    /// `Duration::MAX` sends until stopped.
    pub send_for: Duration,
    /// Offer a data channel labelled [`DATA_CHANNEL_LABEL`].
    pub data_channel: bool,
    /// Fraction (`0.0..=1.0`) of uplink RTP datagrams dropped before the socket.
    pub uplink_loss: f64,
    /// Seed of the loss RNG; same seed, same drop pattern.
    pub seed: u64,
    /// Encode one second of the tone up front and replay it (cheap; for load generation).
    pub precoded_uplink: bool,
    /// Decode downlink Opus to PCM; off, packets are only counted (for load generation).
    pub decode_downlink: bool,
    /// How much decoded downlink audio to keep (the most recent).
    pub keep_pcm: Duration,
    /// How many downlink packet arrival instants to keep (the most recent).
    pub keep_arrivals: usize,
    /// How many received data-channel text messages to keep (the most recent).
    pub keep_messages: usize,
    /// Offer a UDP host candidate (the session's UDP socket).
    pub udp: bool,
    /// Offer an active ICE-TCP host candidate (RFC 6544): the client connects to the server's
    /// passive TCP candidate (a loop's listener, or a relay's) and frames with RFC 4571.
    pub tcp: bool,
    /// `SO_RCVBUF` of the TCP connection (set before connecting); `None`: the system's.
    pub tcp_recv_buffer: Option<usize>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            base_url: "http://127.0.0.1:8080".to_owned(),
            token: None,
            query: None,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            tone_hz: 440.0,
            amplitude: 0.3,
            send_for: Duration::from_secs(10),
            data_channel: true,
            uplink_loss: 0.0,
            seed: 1,
            precoded_uplink: false,
            decode_downlink: true,
            keep_pcm: Duration::from_secs(60),
            keep_arrivals: 3000,
            keep_messages: 1000,
            udp: true,
            tcp: false,
            tcp_recv_buffer: None,
        }
    }
}
