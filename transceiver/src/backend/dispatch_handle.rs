//! The dispatcher's inbox: the messages any task sends to the dispatcher task, and the
//! cloneable handle the control plane and the gRPC edge send them through.
//!
//! This is the only part of the backend side the control plane depends on, the way a media
//! loop's `LoopHandle` is the only part of a loop it holds.

use crate::backend::dispatch::{ResumeVerdict, SessionInfo};

use tokio::sync::{mpsc, oneshot};
use tonic::Status;
use voxgate_proto::bridge::WorkerCommand;

use crate::backend::dispatch::DispatchError;
use crate::media::session::SessionId;

/// A worker's `Work` response stream.
pub type WorkerTx = mpsc::Sender<Result<WorkerCommand, Status>>;

/// Messages to the dispatcher task.
pub enum DispatchMsg {
    Register {
        worker: String,
        capacity: u32,
        tx: WorkerTx,
        reply: oneshot::Sender<Result<(), DispatchError>>,
    },
    Load {
        worker: String,
        active: u32,
        capacity: u32,
    },
    Reject {
        worker: String,
        session: SessionId,
        /// The offer declined (`Reject.attempt`; 0: whichever is open).
        attempt: u32,
        /// `Reject.reason` was "resume_stale": the worker serves the call at a later generation.
        stale_resume: bool,
    },
    WorkerGone {
        worker: String,
    },
    NewSession {
        id: SessionId,
        /// Boxed: the metadata maps make it much larger than the other messages.
        info: Box<SessionInfo>,
        /// For a resume: where its verdict goes (the POST waits on it).
        verdict: Option<oneshot::Sender<ResumeVerdict>>,
    },
    /// Which worker holds session `id` (for the resume credential it mints).
    Holder {
        id: SessionId,
        reply: oneshot::Sender<Option<String>>,
    },
    Attached {
        id: SessionId,
        worker: Option<String>,
        /// The attachment's `owner_id` (see `OwnerEndpoints`).
        owner: u64,
        reply: oneshot::Sender<Result<(), DispatchError>>,
    },
    /// The loop took attachment `owner`'s queues: the attach held.
    AttachHeld {
        id: SessionId,
        owner: u64,
    },
    OwnerLost {
        id: SessionId,
        owner: u64,
    },
    Ended {
        id: SessionId,
    },
    HasRoom {
        reply: oneshot::Sender<bool>,
    },
    /// The transceiver is stopping: end every worker subscription with UNAVAILABLE.
    Shutdown,
}

/// The control plane's handle to the dispatcher task.
#[derive(Clone)]
pub struct DispatchHandle {
    tx: mpsc::Sender<DispatchMsg>,
}

impl DispatchHandle {
    pub fn channel() -> (DispatchHandle, mpsc::Receiver<DispatchMsg>) {
        let (tx, rx) = mpsc::channel(4096);
        (DispatchHandle { tx }, rx)
    }

    pub async fn send(&self, msg: DispatchMsg) {
        // The dispatcher task lives as long as the process; a failed send means shutdown.
        let _ = self.tx.send(msg).await;
    }

    /// The worker that holds session `id`, if any.
    pub async fn holder(&self, id: SessionId) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        self.send(DispatchMsg::Holder { id, reply }).await;
        rx.await.ok().flatten()
    }

    pub async fn has_room(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        self.send(DispatchMsg::HasRoom { reply }).await;
        rx.await.unwrap_or(false)
    }

    pub(super) async fn ask(
        &self,
        f: impl FnOnce(oneshot::Sender<Result<(), DispatchError>>) -> DispatchMsg,
    ) -> Result<(), DispatchError> {
        let (reply, rx) = oneshot::channel();
        self.send(f(reply)).await;
        rx.await.unwrap_or(Err(DispatchError::UnknownSession))
    }
}
