//! The task that runs the Sans-IO [`Dispatcher`]: it feeds it inbox messages and time, and
//! carries out its actions (offers on workers' `Work` streams, ends of sessions nobody took).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tonic::Status;
use voxgate_proto::bridge::{worker_command, Dispatch, ResumeOffer, WorkerCommand};

use crate::backend::dispatch::{DispatchAction, Dispatcher, ResumeVerdict};
use crate::backend::dispatch_handle::{DispatchMsg, WorkerTx};
use crate::control::plane::ControlPlane;
use crate::media::session::{EndReason, SessionId};

/// Runs the dispatcher until the control plane goes away.
pub async fn run_dispatcher(
    dispatcher: Dispatcher,
    mut rx: mpsc::Receiver<DispatchMsg>,
    control: Arc<ControlPlane>,
) {
    let mut task = DispatchTask {
        dispatcher,
        workers: HashMap::new(),
        verdicts: HashMap::new(),
        control,
    };
    loop {
        let deadline = task
            .dispatcher
            .next_deadline()
            .map(tokio::time::Instant::from_std);
        let msg = tokio::select! {
            m = rx.recv() => match m { Some(m) => Some(m), None => return },
            _ = sleep_until(deadline) => None,
        };
        let now = Instant::now();
        if let Some(msg) = msg {
            task.apply(now, msg);
        }
        task.carry_out_actions(now);
        task.control
            .metrics
            .dispatch_state(task.dispatcher.worker_count(), task.dispatcher.queued());
    }
}

/// The dispatcher with what its actions need: the workers' streams and the control plane.
struct DispatchTask {
    dispatcher: Dispatcher,
    workers: HashMap<String, WorkerTx>,
    /// Resumes whose POST waits for the verdict.
    verdicts: HashMap<SessionId, oneshot::Sender<ResumeVerdict>>,
    control: Arc<ControlPlane>,
}

impl DispatchTask {
    /// Feeds one inbox message to the dispatcher (and answers it, if it asks).
    fn apply(&mut self, now: Instant, msg: DispatchMsg) {
        match msg {
            DispatchMsg::Register {
                worker,
                capacity,
                tx,
                reply,
            } => {
                let r = self.dispatcher.register(&worker, capacity);
                if r.is_ok() {
                    tracing::info!(%worker, capacity, "backend worker registered");
                    self.workers.insert(worker, tx);
                }
                let _ = reply.send(r);
            }
            DispatchMsg::Load {
                worker,
                active,
                capacity,
            } => self.dispatcher.load(&worker, active, capacity),
            DispatchMsg::Reject {
                worker,
                session,
                attempt,
                stale_resume,
            } => {
                tracing::info!(%worker, %session, attempt, stale_resume, "worker declined session");
                self.dispatcher
                    .rejected(now, session, &worker, attempt, stale_resume);
            }
            DispatchMsg::WorkerGone { worker } => {
                if self.workers.remove(&worker).is_some() {
                    tracing::info!(%worker, "backend worker gone; its sessions are re-dispatched");
                    self.dispatcher.worker_gone(now, &worker);
                }
            }
            DispatchMsg::NewSession { id, info, verdict } => {
                if let Some(tx) = verdict {
                    self.verdicts.insert(id, tx);
                }
                self.dispatcher.new_session(now, id, *info);
            }
            DispatchMsg::Holder { id, reply } => {
                let _ = reply.send(self.dispatcher.holder(id).map(str::to_string));
            }
            DispatchMsg::Attached {
                id,
                worker,
                owner,
                reply,
            } => {
                let _ = reply.send(self.dispatcher.attached(id, worker.as_deref(), owner));
            }
            DispatchMsg::AttachHeld { id, owner } => self.dispatcher.attach_held(id, owner),
            DispatchMsg::OwnerLost { id, owner } => {
                if self.dispatcher.owner_lost(now, id, owner) {
                    tracing::info!(session = %id, "backend stream lost; re-dispatching");
                }
            }
            DispatchMsg::Ended { id } => {
                // A resume that ended before its verdict: its POST sees the sender dropped.
                self.verdicts.remove(&id);
                self.dispatcher.session_ended(id);
            }
            DispatchMsg::HasRoom { reply } => {
                let _ = reply.send(self.dispatcher.has_room());
            }
            DispatchMsg::Shutdown => {
                for (_, tx) in self.workers.drain() {
                    let _ = tx.try_send(Err(Status::unavailable("transceiver shutting down")));
                }
            }
        }
    }

    /// Carries out every action the dispatcher has decided on.
    fn carry_out_actions(&mut self, now: Instant) {
        while let Some(action) = self.dispatcher.poll_action(now) {
            match action {
                DispatchAction::Offer {
                    worker,
                    session,
                    info,
                    attempt,
                } => {
                    let info = *info;
                    let resume = info.resume.map(|r| ResumeOffer {
                        call_id: r.call_id.to_string(),
                        generation: r.generation,
                        previous_session_id: r.previous_session.to_string(),
                    });
                    let cmd = WorkerCommand {
                        kind: Some(worker_command::Kind::Dispatch(Dispatch {
                            call_id: info.call_id.unwrap_or(session).to_string(),
                            resume,
                            session_id: session.to_string(),
                            metadata: info.metadata,
                            attempt,
                            ingress: info.ingress,
                            ingress_reason: info.ingress_reason,
                            signed_metadata: info.signed_metadata,
                            caller_metadata: info.caller_metadata,
                        })),
                    };
                    self.control.metrics.dispatched();
                    let sent = self
                        .workers
                        .get(&worker)
                        .is_some_and(|tx| tx.try_send(Ok(cmd)).is_ok());
                    if !sent {
                        self.workers.remove(&worker);
                        self.dispatcher.worker_gone(now, &worker);
                    }
                }
                DispatchAction::End { session } => {
                    tracing::info!(%session, "no backend took the session; ending it");
                    self.control.end_session(session, EndReason::NoBackend);
                }
                DispatchAction::Decided { session, verdict } => {
                    tracing::info!(%session, verdict = verdict.outcome(), "resume decided");
                    let told = self
                        .verdicts
                        .remove(&session)
                        .is_some_and(|tx| tx.send(verdict).is_ok());
                    // Its POST is gone (the client left): a refused resume still ends.
                    if !told && verdict != ResumeVerdict::Accepted {
                        self.control.end_session(session, EndReason::ResumeRefused);
                    }
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
