//! voxgate relay: the thin UDP forwarder between WebRTC clients and transceiver loops.
//!
//! # The packet path (three files)
//!
//! 1. [`worker`]: each worker thread owns a public socket (the client-facing port, shared
//!    with SO_REUSEPORT so the kernel keeps a flow on one worker) and an internal socket
//!    (its own port, so transceiver replies come back to the worker that owns the flow). It
//!    reads both in batches and acts on each datagram's [`Verdict`](flow_table::Verdict).
//! 2. [`flow_table`]: the whole decision, Sans-IO. A client's first datagram must be a STUN
//!    binding request whose server ufrag is an authentic routing hint
//!    ([`voxgate_proto::hint`]); it creates a tentative flow `client → transceiver loop` and
//!    is forwarded behind a [`RelayHeader`](voxgate_proto::RelayHeader) naming the client.
//!    Later datagrams of the flow are forwarded opaquely. Replies on the internal socket,
//!    only from transceiver networks and only from the flow's own loop, establish the flow
//!    and go back to the client with the header stripped. Everything else is dropped and
//!    counted by reason; nothing is ever answered.
//! 3. [`batch_io`]: `recvmmsg` / `sendmmsg` over preallocated buffers; the crate's only
//!    `unsafe`.
//!
//! Beside the decision, below everything that uses them: [`first_hop`] (may a binding request
//! open a flow or a TCP connection, and to which next hop; both transports ask it),
//! [`drop_reason`] (why a datagram was not forwarded, the `reason` label of every drop
//! counter) and, from the proto crate, [`voxgate_proto::source_caps`] (the unit per-source
//! caps count, and the TCP caps per source and IPv6 /56 and /48, shared with the transceiver).
//!
//! Off the packet path: [`route_cache`] (a thread owning the Redis connection: routes of
//! established flows are written there so that, after a relay restart, an unknown
//! non-STUN datagram can restore its flow by lookup), [`metrics`] (Prometheus counters
//! published by workers periodically, served at `/metrics` by [`metrics_http`]), [`config`] (flags and their
//! `VOXGATE_RELAY_*` environment twins), [`runtime`] (starting and stopping the threads).
//!
//! ICE over TCP ([`tcp`]): one more thread owns the public TCP listener and its connections;
//! each RFC 4571 frame travels to the transceiver as one datagram with a version 2 header,
//! from and back to that thread's own internal socket, so the UDP workers never wait on TCP.
//!
//! Flows of another cluster go to that cluster's relay with the header (the global tier):
//! the same binary receives them on its public port, from configured peers only.

/// Batched UDP I/O, shared with the transceiver (crate `voxgate-udp-batch`).
pub use voxgate_udp_batch as batch_io;
pub mod config;
pub mod drop_reason;
pub mod first_hop;
pub mod flow_table;
pub mod metrics;
pub mod metrics_http;
pub mod route_cache;
pub mod runtime;
pub mod tcp;
pub mod worker;
