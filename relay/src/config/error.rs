//! Why the relay's configuration cannot be used.

use std::path::PathBuf;

/// Why the configuration cannot be used. Never contains key material.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No current fleet key given.
    #[error("a fleet key is required: --fleet-key, --fleet-key-file or VOXGATE_RELAY_FLEET_KEY")]
    MissingFleetKey,
    /// A key file could not be read.
    #[error("cannot read {what} file {path}: {source}")]
    KeyFile {
        /// Which key.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key is malformed (the error says how, without echoing it).
    #[error("invalid {what}: {source}")]
    BadKey {
        /// Which key.
        what: &'static str,
        /// What is wrong.
        source: voxgate_proto::KeyError,
    },
    /// A numeric setting is out of range.
    #[error("{0}")]
    OutOfRange(&'static str),
    /// The peer list names this relay's own cluster.
    #[error("--peer-cluster names this relay's own cluster id {0}")]
    PeerIsSelf(u32),
    /// The worker count does not fit the internal port range.
    #[error("--internal-listen port {port} + {workers} workers exceeds 65535")]
    InternalPorts {
        /// Base port.
        port: u16,
        /// Worker count.
        workers: usize,
    },
}
