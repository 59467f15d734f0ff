//! One worker subscription: the `Work` stream that registers a worker, carries its load
//! reports and declines up, and its dispatch offers down. It lives until the transceiver ends
//! it or it breaks; keeping a worker subscribed across breaks is [`crate::Worker`]'s job.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use voxgate_proto::bridge::{
    worker_command, worker_message, Load, Register, Reject, WorkerCommand, WorkerMessage,
};

use crate::bridge::Bridge;
use crate::offer::Offer;

/// Worker messages waiting for the stream.
const QUEUE: usize = 64;

/// Who registers, and what it already holds.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Unique per worker process (a live worker's id is refused: ALREADY_EXISTS).
    pub worker_id: String,
    /// Sessions the worker can own at once (>= 1).
    pub capacity: u32,
    /// Sessions it holds already (they outlived an earlier subscription): reported as `Load`
    /// right after `Register` when not 0.
    pub active: u32,
}

/// A registered worker's `Work` stream.
pub struct WorkStream {
    commands: Streaming<WorkerCommand>,
    sender: WorkSender,
}

impl WorkStream {
    /// Opens `Work` on `bridge` and registers; returns once the transceiver accepted the
    /// registration (its response headers came).
    pub async fn open(bridge: &Bridge, registration: &Registration) -> Result<WorkStream, Status> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let sender = WorkSender { tx };
        let register = Register {
            worker_id: registration.worker_id.clone(),
            capacity: registration.capacity,
        };
        sender.send(worker_message::Kind::Register(register)).await;
        if registration.active > 0 {
            sender.report_load(registration.active).await;
        }
        let request = bridge.request(ReceiverStream::new(rx));
        let commands = bridge.client().work(request).await?.into_inner();
        Ok(WorkStream { commands, sender })
    }

    /// The next dispatch; `Ok(None)` once the transceiver closed the stream. Cancel-safe.
    pub async fn next_offer(&mut self) -> Result<Option<Offer>, Status> {
        loop {
            let Some(command) = self.commands.message().await? else {
                return Ok(None);
            };
            if let Some(worker_command::Kind::Dispatch(d)) = command.kind {
                return Ok(Some(Offer::new(d)));
            }
        }
    }

    /// The stream's upward half, for load reports and declines.
    pub fn sender(&self) -> &WorkSender {
        &self.sender
    }
}

/// Sends on a `Work` stream; clones share it. A send on a gone stream is dropped: the stream's
/// reader learns of its end by itself.
#[derive(Clone, Debug)]
pub struct WorkSender {
    tx: mpsc::Sender<WorkerMessage>,
}

impl WorkSender {
    /// Tells the transceiver how many sessions the worker holds (across all transceivers).
    pub async fn report_load(&self, active: u32) {
        let load = Load {
            active,
            capacity: 0,
        };
        self.send(worker_message::Kind::Load(load)).await;
    }

    /// Declines an offer: the transceiver offers the session to another worker.
    pub async fn reject(&self, reject: Reject) {
        self.send(worker_message::Kind::Reject(reject)).await;
    }

    /// Whether the stream is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    async fn send(&self, kind: worker_message::Kind) {
        let _ = self.tx.send(WorkerMessage { kind: Some(kind) }).await;
    }
}
