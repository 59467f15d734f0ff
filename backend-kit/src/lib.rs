//! voxgate's backend kit: the Rust client of the transceiver's gRPC `voxgate.v1.Bridge` service
//! (`proto/grpc/voxgate.proto`). The echo bot, loadgen's backend and the transceiver's test
//! backend all speak the protocol through it, as Python backends do through `sdk/python`.
//!
//! How data flows:
//!
//! ```text
//!  transceiver ──Work: Dispatch──► WorkStream ──Offer──► attach (AttachSettings) on a transport
//!              ◄─Work: Register, Load, Reject── WorkSender ◄── decline (names the attempt)
//!
//!  Session:    CallSender ─SessionOut─► one Session stream per call ─► transceiver
//!              handler    ◄─CallEvent── reader task ◄──── Uplink ────── transceiver
//!  Multiplex:  CallSender ─ChannelOut─► Batches (BatchBuilder) ─MultiplexDownlink─► transceiver
//!              handler    ◄─CallEvent── router (ChannelTable) ◄─MultiplexUplink──── transceiver
//! ```
//!
//! A call's downlink goes through its [`CallSender`]; every message is measured by its encoded
//! size first, and one the transceiver would refuse (over 256 KiB: it drops it, and older
//! transceivers ended the stream and, on a `Multiplex` stream, every call on it) is refused for
//! that call alone, typed and counted ([`message_size`]). A call's uplink reaches its
//! [`CallHandler`], on the reader of its stream and in order.
//!
//! Two ways to use it:
//! - [`Worker`] is a whole worker process's side: a subscription per transceiver kept up with
//!   backoff, one capacity ([`Slots`]) shared by all of them, load reports, declines, graceful
//!   drain; each accepted offer is handed to the backend as a [`Call`] to serve (the echo bot).
//! - A harness that wants each message on the reader itself (loadgen timing arrivals, a test
//!   backend recording them) opens a [`WorkStream`] and attaches each [`Offer`] with its own
//!   handler, via [`attach_session`] or a [`MultiplexClient`].
//!
//! Logic lives in plain structs tested without sockets: [`BatchBuilder`] (what one
//! `MultiplexDownlink` holds), [`ChannelTable`] (routing by channel), [`AttachAttempt`] (what
//! an attach came to and whether to decline its offer), [`Slots`]. tokio and tonic stay at the
//! edges: [`Bridge`], the streams' tasks, [`Worker`].

pub mod attach_attempt;
pub mod bridge;
pub mod call_event;
pub mod call_sender;
pub mod message_size;
pub mod multiplex;
pub mod offer;
pub mod session_call;
pub mod slots;
pub mod transport;
pub mod work_stream;
pub mod worker;

pub use attach_attempt::{AttachAttempt, AttachFailure, AttachOutcome};
pub use bridge::{bearer, error_chain, Bridge, ConnectError, InvalidToken};
pub use call_event::{CallEvent, CallHandler};
pub use call_sender::{CallSender, SendError};
pub use message_size::{TooLarge, MAX_MESSAGE_BYTES};
pub use multiplex::batch::{BatchBuilder, BatchLimits};
pub use multiplex::channel_table::ChannelTable;
pub use multiplex::MultiplexClient;
pub use offer::{AttachSettings, Offer};
pub use session_call::attach_session;
pub use slots::{Slot, Slots};
pub use transport::Transport;
pub use work_stream::{Registration, WorkSender, WorkStream};
pub use worker::{AttachError, Call, Worker};
