//! The backend side: dispatch of sessions to inference workers, and the gRPC bridge they use.
//!
//! Owns: the Sans-IO dispatcher ([`dispatch`]), its inbox ([`dispatch_handle`]), the task that
//! feeds it messages and time and carries out its decisions ([`dispatch_task`]), and the
//! `voxgate.v1.Bridge` gRPC service ([`bridge_service`]: who may call it and how many workers
//! may register in [`grpc_admission`]; a `Multiplex` stream's many sessions in [`multiplex`];
//! attaching either kind of stream to a session in [`attach`]; the limits on a backend's
//! messages, and why one over them costs only its own call, in [`message_size`]), whose
//! connections coalesce a runtime tick's writes into one system call ([`write_coalescing`]).
//!
//! Layers: [`message_size`] depends on nothing of the crate, [`grpc_admission`] only on
//! [`crate::auth`] and [`crate::metrics`]. [`dispatch`] and [`dispatch_handle`] sit below the
//! control plane (it sends new, lost and ended sessions into the inbox, as it sends commands to
//! a loop); [`dispatch_task`], [`attach`], [`multiplex`] and [`bridge_service`] (in that order)
//! sit above it and call [`crate::control::plane::ControlPlane`] to attach streams to sessions
//! or end them. They may also call [`crate::auth`], [`crate::metrics`] and the types
//! [`crate::media`] exports for attaching (`OwnerEndpoints`, `AttachError`, `SessionId`).
//!
//! Data flow: a worker's `Work` stream registers with the dispatcher → the dispatcher offers it
//! a new session → the worker opens a `Session` stream (or a channel of its `Multiplex` stream,
//! [`multiplex`]) that attaches as the owner → the session's loop sends uplink frames down that
//! stream and drains its downlink queue.

pub mod attach;
pub mod bridge_service;
pub mod dispatch;
pub mod dispatch_handle;
pub mod dispatch_task;
pub mod grpc_admission;
pub mod message_size;
pub mod multiplex;
pub mod write_coalescing;
