//! What an attach came to, read from the first events of its call, and whether the offer it
//! answered must be declined.
//!
//! The rules (the contract is in `proto/grpc/voxgate.proto`, flow step 5):
//! - ATTACHED: the call is this worker's.
//! - Closed OK before any answer: the session ended or was released meanwhile; nothing to
//!   decline.
//! - Closed with another status (NOT_FOUND, FAILED_PRECONDITION, ...): refused; decline, so the
//!   transceiver moves on at once rather than after its attach timeout.
//! - The stream gone before any answer: the transceiver re-offers the sessions of a stream it
//!   lost at once, so this offer may have come after it saw the break and before this worker
//!   did, and the attach went into a dead stream. Declining has the session offered again now,
//!   on a new stream. Every decline names the offer's attempt, so a late one can never refuse
//!   a newer offer of the same session.

use tonic::{Code, Status};
use voxgate_proto::bridge::{session_event, uplink, Reject};

use crate::call_event::CallEvent;
use crate::offer::Offer;
use crate::transport::Transport;

/// Why an attach did not take.
#[derive(Debug, Clone)]
pub enum AttachFailure {
    /// The transceiver refused it with this status.
    Refused(Status),
    /// The stream under it went before an answer.
    StreamBroke,
}

#[derive(Debug, Clone)]
pub enum AttachOutcome {
    Attached,
    /// Closed OK before an answer: the session is over or was let go; nothing to decline.
    Ended,
    /// Refused or lost: `decline` tells the transceiver to offer the session elsewhere.
    Failed {
        failure: AttachFailure,
        decline: Reject,
    },
}

/// One offer's attach, waiting for its answer.
#[derive(Debug, Clone)]
pub struct AttachAttempt {
    offer: Offer,
    transport: Transport,
}

impl AttachAttempt {
    pub fn new(offer: Offer, transport: Transport) -> AttachAttempt {
        AttachAttempt { offer, transport }
    }

    pub fn offer(&self) -> &Offer {
        &self.offer
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// What `event` says about the attach; `None` for a message that answers nothing (nothing
    /// precedes ATTACHED on a call, but a stray message is no answer).
    pub fn on_event(&self, event: &CallEvent) -> Option<AttachOutcome> {
        match event {
            CallEvent::Uplink(up) => match &up.kind {
                Some(uplink::Kind::Event(e)) if e.kind() == session_event::Kind::Attached => {
                    Some(AttachOutcome::Attached)
                }
                _ => None,
            },
            CallEvent::Closed(status) if status.code() == Code::Ok => Some(AttachOutcome::Ended),
            CallEvent::Closed(status) => {
                let reason = format!("attach failed: {:?}", status.code());
                Some(self.failed(AttachFailure::Refused(status.clone()), reason))
            }
            CallEvent::StreamGone(_) => Some(self.stream_broke()),
        }
    }

    /// The outcome when the call's events stop without a word (its queue closed).
    pub fn stream_broke(&self) -> AttachOutcome {
        let reason = format!(
            "attach failed: the {} stream broke",
            self.transport.stream_name()
        );
        self.failed(AttachFailure::StreamBroke, reason)
    }

    fn failed(&self, failure: AttachFailure, reason: String) -> AttachOutcome {
        AttachOutcome::Failed {
            failure,
            decline: self.offer.decline(reason),
        }
    }
}

#[cfg(test)]
mod tests;
