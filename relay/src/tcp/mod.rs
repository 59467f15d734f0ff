//! ICE over TCP through the relay (RFC 6544 passive candidates, RFC 4571 framing).
//!
//! One thread ([`event_loop`]) owns the public TCP listener, every client connection and one
//! internal UDP socket. A connection's frames go out of that socket to the transceiver loop
//! (or peer relay) its first frame's hint names, each as one datagram behind a version 2
//! relay header (`Transport::Tcp { conn }`); the transceiver answers the socket that sent, so
//! every reply for a TCP client arrives on this thread and the UDP workers never see TCP.
//!
//! The protocol logic is Sans-IO, beside the loop: the framing both ways is
//! [`voxgate_proto::rfc4571`] (frames out of a byte stream, and the bounded, drop-oldest
//! bytes owed to a slow reader, shared with the transceiver and the clients);
//! [`connection`] (awaiting the first frame → tentative until the transceiver's first reply →
//! established, timers on `now`; only replies keep an established connection),
//! [`admission`] (connections per source, per IPv6 /56 and /48, and in all; when a newcomer
//! closes the oldest tentative connection).
//!
//! TCP connections are not written to the Redis route cache: a connection cannot outlive
//! the relay that holds it, so after a restart the client reconnects and its first frame
//! routes it again.

pub mod admission;
pub mod connection;
pub mod event_loop;

pub use admission::Refusal;
pub use connection::CloseReason;
