//! Requests about a live session, an extension of the control plane (signaling calls them;
//! the plane itself does not): ICE restart (`PATCH` with a new offer: the network changed
//! under the session, which keeps its loop, its DTLS/SRTP state and its backend), and the call
//! a session carries with what its resume credential is minted from.

use std::time::Instant;

use tokio::sync::oneshot;

use crate::auth::Credential;
use crate::control::control_error::ControlError;
use crate::control::offer::validate_offer;
use crate::control::plane::{ControlPlane, Requester};
use crate::control::registry::CallOf;
use crate::media::command::Command;
use crate::media::session::{SessionError, SessionId};

impl ControlPlane {
    /// Session `id`'s call, if `caller` controls the session.
    pub fn call_of(&self, id: SessionId, caller: &Credential) -> Option<CallOf> {
        self.registry.call_of(id, caller)
    }

    /// What a resume credential for session `id` says, if `caller` controls the session: its
    /// call, and the worker that holds it now.
    pub async fn resume_claims_for(
        &self,
        id: SessionId,
        caller: &Credential,
    ) -> Result<(CallOf, Option<String>), ControlError> {
        let call = self.call_of(id, caller).ok_or(ControlError::NotFound)?;
        Ok((call, self.dispatch().holder(id).await))
    }

    /// ICE restart: the session stays on its loop; a new ufrag is minted for that loop. Each
    /// costs str0m an offer and the loop a reworked session, so a session's restarts and a
    /// client IP's are rate-limited before the offer is looked at.
    pub async fn ice_restart(
        &self,
        id: SessionId,
        body: &[u8],
        requester: &Requester,
    ) -> Result<String, ControlError> {
        let loop_index = self.loop_for(id, &requester.credential)?;
        let now = Instant::now();
        self.registry
            .take_restart(id, now)
            .map_err(ControlError::SessionRestartLimited)?;
        if let Some(ip) = requester.client {
            let mut limiter = self
                .restart_limiter
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            limiter
                .check(now, ip)
                .map_err(ControlError::AddressRestartLimited)?;
        }
        let (offer, _) = validate_offer(body)?;
        let (ufrag, pass) = self.mint_credentials(loop_index);
        let (tx, rx) = oneshot::channel();
        let cmd = Command::IceRestart {
            id,
            offer: Box::new(offer),
            ufrag,
            pass,
            reply: tx,
        };
        self.loops()[loop_index]
            .send(cmd)
            .map_err(|e| ControlError::LoopBusy(e.0))?;
        match rx.await.ok().flatten() {
            None => Err(ControlError::NotFound),
            Some(Ok(answer)) => Ok(answer),
            Some(Err(SessionError::NotConnected)) => Err(ControlError::Conflict(
                SessionError::NotConnected.to_string(),
            )),
            Some(Err(e)) => Err(ControlError::Rejected(e.to_string())),
        }
    }
}
