//! The control plane: configuration, signaling, admission and the session index.
//!
//! Owns: the process configuration ([`config`]: the flags in groups, each building its
//! component's settings, including the media loops' `LoopSettings` and the control plane's
//! `ControlPlaneConfig`), the WHIP-shaped HTTP edge ([`signaling`]), offer
//! validation against what voxgate serves ([`offer`]), the backend's metadata kept in a signed
//! and a caller-supplied map ([`call_metadata`]), why a request failed ([`control_error`]),
//! who a request really comes from behind trusted proxies
//! ([`client_origin`]), which relay ingress a new session advertises ([`ingress`]), the session → loop index with admission ([`registry`]), the whole process's CPU share that
//! admission also reads ([`process_load`]) with what a PCM session's codecs cost on this
//! machine ([`codec_cost`]), and the
//! [`plane::ControlPlane`] that ties them together and runs on the tokio runtime.
//!
//! May call: [`crate::media`] only through its handles (`LoopHandle` commands, `LoopEvent`s
//! back, `Session::accept` on the blocking pool before a session is handed over), the
//! dispatcher only through its inbox ([`crate::backend::dispatch_handle::DispatchHandle`], as a
//! loop's is its handle) and its settings (`DispatchConfig`, which [`config`] builds),
//! [`crate::auth`] and [`crate::metrics`]. Never the gRPC edge or the dispatcher task: they
//! call the control plane, not the other way round.
//!
//! Data flow: `POST /v1/sessions` → [`signaling`] (auth, content type, [`client_origin`]) →
//! [`plane`] ([`offer`] checks, [`registry`] reserves a loop, [`ingress`] picks the relay
//! addresses, mint the ufrag, str0m answers) → the loop's
//! command queue; the loop's end events come back to [`plane::ControlPlane::run_events`].

pub mod call_metadata;
pub mod client_origin;
pub mod codec_cost;
pub mod config;
pub mod control_error;
pub mod drain;
pub mod ingress;
pub mod live_session;
pub mod offer;
pub mod plane;
pub mod process_load;
pub mod rate_limit;
pub mod registry;
pub mod resume_gate;
pub mod signaling;
pub mod signaling_server;
pub mod talk_crest;
