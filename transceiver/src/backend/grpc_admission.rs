//! Who may use the gRPC edge, and how many workers may register there. Sans-IO: the edge
//! passes the `authorization` value and the peer's connection; nothing here does I/O.
//!
//! - The credential ([`check_credential`]): every gRPC call carries the bearer token the
//!   configuration resolved (`--grpc-token`, else the static signaling `--token`; see
//!   `control::config`), or none is needed at all: only on a transceiver whose signaling needs
//!   no credential either. A worker receives every dispatch (session ids and metadata) and a
//!   tap hears any call, so on a shared host an open gRPC port next to a guarded signaling port
//!   would be a way around it.
//! - Registrations ([`WorkerRegistrations`]): at most `per_connection` live `Work` streams on
//!   one HTTP/2 connection (a process registers one worker per transceiver) and `total` in all,
//!   so a credential holder gone wrong cannot grow the dispatcher's worker table without
//!   bound. A registration is held until its `Work` stream ends ([`WorkerSlot`]).
//!
//! Every refusal is counted (`voxgate_grpc_rejected_total{reason}`) at the edge.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::auth::bearer_allowed;
use crate::metrics::GrpcRefusal;

/// Checks an `authorization` value against the `required` token (`None`: every call passes).
pub fn check_credential(
    required: Option<&str>,
    authorization: Option<&str>,
) -> Result<(), GrpcRefusal> {
    if bearer_allowed(required, authorization) {
        Ok(())
    } else if authorization.is_none() {
        Err(GrpcRefusal::AuthMissing)
    } else {
        Err(GrpcRefusal::AuthInvalid)
    }
}

/// How many `Work` streams may be registered at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLimits {
    /// On one HTTP/2 connection.
    pub per_connection: usize,
    /// On the whole transceiver.
    pub total: usize,
}

/// The live registrations, by connection (its peer address: unique among live TCP
/// connections to one listener; `None` for a transport without one, counted as one).
#[derive(Debug)]
pub struct WorkerRegistrations {
    limits: WorkerLimits,
    by_connection: HashMap<Option<SocketAddr>, usize>,
    total: usize,
}

impl WorkerRegistrations {
    pub fn new(limits: WorkerLimits) -> Self {
        WorkerRegistrations {
            limits,
            by_connection: HashMap::new(),
            total: 0,
        }
    }

    /// Takes a registration on `conn` if both limits allow it.
    pub fn admit(&mut self, conn: Option<SocketAddr>) -> Result<(), WorkerRefused> {
        let on_conn = self.by_connection.get(&conn).copied().unwrap_or(0);
        if on_conn >= self.limits.per_connection {
            return Err(WorkerRefused::PerConnection(self.limits.per_connection));
        }
        if self.total >= self.limits.total {
            return Err(WorkerRefused::Total(self.limits.total));
        }
        self.by_connection.insert(conn, on_conn + 1);
        self.total += 1;
        Ok(())
    }

    /// Gives back a registration [`WorkerRegistrations::admit`] took on `conn`.
    pub fn release(&mut self, conn: Option<SocketAddr>) {
        if let Some(n) = self.by_connection.get_mut(&conn) {
            *n -= 1;
            if *n == 0 {
                self.by_connection.remove(&conn);
            }
            self.total -= 1;
        }
    }
}

/// A registration past a limit (answered RESOURCE_EXHAUSTED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WorkerRefused {
    #[error(
        "{0} workers are registered on this connection already (--max-workers-per-connection)"
    )]
    PerConnection(usize),
    #[error("{0} workers are registered already (--max-workers)")]
    Total(usize),
}

impl WorkerRefused {
    pub fn reason(self) -> GrpcRefusal {
        match self {
            WorkerRefused::PerConnection(_) => GrpcRefusal::WorkersPerConnection,
            WorkerRefused::Total(_) => GrpcRefusal::WorkersTotal,
        }
    }
}

/// One admitted registration, given back when dropped (its `Work` stream ended, or its
/// registration failed).
pub struct WorkerSlot {
    registrations: Arc<Mutex<WorkerRegistrations>>,
    conn: Option<SocketAddr>,
}

impl WorkerSlot {
    /// Admits a registration on `conn` into the shared `registrations`.
    pub fn take(
        registrations: &Arc<Mutex<WorkerRegistrations>>,
        conn: Option<SocketAddr>,
    ) -> Result<WorkerSlot, WorkerRefused> {
        lock(registrations).admit(conn)?;
        Ok(WorkerSlot {
            registrations: registrations.clone(),
            conn,
        })
    }
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        lock(&self.registrations).release(self.conn);
    }
}

/// The table is consistent after every method: a panic elsewhere while it was locked leaves it
/// usable.
fn lock(m: &Mutex<WorkerRegistrations>) -> std::sync::MutexGuard<'_, WorkerRegistrations> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_credential_must_be_presented_exactly() {
        assert_eq!(check_credential(None, None), Ok(()));
        assert_eq!(check_credential(None, Some("Bearer x")), Ok(()));
        assert_eq!(
            check_credential(Some("s3cret"), None),
            Err(GrpcRefusal::AuthMissing)
        );
        for wrong in ["s3cret", "Bearer s3cre", "Bearer s3cret ", "bearer s3cret"] {
            assert_eq!(
                check_credential(Some("s3cret"), Some(wrong)),
                Err(GrpcRefusal::AuthInvalid),
                "{wrong:?}"
            );
        }
        assert_eq!(
            check_credential(Some("s3cret"), Some("Bearer s3cret")),
            Ok(())
        );
    }

    #[test]
    fn registrations_are_capped_per_connection_and_in_total_and_given_back() {
        let registrations = Arc::new(Mutex::new(WorkerRegistrations::new(WorkerLimits {
            per_connection: 2,
            total: 3,
        })));
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let a1 = WorkerSlot::take(&registrations, Some(a)).unwrap();
        let _a2 = WorkerSlot::take(&registrations, Some(a)).unwrap();
        assert_eq!(
            WorkerSlot::take(&registrations, Some(a)).err(),
            Some(WorkerRefused::PerConnection(2))
        );
        let _b1 = WorkerSlot::take(&registrations, Some(b)).unwrap();
        assert_eq!(
            WorkerSlot::take(&registrations, Some(b)).err(),
            Some(WorkerRefused::Total(3)),
            "b has room, the transceiver has none"
        );
        // A stream that ends gives its registration back to its connection and to the total.
        drop(a1);
        let _b2 = WorkerSlot::take(&registrations, Some(b)).unwrap();
        assert_eq!(
            WorkerSlot::take(&registrations, Some(a)).err(),
            Some(WorkerRefused::Total(3))
        );
        let table = registrations.lock().unwrap();
        assert_eq!(table.total, 3);
        assert_eq!(table.by_connection.len(), 2);
    }
}
