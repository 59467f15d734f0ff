//! str0m's aws-lc-rs crypto, with one change: the DTLS configuration is built once per
//! process instead of once per session. The transceiver's sessions and the testkit's clients
//! both use it (`RtcConfig::set_crypto_provider(voxgate_dtls::crypto_provider())`).
//!
//! str0m's provider (`str0m-aws-lc-rs`) builds a fresh `dimpl::Config` for every `Rtc`, and
//! dimpl's `ConfigBuilder::build` always validates its crypto provider: full key exchanges on
//! X25519, P-256 and P-384 and signature checks. That elliptic-curve arithmetic was most of
//! the CPU of accepting an offer (the `setup/accept` benchmark), and under load the tail of
//! the server's answer time (docs/SESSION_COST.md, "Setting up a session"). The configuration
//! is immutable and dimpl takes it as an `Arc`, so one is built per MTU and shared.
//!
//! Everything else is str0m's own provider, through its public `CryptoProvider` fields: SRTP,
//! the hashes, certificate generation, and the dimpl state machine of each session.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use str0m::crypto::dtls::{
    DtlsCert, DtlsImplError, DtlsInstance, DtlsOutput, DtlsProvider, DtlsVersion, ProtocolVersion,
};
use str0m::crypto::{CryptoError, CryptoProvider};

/// The process's crypto provider for every `Rtc` (see the module doc).
pub fn crypto_provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    static DTLS: SharedConfigDtls = SharedConfigDtls {
        configs: Mutex::new(Vec::new()),
    };
    PROVIDER
        .get_or_init(|| {
            Arc::new(CryptoProvider {
                dtls_provider: &DTLS,
                ..str0m_aws_lc_rs::default_provider()
            })
        })
        .clone()
}

/// Builds DTLS instances on a shared configuration, one per MTU str0m asks for.
#[derive(Debug)]
struct SharedConfigDtls {
    /// Few entries (str0m asks with one MTU per `RtcConfig`); the lock only clones an `Arc`.
    configs: Mutex<Vec<(Option<usize>, Arc<dimpl::Config>)>>,
}

impl SharedConfigDtls {
    fn config(&self, mtu: Option<usize>) -> Result<Arc<dimpl::Config>, CryptoError> {
        let mut configs = self.configs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = configs.iter().find(|(m, _)| *m == mtu) {
            return Ok(c.clone());
        }
        // As str0m's provider builds it: ICE has verified return routability before DTLS
        // starts, which makes the server's cookie exchange redundant.
        let mut builder = dimpl::Config::builder()
            .with_crypto_provider(str0m_aws_lc_rs::dimpl_crypto_provider())
            .use_server_cookie(false);
        if let Some(mtu) = mtu {
            builder = builder.mtu(mtu);
        }
        let config = Arc::new(
            builder
                .build()
                .map_err(|e| CryptoError::Other(format!("dimpl config creation failed: {e}")))?,
        );
        configs.push((mtu, config.clone()));
        Ok(config)
    }
}

impl DtlsProvider for SharedConfigDtls {
    fn generate_certificate(&self) -> Option<DtlsCert> {
        str0m_aws_lc_rs::default_provider()
            .dtls_provider
            .generate_certificate()
    }

    fn new_dtls(
        &self,
        cert: &DtlsCert,
        now: Instant,
        dtls_version: DtlsVersion,
        mtu: Option<usize>,
    ) -> Result<Box<dyn DtlsInstance>, CryptoError> {
        let config = self.config(mtu)?;
        let cert = cert.clone();
        let dtls = match dtls_version {
            DtlsVersion::Dtls12 => dimpl::Dtls::new_12(config, cert, now),
            DtlsVersion::Dtls13 => dimpl::Dtls::new_13(config, cert, now),
            DtlsVersion::Auto => dimpl::Dtls::new_auto(config, cert, now),
            other => {
                return Err(CryptoError::Other(format!(
                    "unsupported DTLS version: {other}"
                )))
            }
        };
        Ok(Box::new(Instance { dtls }))
    }
}

/// One session's dimpl state machine behind str0m's `DtlsInstance`.
struct Instance {
    dtls: dimpl::Dtls,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").finish_non_exhaustive()
    }
}

impl DtlsInstance for Instance {
    fn set_active(&mut self, active: bool) {
        self.dtls.set_active(active);
    }

    fn handle_packet(&mut self, packet: &[u8]) -> Result<(), DtlsImplError> {
        self.dtls.handle_packet(packet)
    }

    fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> DtlsOutput<'a> {
        self.dtls.poll_output(buf)
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), DtlsImplError> {
        self.dtls.handle_timeout(now)
    }

    fn send_application_data(&mut self, data: &[u8]) -> Result<usize, DtlsImplError> {
        self.dtls.send_application_data(data)
    }

    fn is_active(&self) -> bool {
        self.dtls.is_active()
    }

    fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.dtls.protocol_version()
    }

    fn is_closing(&self) -> bool {
        self.dtls.is_closing()
    }

    fn is_closed(&self) -> bool {
        self.dtls.is_closed()
    }

    fn close(&mut self) -> Result<(), DtlsImplError> {
        self.dtls.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_config_per_mtu_is_built_and_shared() {
        let dtls = SharedConfigDtls {
            configs: Mutex::new(Vec::new()),
        };
        let a = dtls.config(Some(1150)).unwrap();
        let b = dtls.config(Some(1150)).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the second session reuses the first's");
        let c = dtls.config(Some(1200)).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.mtu(), 1200);
        assert!(!a.use_server_cookie(), "ICE already proved the path");
    }

    #[test]
    fn the_provider_makes_dtls_instances_on_a_generated_certificate() {
        let p = crypto_provider();
        let cert = p.dtls_provider.generate_certificate().expect("certificate");
        let mut d = p
            .dtls_provider
            .new_dtls(&cert, Instant::now(), DtlsVersion::Auto, Some(1150))
            .expect("instance");
        d.set_active(false);
        assert!(!d.is_active());
        assert!(Arc::ptr_eq(&p, &crypto_provider()), "one per process");
    }
}
