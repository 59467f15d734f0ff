//! voxgate's load generator and benchmark suite.
//!
//! The `loadgen` binary drives real WebRTC sessions (the testkit's str0m client, real Opus at
//! 50 packets/s) into a transceiver or into Janus, runs the backend they talk to, drives
//! relay-shaped UDP flows through the relay, a bare forwarder or coturn, and reads what the
//! kernel charged each server process. `scripts/bench` runs the whole suite and writes
//! `docs/BENCHMARKS.md`.
//!
//! How data flows through a session run ([`session_load`]):
//!
//! ```text
//!  arrivals (seeded Poisson) ─► signaling threads ─► Fleet (one mio thread, all sessions)
//!        POST /v1/sessions  or  Janus create/attach/message          │ SRTP/Opus
//!                                                                     ▼
//!                                            transceiver ─► gRPC ─► backend (echo / duty)
//!                                            /proc/<pid>: CPU, RSS    latency, loss
//! ```
//!
//! and through a relay run ([`relay_load`]):
//!
//! ```text
//!  flow sockets ─► relay | forwarder | coturn ─► sink (kernel RX timestamps, counts)
//! ```
//!
//! Everything measured lands in JSON ([`suite::SuiteResults`]); each scenario ([`scenarios`])
//! owns its part of it, its report section, its Targets rows and its "why" note; [`report`]
//! puts them in one Markdown document with SVG plots. Nothing in a report is typed in by hand.

pub mod addr_arg;
pub mod backend;
pub mod cli;
pub mod codec_floor;
pub mod codec_quality;
pub mod forwarder;
pub mod janus;
pub mod json_out;
pub mod loss;
pub mod proc_stat;
pub mod prom_hist;
pub mod relay_load;
pub mod report;
pub mod scenarios;
pub mod session_load;
pub mod socket_buffers;
pub mod stats;
pub mod stun_probe;
pub mod suite;
pub mod svg;
pub mod turn;
