//! The task that runs the Sans-IO [`Dispatcher`]: it feeds it inbox messages and time, and
//! carries out its actions (offers on workers' `Work` streams, ends of sessions nobody took).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tonic::Status;
use voxgate_proto::bridge::{worker_command, Dispatch, WorkerCommand};

use crate::backend::dispatch::{DispatchAction, Dispatcher};
use crate::backend::dispatch_handle::{DispatchMsg, WorkerTx};
use crate::control::plane::ControlPlane;
use crate::media::session::EndReason;

/// Runs the dispatcher until the control plane goes away.
pub async fn run_dispatcher(
    mut dispatcher: Dispatcher,
    mut rx: mpsc::Receiver<DispatchMsg>,
    control: Arc<ControlPlane>,
) {
    let mut workers: HashMap<String, WorkerTx> = HashMap::new();
    loop {
        let deadline = dispatcher
            .next_deadline()
            .map(tokio::time::Instant::from_std);
        let msg = tokio::select! {
            m = rx.recv() => match m { Some(m) => Some(m), None => return },
            _ = sleep_until(deadline) => None,
        };
        let now = Instant::now();
        if let Some(msg) = msg {
            match msg {
                DispatchMsg::Register {
                    worker,
                    capacity,
                    tx,
                    reply,
                } => {
                    let r = dispatcher.register(&worker, capacity);
                    if r.is_ok() {
                        tracing::info!(%worker, capacity, "backend worker registered");
                        workers.insert(worker, tx);
                    }
                    let _ = reply.send(r);
                }
                DispatchMsg::Load {
                    worker,
                    active,
                    capacity,
                } => dispatcher.load(&worker, active, capacity),
                DispatchMsg::Reject { worker, session } => {
                    tracing::info!(%worker, %session, "worker declined session");
                    dispatcher.rejected(now, session, &worker);
                }
                DispatchMsg::WorkerGone { worker } => {
                    if workers.remove(&worker).is_some() {
                        tracing::info!(%worker, "backend worker gone; its sessions are re-dispatched");
                        dispatcher.worker_gone(now, &worker);
                    }
                }
                DispatchMsg::NewSession { id, metadata } => {
                    dispatcher.new_session(now, id, metadata)
                }
                DispatchMsg::Attached { id, worker, reply } => {
                    let _ = reply.send(dispatcher.attached(id, worker.as_deref()));
                }
                DispatchMsg::OwnerLost { id } => {
                    tracing::info!(session = %id, "backend stream lost; re-dispatching");
                    dispatcher.owner_lost(now, id);
                }
                DispatchMsg::Ended { id } => dispatcher.session_ended(id),
                DispatchMsg::HasRoom { reply } => {
                    let _ = reply.send(dispatcher.has_room());
                }
                DispatchMsg::Shutdown => {
                    for (_, tx) in workers.drain() {
                        let _ = tx.try_send(Err(Status::unavailable("transceiver shutting down")));
                    }
                }
            }
        }
        while let Some(action) = dispatcher.poll_action(now) {
            match action {
                DispatchAction::Offer {
                    worker,
                    session,
                    metadata,
                    attempt,
                } => {
                    let cmd = WorkerCommand {
                        kind: Some(worker_command::Kind::Dispatch(Dispatch {
                            session_id: session.to_string(),
                            metadata,
                            attempt,
                        })),
                    };
                    control.metrics.dispatched();
                    let sent = workers
                        .get(&worker)
                        .is_some_and(|tx| tx.try_send(Ok(cmd)).is_ok());
                    if !sent {
                        workers.remove(&worker);
                        dispatcher.worker_gone(now, &worker);
                    }
                }
                DispatchAction::End { session } => {
                    tracing::info!(%session, "no backend took the session; ending it");
                    control.end_session(session, EndReason::NoBackend);
                }
            }
        }
        control
            .metrics
            .dispatch_state(dispatcher.worker_count(), dispatcher.queued());
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
