//! The media path: everything a media loop thread owns, and nothing else.
//!
//! Owns: the loop (`loop.rs`: socket, poll, sessions), each WebRTC session ([`session`]: str0m
//! `Rtc` plus its [`audio_bridge`]), the demux maps ([`demux`]), the loop's own ICE-TCP listener
//! ([`tcp_server`], framing from `voxgate_proto::rfc4571`), the timer heap ([`timers`]),
//! the loop's busy meter ([`busy_meter`]), its share of a core under saturation
//! ([`core_share`]), its read rhythm under steady traffic ([`read_coalescing`]) and when a
//! datagram reached the socket rather than when it was read ([`arrival`]).
//!
//! May call: `voxgate_proto` (relay header, STUN USERNAME reader, RFC 4571 framing, bridge
//! messages), str0m, opus,
//! and [`crate::metrics`] (plain counters it publishes). Never the control plane or the backend
//! side: they reach a loop through `r#loop::LoopHandle` (a bounded channel plus a
//! `mio::Waker`) and hear back through `r#loop::LoopEvent`s, so nothing here waits on them.
//!
//! Data flow (the packet path, three files): `loop.rs` reads a batch from its socket → the
//! `proto` codecs unwrap a relay header and read a STUN USERNAME in place → [`demux`] names the
//! session → [`session::Session::handle_datagram`]; the loop then drains the session's output
//! into one `sendmmsg`. Audio leaves for backends through the session's bridge channels
//! (`try_send`), and backend audio comes back paced by the session's 20 ms tick.

pub mod arrival;
pub mod audio_bridge;
pub mod busy_meter;
pub mod core_share;
pub mod demux;
pub mod r#loop;
pub mod read_coalescing;
pub mod receive_budget;
pub mod session;
pub mod tcp_server;
pub mod thread_priority;
pub mod timers;
