//! Why the control plane refused or failed a request; the signaling edge maps each to an HTTP
//! status and counts it by reason.

use std::time::Duration;

use crate::auth::token_uses::UseRefused;
use crate::control::offer::OfferError;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    BadOffer(#[from] OfferError),
    #[error("offer rejected: {0}")]
    Rejected(String),
    #[error("server at capacity ({0} sessions)")]
    AtCapacity(usize),
    #[error("server is draining; try another instance")]
    Draining,
    #[error("no backend has room for a new session")]
    NoBackend,
    #[error("media loop {0} is overloaded")]
    LoopBusy(usize),
    #[error("every media loop is saturated (least busy at {0} %); try again or another instance")]
    LoopsSaturated(u32),
    #[error(
        "the transceiver's CPU is saturated ({0} % of its usable cores, counting what the sessions \
         it just admitted or that just started talking will add); try again or another instance"
    )]
    ProcessSaturated(u32),
    #[error("too many session requests from this address; retry after {} s", .0.as_secs().max(1))]
    RateLimited(Duration),
    #[error("too many ICE restarts of this session; retry after {} s", .0.as_secs().max(1))]
    SessionRestartLimited(Duration),
    #[error("too many ICE restarts from this address; retry after {} s", .0.as_secs().max(1))]
    AddressRestartLimited(Duration),
    #[error("{0}")]
    TokenUse(#[from] UseRefused),
    #[error("this address already holds {0} sessions")]
    ClientCap(usize),
    #[error("no such session")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Resume(#[from] ResumeFailure),
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a resume (a POST with a resume credential) did not continue its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResumeFailure {
    #[error("this resume credential was used already")]
    Replayed,
    #[error("too many resumes are in progress on this transceiver")]
    TableFull,
    #[error("the call was resumed with this credential already (the backend serves it on)")]
    Stale,
    #[error("no backend serves this call any more; start a new call")]
    Unknown,
    #[error("no backend answered the resume in time; retry")]
    NoBackend,
}

impl ResumeFailure {
    /// The `outcome` label of `voxgate_resume_total`.
    pub fn outcome(self) -> &'static str {
        match self {
            ResumeFailure::Replayed => "replayed",
            ResumeFailure::TableFull => "table_full",
            ResumeFailure::Stale => "stale",
            ResumeFailure::Unknown => "unknown",
            ResumeFailure::NoBackend => "no_backend",
        }
    }
}

impl ControlError {
    /// For a failed resume, the `outcome` label of `voxgate_resume_total`: its own, or
    /// "refused" for an admission refusal (rate limit, capacity, a bad offer, ...).
    pub fn resume_outcome(&self) -> &'static str {
        match self {
            ControlError::Resume(f) => f.outcome(),
            _ => "refused",
        }
    }

    /// For a refused new session (503), the `reason` label of `voxgate_sessions_refused_total`.
    pub fn refusal_reason(&self) -> Option<&'static str> {
        match self {
            ControlError::AtCapacity(_) => Some("at_capacity"),
            ControlError::Draining => Some("draining"),
            ControlError::NoBackend => Some("no_backend"),
            ControlError::LoopBusy(_) => Some("loop_queue_full"),
            ControlError::LoopsSaturated(_) => Some("loops_saturated"),
            ControlError::ProcessSaturated(_) => Some("process_saturated"),
            ControlError::RateLimited(_) => Some("rate_limited"),
            ControlError::ClientCap(_) => Some("per_ip_sessions"),
            _ => None,
        }
    }

    /// For a request refused before it did anything, the `reason` label of
    /// `voxgate_signaling_rejected_total`. An unknown session and one the credential does not
    /// control count alike: the label is no oracle for another caller's session id.
    pub fn rejected_reason(&self) -> Option<&'static str> {
        match self {
            ControlError::BadOffer(e) => Some(e.reason()),
            ControlError::SessionRestartLimited(_) => Some("restarts_per_session"),
            ControlError::AddressRestartLimited(_) => Some("restarts_per_ip"),
            ControlError::TokenUse(e) => Some(e.reason()),
            ControlError::NotFound => Some("session_not_found"),
            _ => None,
        }
    }
}
