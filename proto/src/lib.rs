//! Wire contracts shared by the voxgate relay and transceiver, as pure codecs with no I/O.
//!
//! Four codecs, in the order a client's packets meet them:
//!
//! 1. [`hint`]: at signaling, the transceiver [`mint`]s the server ICE ufrag. It is an
//!    encrypted, authenticated routing hint (cluster id, owning media-loop address, and mint
//!    time, so relays can stop routing old ufrags) under a fleet key shared by relays and
//!    transceivers, spelled in ICE characters.
//! 2. [`stun_username`]: the client's first STUN Binding request reaches a relay. The relay
//!    reads its USERNAME in place ([`server_ufrag`]), decodes the hint with no lookup
//!    ([`decode`]), and creates a flow only if it authenticates. The transceiver uses the same
//!    reader to find the session a check belongs to.
//! 3. [`relay_header`]: the relay forwards every datagram of the flow to the transceiver loop
//!    behind a small [`RelayHeader`] carrying the client address; the transceiver answers
//!    through the relay with the same header, direction flipped. The header's first byte lies
//!    outside the RFC 7983 ranges, so relayed and direct packets share one socket.
//! 4. [`rfc4571`]: a client that cannot use UDP runs ICE over TCP (RFC 6544); its connection
//!    (to a relay or a transceiver loop) carries each datagram behind a 2-byte length. The
//!    module holds the one frame decoder and bounded drop-oldest write queue every side uses.
//!
//! Beside the codecs, [`source_caps`] says who counts as one client (an IPv4 address or an IPv6
//! /64) and counts the connections one network holds, per source and per IPv6 /56 and /48: the
//! ICE-TCP listeners of the relay and of the transceiver's loops apply the same caps.
//!
//! Every decoder takes `&[u8]`, returns borrowed views or small `Copy` values, never
//! allocates (the RFC 4571 stream decoder allocates its one buffer when it is made) and never
//! panics, whatever the input; errors are typed and carry a short `as_str()` label for drop
//! counters.
//!
//! ```
//! use voxgate_proto::{decode, mint, server_ufrag, Direction, FleetKey, Keyring, MintTime, RelayHeader, RoutingHint};
//!
//! let key = FleetKey::new(1, [7; 32]); // from the fleet secret, never from code
//! let hint = RoutingHint { cluster_id: 3, loop_addr: "10.0.0.5:40001".parse().unwrap() };
//! // Transceiver, at signaling (the nonce comes from a CSPRNG):
//! // (the mint time comes from the wall clock: MintTime::from_system_time(SystemTime::now()))
//! let ufrag = mint(&key, &hint, MintTime::from_unix_secs(1_704_067_200), [0x5a; 12]);
//!
//! // Client -> relay: a Binding request whose USERNAME is "<server ufrag>:<client ufrag>".
//! let username = format!("{ufrag}:cli1");
//! let mut stun = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
//! stun.extend_from_slice(&[0; 12]); // transaction id
//! stun.extend_from_slice(&[0x00, 0x06, 0, username.len() as u8]);
//! stun.extend_from_slice(username.as_bytes());
//! stun.resize(stun.len().next_multiple_of(4), 0);
//! let len = (stun.len() - 20) as u16;
//! stun[2..4].copy_from_slice(&len.to_be_bytes());
//!
//! // Relay: route with no lookup, then frame the datagram for the transceiver loop.
//! let route = decode(&Keyring::new(key), server_ufrag(&stun).unwrap()).unwrap();
//! assert_eq!(route, hint);
//! let header = RelayHeader::udp(Direction::ToTransceiver, "198.51.100.7:5000".parse().unwrap());
//! let mut out = [0u8; 1500];
//! let n = header.encode(&mut out).unwrap();
//! out[n..n + stun.len()].copy_from_slice(&stun);
//!
//! // Transceiver: unframe, and see the client address and the original datagram.
//! let (got, payload) = RelayHeader::decode(&out[..n + stun.len()]).unwrap();
//! assert_eq!(got.client, header.client);
//! assert_eq!(payload, &stun[..]);
//! ```

pub mod hint;
pub mod relay_header;
pub mod rfc4571;
pub mod rtp_header;
pub mod source_caps;
pub mod stun_username;

pub use hint::{
    decode, decode_timed, mint, mint_into, mint_untimed, DecodedHint, FleetKey, HintError,
    KeyError, Keyring, MintTime, RoutingHint, MAX_UFRAG_LEN, NONCE_LEN,
};
pub use relay_header::{
    is_relay_framed, Direction, HeaderError, RelayHeader, Transport, MAGIC_V1, MAGIC_V2,
    MAX_HEADER_LEN,
};
pub use stun_username::{
    binding_request_username, looks_like_stun, server_ufrag, split_username, StunError,
    MAGIC_COOKIE,
};

/// The gRPC audio bridge API (`grpc/voxgate.proto`, package `voxgate.v1`): backends subscribe
/// as workers, get sessions dispatched, and exchange PCM (or Opus) with the transceiver.
/// Read the .proto for the protocol; this module is the generated prost/tonic code.
#[cfg(feature = "grpc")]
pub mod bridge {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("voxgate.v1");
}
