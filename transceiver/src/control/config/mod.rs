//! Command-line and environment configuration of the transceiver.
//!
//! Every flag has an environment twin (`--signal-listen` ↔ `VOXGATE_SIGNAL_LISTEN`), so a
//! container is configured through env vars and mounted secret files alone.
//!
//! The flags come in groups, one per component, each under its own help heading
//! (`docs/FLAGS.md` lists them, generated from these definitions), and each group builds its
//! component's settings: [`MediaLoopFlags`] the media loops' [`LoopSettings`] (with the relay
//! networks of [`RoutingFlags`] and the ICE-TCP limits of [`IceTcpFlags`]), [`BackendFlags`]
//! the dispatcher's `DispatchConfig`, [`AuthFlags`] the signaling `Authenticator`,
//! [`IngressFlags`] the `IngressSelector`, and so on. What needs several groups is built
//! here: the control plane's [`ControlPlaneConfig`], the auth checks, the loop count.

mod admission;
mod auth;
mod backend;
mod cidr;
mod error;
mod listen;
mod media;
mod relays;

use std::net::IpAddr;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use voxgate_proto::hint::FleetKey;

pub use admission::{AdmissionFlags, SessionFlags};
pub use auth::AuthFlags;
pub use backend::BackendFlags;
pub use error::ConfigError;
pub use listen::{ListenFlags, SignalingFlags};
pub use media::{EncoderFlags, IceTcpFlags, MediaLoopFlags, TcpListen};
pub use relays::{IngressFlags, KeySource, RoutingFlags};

use crate::backend::bridge_service::GrpcAdmission;
use crate::control::ingress::IngressSelector;
use crate::control::plane::ControlPlaneConfig;
use crate::media::loop_settings::LoopSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// voxgate transceiver: terminates WebRTC (ICE-lite, DTLS-SRTP, Opus, data channels) for many
/// sessions on one UDP socket per media loop, with WHIP-style HTTP signaling.
#[derive(Debug, Clone, Parser)]
#[command(name = "transceiver", version, about, long_about = None)]
pub struct Config {
    #[command(flatten)]
    pub listen: ListenFlags,
    #[command(flatten)]
    pub media: MediaLoopFlags,
    #[command(flatten)]
    pub routing: RoutingFlags,
    #[command(flatten)]
    pub ingress: IngressFlags,
    #[command(flatten)]
    pub ice_tcp: IceTcpFlags,
    #[command(flatten)]
    pub admission: AdmissionFlags,
    #[command(flatten)]
    pub sessions: SessionFlags,
    #[command(flatten)]
    pub signaling: SignalingFlags,
    #[command(flatten)]
    pub backend: BackendFlags,
    #[command(flatten)]
    pub auth: AuthFlags,
    #[command(flatten)]
    pub encoder: EncoderFlags,
    #[command(flatten)]
    pub logging: LogFlags,
}

/// How the transceiver logs.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct LogFlags {
    /// Log format.
    #[arg(long, env = "VOXGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Config {
    /// How many media loops to run (`--loops`, on consecutive ports from `--media-listen`).
    pub fn loop_count(&self) -> Result<usize, ConfigError> {
        self.media.loop_count(self.listen.media_listen)
    }

    /// The IP written into routing hints.
    pub fn internal_ip(&self) -> Result<IpAddr, ConfigError> {
        self.routing.internal_ip(self.listen.media_listen)
    }

    /// Checks the authentication settings and fails closed: an empty token is a mistake (a
    /// template that forgot to fill it), not "no auth"; a listener on a non-loopback address
    /// needs a token unless `--insecure-no-auth` says otherwise; and gRPC needs a credential
    /// whenever signaling does.
    pub fn check_auth(&self) -> Result<(), ConfigError> {
        self.auth.check_tokens()?;
        self.admission.check_post_rate()?;
        self.auth.check_binds(&self.listen)?;
        self.auth.grpc_credential().map(|_| ())
    }

    /// What the gRPC edge admits: the credential calls need ([`AuthFlags::grpc_credential`])
    /// and the workers' registration limits.
    pub fn grpc_admission(&self) -> Result<GrpcAdmission, ConfigError> {
        Ok(GrpcAdmission {
            credential: self.auth.grpc_credential()?.map(Arc::from),
            workers: self.backend.worker_limits(),
        })
    }

    /// Refuses a fleet key with advertised relay addresses but no `--relays` (see
    /// [`RoutingFlags::check_relays`]).
    pub fn check_relays(&self) -> Result<(), ConfigError> {
        self.routing.check_relays(&self.ingress)
    }

    /// What every media loop shares.
    pub fn loop_settings(&self) -> LoopSettings {
        self.media
            .loop_settings(self.routing.relays.clone(), self.ice_tcp.tcp_limits())
    }

    /// The control plane's settings, given the fleet key and the validated ingress map (from
    /// [`RoutingFlags::fleet_key`] and [`IngressFlags::selector`]).
    pub fn control_plane(
        &self,
        fleet_key: FleetKey,
        ingress: Option<IngressSelector>,
    ) -> Result<ControlPlaneConfig, ConfigError> {
        let admission = &self.admission;
        Ok(ControlPlaneConfig {
            fleet_key,
            cluster_id: self.routing.cluster_id,
            internal_ip: self.internal_ip()?,
            ingress,
            advertise_tcp: self.ice_tcp.advertise_tcp_candidates(),
            connect_timeout: self.sessions.connect_timeout(),
            max_sessions: admission.max_sessions,
            encoder: self.encoder.settings(),
            require_backend: admission.require_backend,
            max_loop_busy: admission.max_loop_busy,
            max_process_cpu: admission.max_process_cpu,
            max_sessions_per_ip: admission.max_sessions_per_ip,
            rate_limit: admission.rate_limit(),
            restart_rate_limit: admission.restart_rate_limit(),
            max_session: self.sessions.max_session_duration(),
            backend_stall: self.backend.backend_stall(),
        })
    }
}

#[cfg(test)]
mod tests;
