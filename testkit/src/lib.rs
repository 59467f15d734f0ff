//! Simulated WebRTC voice clients for voxgate: the peer at the other end of integration tests
//! and, later, of the load generator (up to ~1000 sessions from one thread).
//!
//! Each client is what a browser would be to the transceiver: a str0m peer that offers one
//! SendRecv Opus m-line (and optionally the `oai-events` data channel), signals over
//! WHIP-shaped HTTP, runs full controlling ICE against the ice-lite server, speaks a test tone
//! as real Opus, and decodes what it hears.
//!
//! How data flows:
//!
//! ```text
//!  SignalSource ─► UplinkAudio (Opus) ─► Rtc writer ─► LossInjector ─► socket ─► server
//!  server ─► socket ─► Rtc ─► MediaData ─► DownlinkAudio (decode, gaps, arrivals, PCM)
//!                           └► ChannelData ─► recorded messages
//!
//!  Fleet: mio::Poll over one UDP socket per session (Token = index) + a deadline set;
//!         owns the sockets and the clock, feeds ClientSession, sends its transmits.
//!  ClientSession: Sans-IO (datagrams and `now` in, transmits and events out), wraps str0m.
//!  SignalingClient: blocking POST / PATCH (ICE restart) / DELETE / GET.
//!  signal: tone generator and the analysis tests assert with (frequency, RMS, correlation).
//! ```
//!
//! A test:
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use voxgate_testkit::{Fleet, SessionConfig, signal};
//!
//! let mut fleet = Fleet::new().unwrap();
//! let i = fleet
//!     .open(SessionConfig { base_url: "http://127.0.0.1:8080".into(), tone_hz: 1000.0, ..Default::default() })
//!     .unwrap();
//! assert!(fleet.run_until(Instant::now() + Duration::from_secs(5), |f| f.session(i).is_connected()));
//! fleet.run_for(Duration::from_secs(2));
//! let pcm = fleet.session(i).received_pcm();
//! let hz = signal::dominant_frequency(pcm, signal::SAMPLE_RATE);
//! fleet.delete(i).unwrap();
//! ```

pub mod client_session;
pub mod downlink_audio;
pub mod fleet;
pub mod impaired_path;
pub mod impaired_proxy;
pub mod loss_injector;
pub mod opus_codec;
pub mod ports;
pub mod reset_proxy;
pub mod session_config;
pub mod session_error;
pub mod session_event;
pub mod session_report;
pub mod signal;
pub mod signaling_client;
pub mod tail_buffer;
pub mod tcp_balancer;
pub mod uplink_audio;
pub mod uplink_schedule;
pub mod wait;
pub mod web_client;

pub use client_session::ClientSession;
pub use fleet::{ClientError, Fleet, SessionResource};
pub use impaired_path::{ImpairedPath, Impairment};
pub use impaired_proxy::{ImpairedProxy, ProxyCounts};
pub use loss_injector::LossInjector;
pub use session_config::{SessionConfig, DATA_CHANNEL_LABEL};
pub use session_error::SessionError;
pub use session_event::{SessionEvent, SessionTimings};
pub use session_report::SessionReport;
pub use signal::SignalSource;
pub use signaling_client::{CreatedSession, SignalingClient, SignalingError};

/// Re-exported so callers can name str0m types (e.g. `IceConnectionState`) without a direct
/// dependency.
pub use str0m;
