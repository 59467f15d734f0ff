//! Why the transceiver's configuration cannot be used.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use crate::control::ingress::IngressError;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--loops must be between 1 and 256")]
    BadLoopCount,
    #[error("media port range {0}..{0}+{1} overflows")]
    PortOverflow(u16, usize),
    #[error("cannot read fleet key file {path}: {source}")]
    KeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--media-listen {0} is a wildcard address: set --internal-ip to the IP relays reach")]
    NoInternalIp(IpAddr),
    #[error("invalid fleet key: {0}")]
    Key(#[from] voxgate_proto::hint::KeyError),
    #[error(
        "{0} is set but empty: give it a token, or unset it (an empty token is not \"no auth\")"
    )]
    EmptyToken(&'static str),
    #[error(
        "{what} listens on {addr}, which is not loopback, and no token is configured: set {need}, \
         or pass --insecure-no-auth to serve it unauthenticated"
    )]
    PublicWithoutToken {
        what: &'static str,
        addr: SocketAddr,
        need: &'static str,
    },
    #[error(
        "signaling takes per-call tokens (--token-key-file) but gRPC has no credential, so any \
         local process could register as a worker and receive every call: set --grpc-token \
         (or --token, which gRPC then takes too)"
    )]
    GrpcWithoutCredential,
    #[error("cannot read token key file {path}: {source}")]
    TokenKeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("token key file {path}: {source}")]
    TokenKey {
        path: PathBuf,
        source: crate::auth::call_token::KeyTooShort,
    },
    #[error("resume key file {path}: the key must be at least 32 bytes (got {got})")]
    ResumeKey { path: PathBuf, got: usize },
    #[error("--post-rate-per-ip must be a finite number >= 0")]
    BadPostRate,
    #[error("--restart-rate-per-ip must be a finite number >= 0")]
    BadRestartRate,
    #[error("{0}")]
    Ingress(#[from] IngressError),
    #[error(
        "a fleet key (--fleet-key / --fleet-key-file) and {advertised} are set but --relays is \
         empty: every datagram the relays forward would be dropped (relay_not_allowed) and \
         callers would wait in ICE checking. Set --relays to the relays' networks (e.g. \
         --relays 10.0.0.0/8), or pass --no-relays if the advertised addresses reach this \
         transceiver directly"
    )]
    FleetKeyWithoutRelays { advertised: &'static str },
}
