//! A dispatch as the worker sees it: an offer of one session, at one attempt, to accept (by
//! attaching) or to decline (naming that attempt).

use std::collections::HashMap;

use voxgate_proto::bridge::{Attach, AudioMode, Dispatch, OpusEncoder, Reject};

/// One `Dispatch` from the transceiver.
#[derive(Debug, Clone)]
pub struct Offer {
    dispatch: Dispatch,
}

impl Offer {
    pub fn new(dispatch: Dispatch) -> Offer {
        Offer { dispatch }
    }

    pub fn session_id(&self) -> &str {
        &self.dispatch.session_id
    }

    /// 1 for the session's first dispatch, 2 after a worker was lost or declined, ...
    pub fn attempt(&self) -> u32 {
        self.dispatch.attempt
    }

    /// The caller's POST query parameters and `X-Voxgate-*` headers.
    pub fn metadata(&self) -> &HashMap<String, String> {
        &self.dispatch.metadata
    }

    pub fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }

    /// The `Reject` that declines this very offer: a decline that crosses a newer offer of the
    /// same session on the wire is ignored by the transceiver, so it never refuses that one.
    pub fn decline(&self, reason: impl Into<String>) -> Reject {
        Reject {
            session_id: self.dispatch.session_id.clone(),
            reason: reason.into(),
            attempt: self.dispatch.attempt,
        }
    }

    /// The attach that accepts this offer.
    pub fn attach(&self, settings: &AttachSettings) -> Attach {
        settings.attach(&self.dispatch.session_id)
    }
}

/// What a worker asks for when it attaches a session.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachSettings {
    /// As registered on `Work`; empty for an attach without dispatch.
    pub worker_id: String,
    /// PCM rate both ways: 16000, 24000 or 48000 (0 = 48000).
    pub sample_rate_hz: u32,
    pub mode: AudioMode,
    /// `PlaybackProgress` every this many ms of played audio (0 = the transceiver's 200).
    pub progress_interval_ms: u32,
    /// How the transceiver encodes this backend's PCM (unset: its defaults).
    pub encoder: Option<OpusEncoder>,
}

impl AttachSettings {
    pub fn attach(&self, session_id: &str) -> Attach {
        Attach {
            session_id: session_id.to_owned(),
            worker_id: self.worker_id.clone(),
            sample_rate_hz: self.sample_rate_hz,
            mode: self.mode as i32,
            progress_interval_ms: self.progress_interval_ms,
            encoder: self.encoder,
        }
    }
}
