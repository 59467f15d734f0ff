//! Who may create sessions (signaling) and who may serve them (gRPC), failing closed.

use std::path::PathBuf;

use super::error::ConfigError;
use super::listen::ListenFlags;
use crate::auth::{Authenticator, CallTokenKey};

/// Who may create sessions and who may serve them.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Authentication")]
pub struct AuthFlags {
    /// Bearer token required on /v1/* when set.
    #[arg(long, env = "VOXGATE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// File holding the key (at least 32 bytes, surrounding whitespace ignored) that signs
    /// short-lived per-call tokens minted by the application (`v1.<payload>.<mac>`, see the
    /// README); accepted on /v1/* beside --token.
    #[arg(long, env = "VOXGATE_TOKEN_KEY_FILE")]
    pub token_key_file: Option<PathBuf>,

    /// Bearer token required on every gRPC call when set. Without it, gRPC calls need the
    /// static --token when signaling has one, and a transceiver with only --token-key-file
    /// refuses to start.
    #[arg(long, env = "VOXGATE_GRPC_TOKEN", hide_env_values = true)]
    pub grpc_token: Option<String>,

    /// Start without any token even though signaling or gRPC listens on a non-loopback
    /// address (by default such a transceiver refuses to start). For trusted networks only;
    /// it never opens gRPC while signaling needs a credential.
    #[arg(long, env = "VOXGATE_INSECURE_NO_AUTH", default_value_t = false)]
    pub insecure_no_auth: bool,
}

impl AuthFlags {
    /// An empty token is a mistake (a template that forgot to fill it), not "no auth".
    pub fn check_tokens(&self) -> Result<(), ConfigError> {
        if self.token.as_deref() == Some("") {
            return Err(ConfigError::EmptyToken("--token / VOXGATE_TOKEN"));
        }
        if self.grpc_token.as_deref() == Some("") {
            return Err(ConfigError::EmptyToken("--grpc-token / VOXGATE_GRPC_TOKEN"));
        }
        Ok(())
    }

    /// A listener on a non-loopback address needs a token unless `--insecure-no-auth` says
    /// otherwise.
    pub fn check_binds(&self, listen: &ListenFlags) -> Result<(), ConfigError> {
        if self.insecure_no_auth {
            return Ok(());
        }
        if self.token.is_none()
            && self.token_key_file.is_none()
            && !listen.signal_listen.ip().is_loopback()
        {
            return Err(ConfigError::PublicWithoutToken {
                what: "signaling (--signal-listen)",
                addr: listen.signal_listen,
                need: "--token or --token-key-file",
            });
        }
        if self.grpc_token.is_none() && !listen.grpc_listen.ip().is_loopback() {
            return Err(ConfigError::PublicWithoutToken {
                what: "the gRPC bridge (--grpc-listen)",
                addr: listen.grpc_listen,
                need: "--grpc-token",
            });
        }
        Ok(())
    }

    /// The bearer token every gRPC call must carry, or `None` when no call needs one. A worker
    /// receives every dispatch (session ids, metadata) and a tap hears any call, so gRPC needs
    /// a credential whenever signaling does: `--grpc-token`, else the static `--token`. With
    /// only per-call tokens (`--token-key-file`) there is none to fall back on, and that is an
    /// error naming `--grpc-token`. Only a transceiver whose signaling is open too (loopback,
    /// or `--insecure-no-auth`) serves gRPC without one.
    pub fn grpc_credential(&self) -> Result<Option<&str>, ConfigError> {
        match (&self.grpc_token, &self.token, &self.token_key_file) {
            (Some(grpc), _, _) => Ok(Some(grpc)),
            (None, Some(signaling), _) => Ok(Some(signaling)),
            (None, None, Some(_)) => Err(ConfigError::GrpcWithoutCredential),
            (None, None, None) => Ok(None),
        }
    }

    /// The signaling authenticator: the static token and the per-call token key, if any.
    pub fn authenticator(&self) -> Result<Authenticator, ConfigError> {
        let call_key = match &self.token_key_file {
            None => None,
            Some(path) => {
                let bytes = std::fs::read(path).map_err(|source| ConfigError::TokenKeyFile {
                    path: path.clone(),
                    source,
                })?;
                Some(CallTokenKey::from_file_contents(&bytes).map_err(|source| {
                    ConfigError::TokenKey {
                        path: path.clone(),
                        source,
                    }
                })?)
            }
        };
        Ok(Authenticator {
            static_token: self.token.clone(),
            call_key,
        })
    }
}
