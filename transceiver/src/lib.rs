//! voxgate transceiver: terminates WebRTC for many sessions and exposes them to the control
//! plane.
//!
//! Data flow: a client POSTs an SDP offer to [`control::signaling`]; the control plane
//! ([`control::plane`]) validates it ([`control::offer`]), reserves a slot on the least-loaded
//! media loop ([`control::registry`]), mints an ICE ufrag that carries the routing hint for that
//! loop, builds the str0m session ([`media::session`]) and hands it to the loop. From then on
//! the loop owns it: its UDP socket ([`media::event_loop`]) receives STUN, DTLS and SRTP, its
//! endpoint ([`media::endpoint`]) routes each datagram, [`media::demux`] finds the session by
//! ufrag (first authenticated STUN) and then by client address, and [`media::timers`] wake it
//! for str0m's deadlines. Loops report ends back to the
//! control plane; counters go to [`metrics`]. Each loop measures how busy it is
//! ([`media::busy_meter`]) so admission can refuse sessions a saturated loop could not carry.
//! The backend side ([`backend`]) dispatches each new session to a gRPC worker, whose stream
//! then carries the session's audio ([`media::audio_bridge`]); [`auth`] checks the bearer
//! tokens of both the HTTP and the gRPC edge.
//!
//! Layers, each calling only those below it: [`auth`] and [`metrics`]; [`media`]; the
//! dispatcher's inbox ([`backend::dispatch`], [`backend::dispatch_handle`]); [`control`]; the
//! gRPC edge and the dispatcher task ([`backend::bridge_service`], [`backend::dispatch_task`]).

pub mod auth;
pub mod backend;
pub mod control;
pub mod log_filter;
pub mod media;
pub mod metrics;
