//! The media path: everything a media loop thread owns, and nothing else.
//!
//! Owns: the loop's I/O ([`event_loop`]: thread, poll, UDP socket, ICE-TCP listener, send and
//! receive batches) and its logic with no I/O ([`endpoint`]: the sessions, the demux maps
//! ([`demux`]), the timer heap ([`timers`]), the relay allow-list, address claims and
//! commands; how many checks a session may hand str0m, [`check_budget`]; which ICE-TCP
//! connections each session opened, [`tcp_owners`]), each WebRTC session ([`session`]: str0m
//! `Rtc` plus its [`audio_bridge`]), the loop's own ICE-TCP listener ([`tcp_server`], framing
//! from `voxgate_proto::rfc4571`, caps per source from `voxgate_proto::source_caps`), the
//! loop's busy meter ([`busy_meter`]), its share of a core under saturation ([`core_share`]),
//! its read rhythm under steady traffic ([`read_coalescing`]), each call's network quality from
//! RTCP ([`quality`]), how many batches a wakeup reads
//! ([`receive_budget`]) and when a datagram reached the socket rather than when it was read
//! ([`arrival`]).
//!
//! May call: `voxgate_proto` (relay header, STUN USERNAME reader, RFC 4571 framing, per-source
//! caps, bridge messages), str0m, opus, and [`crate::metrics`] (plain counters it publishes). Never the
//! control plane or the backend side: they reach a loop through `event_loop::LoopHandle` (a
//! bounded channel of [`command::Command`]s plus a `mio::Waker`) and hear back through
//! [`command::LoopEvent`]s and [`command::SessionEnded`], so nothing here waits on them.
//!
//! Data flow (the packet path, three files): [`event_loop`] reads a batch from its socket →
//! [`endpoint`] unwraps a relay header and reads a STUN USERNAME in place (`proto` codecs),
//! and [`demux`] names the session → [`session::Session::handle_datagram`]; the endpoint then
//! drains the session's output into the event loop's `sendmmsg` batch. Audio leaves for
//! backends through the session's bridge channels (`try_send`), and backend audio comes back
//! paced by the session's 20 ms tick.

pub mod arrival;
pub mod audio_bridge;
pub mod busy_meter;
pub mod check_budget;
pub mod command;
pub mod core_share;
pub mod demux;
pub mod endpoint;
pub mod event_loop;
pub mod loop_settings;
pub mod quality;
pub mod read_coalescing;
pub mod receive_budget;
pub mod rtcp_bounds;
pub mod session;
pub mod tcp_owners;
pub mod tcp_server;
pub mod thread_priority;
pub mod timers;
pub mod turn_timing;
