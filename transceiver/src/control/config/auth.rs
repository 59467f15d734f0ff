//! Who may create sessions (signaling) and who may serve them (gRPC), failing closed.

use std::path::PathBuf;

use super::error::ConfigError;
use super::listen::ListenFlags;
use crate::auth::{Authenticator, CallTokenKey, ResumeKey};

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

    /// File holding the key (at least 32 bytes) that signs resume credentials: the same file
    /// on every transceiver of a fleet, so that a call resumes on any of them
    /// (docs/continuity.md). Default: derived from --token-key-file, else from the fleet key
    /// (--fleet-key-file, which every transceiver of a fleet shares anyway); without any, a
    /// random key per process (a call then resumes only where its credential was minted).
    #[arg(long, env = "VOXGATE_RESUME_KEY_FILE")]
    pub resume_key_file: Option<PathBuf>,

    /// How long a resume credential is valid (the client refreshes it while its session lives).
    #[arg(long, env = "VOXGATE_RESUME_TTL_SECS", default_value_t = 120,
          value_parser = clap::value_parser!(u64).range(10..=3600))]
    pub resume_ttl_secs: u64,

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

    /// The signaling authenticator: the static token and the per-call token key, if any, and
    /// the resume key (`fleet_key`: the fleet's shared secret, one more source to derive it
    /// from).
    pub fn authenticator(&self, fleet_key: Option<&[u8]>) -> Result<Authenticator, ConfigError> {
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
        let resume_key = match (&self.resume_key_file, &self.token_key_file) {
            (Some(path), _) => {
                let bytes = std::fs::read(path).map_err(|source| ConfigError::TokenKeyFile {
                    path: path.clone(),
                    source,
                })?;
                ResumeKey::from_file_contents(&bytes).map_err(|e| ConfigError::ResumeKey {
                    path: path.clone(),
                    got: e.0,
                })?
            }
            (None, Some(path)) => {
                let bytes = std::fs::read(path).map_err(|source| ConfigError::TokenKeyFile {
                    path: path.clone(),
                    source,
                })?;
                ResumeKey::derived_from(bytes.trim_ascii())
            }
            (None, None) if fleet_key.is_some() => {
                ResumeKey::derived_from(fleet_key.unwrap_or_default())
            }
            (None, None) => {
                tracing::info!(
                    "no --resume-key-file, --token-key-file or fleet key: resume credentials \
                     are signed with a random key and resume calls on this transceiver only"
                );
                ResumeKey::random()
            }
        };
        Ok(Authenticator {
            static_token: self.token.clone(),
            call_key,
            resume_key,
        })
    }
}
