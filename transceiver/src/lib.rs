//! voxgate transceiver: terminates WebRTC for many sessions and exposes them to the control
//! plane.
//!
//! Data flow: a client POSTs an SDP offer to [`signaling`]; the [`control`] plane validates it
//! ([`offer`]), reserves a slot on the least-loaded media loop ([`registry`]), mints an ICE
//! ufrag that carries the routing hint for that loop, builds the str0m session ([`session`])
//! and hands it to the loop. From then on the loop ([`media_loop`]) owns it: its UDP socket
//! receives STUN, DTLS and SRTP, [`demux`] finds the session by ufrag (first authenticated STUN)
//! and then by client address, and [`timers`] wake it for str0m's deadlines. Loops report ends
//! back to the control plane; counters go to [`metrics`]. Each loop measures how busy it is
//! ([`busy_meter`]) so admission can refuse sessions a saturated loop could not carry.

pub mod audio_bridge;
pub mod bridge_service;
pub mod busy_meter;
pub mod config;
pub mod control;
pub mod demux;
pub mod dispatch;
pub mod media_loop;
pub mod metrics;
pub mod offer;
pub mod registry;
pub mod session;
pub mod signaling;
pub mod timers;
