//! What the control plane and a media loop say to each other: [`Command`]s go to a loop on a
//! bounded channel (see `event_loop::LoopHandle`), [`LoopEvent`]s come back on a bounded
//! channel (`try_send`: may be dropped), and each session's end comes back once as a
//! [`SessionEnded`] on a channel that is never full.

use str0m::change::SdpOffer;
use tokio::sync::oneshot;

use crate::media::audio_bridge::{OwnerEndpoints, StartedTalking, TapSubscriber};
use crate::media::session::{
    AttachError, EndReason, Session, SessionError, SessionId, SessionSnapshot,
};

/// Work the control plane hands to a loop.
pub enum Command {
    Insert {
        session: Box<Session>,
        reply: oneshot::Sender<()>,
    },
    Delete {
        id: SessionId,
        reply: oneshot::Sender<bool>,
    },
    Snapshot {
        id: SessionId,
        reply: oneshot::Sender<Option<SessionSnapshot>>,
    },
    IceRestart {
        id: SessionId,
        offer: Box<SdpOffer>,
        ufrag: String,
        pass: String,
        reply: oneshot::Sender<Option<Result<String, SessionError>>>,
    },
    /// Make a backend stream the session's owner.
    Attach {
        id: SessionId,
        endpoints: OwnerEndpoints,
        reply: oneshot::Sender<Result<(), AttachError>>,
    },
    /// Add a listen-only subscriber to the session.
    Tap {
        id: SessionId,
        tap: TapSubscriber,
        reply: oneshot::Sender<Result<(), AttachError>>,
    },
    /// End a session (e.g. no backend would take it).
    End {
        id: SessionId,
        reason: EndReason,
    },
    /// The transceiver drains: ask every connected caller to move its call elsewhere
    /// (`{"type":"session.migrate"}` on its data channel; docs/continuity.md). The reply is
    /// how many were told.
    Migrate {
        reply: oneshot::Sender<usize>,
    },
    Shutdown,
}

/// What a loop tells the control plane (bounded channel, `try_send`: may be dropped).
#[derive(Debug, Clone, Copy)]
pub enum LoopEvent {
    /// The owning backend's stream ended while the session lives on, or (`stalled`) it left
    /// its uplink queue full past `--backend-stall-secs` and was dropped.
    /// `owner` is the lost attachment's `owner_id`.
    OwnerLost {
        id: SessionId,
        owner: u64,
        stalled: bool,
    },
    /// A PCM owner's backend played its first frame (admission counts the encoder from now).
    StartedTalking {
        id: SessionId,
        talking: StartedTalking,
    },
}

/// A session ended. Sent on a channel of its own that is never full, since a lost end would
/// leak the session's admission slot. Each session ends once, so the queue is bounded by the
/// sessions the loops hold.
#[derive(Debug, Clone, Copy)]
pub struct SessionEnded {
    pub id: SessionId,
    pub reason: EndReason,
}
