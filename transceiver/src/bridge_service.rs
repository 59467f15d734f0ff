//! The gRPC edge of the audio bridge (`voxgate.v1.Bridge`, see `proto/grpc/voxgate.proto`) and
//! the task that runs the [`Dispatcher`].
//!
//! - `Work`: a backend registers as a worker; dispatch offers flow back on its stream.
//! - `Session`: the first message attaches the stream as a session's owner; after that,
//!   downlink messages go to the session's bounded queue (awaiting room: gRPC flow control
//!   pushes back on a backend that sends faster than real time), and the loop's uplink
//!   channel is the response stream.
//! - `Tap`: a listen-only copy of the uplink.
//!
//! The dispatcher itself is Sans-IO (`dispatch.rs`); [`run_dispatcher`] feeds it messages and
//! time and carries out its actions.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use voxgate_proto::bridge::bridge_server::{Bridge, BridgeServer};
use voxgate_proto::bridge::{
    downlink, worker_command, worker_message, AudioMode, Dispatch, Downlink, TapRequest, Uplink,
    WorkerCommand, WorkerMessage,
};

use crate::audio_bridge::{valid_sample_rate, OwnerEndpoints};
use crate::control::ControlPlane;
use crate::dispatch::{DispatchAction, DispatchError, Dispatcher};
use crate::media_loop::AttachError;
use crate::session::{EndReason, SessionId};

/// Uplink messages buffered per subscriber (≈ 2 s of frames) before frames are dropped: a
/// backend further behind than that is stuck, and old audio is worthless to it.
const UPLINK_QUEUE: usize = 100;
/// Downlink messages buffered per session before the backend's stream is back-pressured.
const DOWNLINK_QUEUE: usize = 64;
const WORKER_QUEUE: usize = 256;

type WorkerTx = mpsc::Sender<Result<WorkerCommand, Status>>;

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
    },
    WorkerGone {
        worker: String,
    },
    NewSession {
        id: SessionId,
        metadata: HashMap<String, String>,
    },
    Attached {
        id: SessionId,
        worker: Option<String>,
        reply: oneshot::Sender<Result<(), DispatchError>>,
    },
    OwnerLost {
        id: SessionId,
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

    pub async fn has_room(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        self.send(DispatchMsg::HasRoom { reply }).await;
        rx.await.unwrap_or(false)
    }

    async fn ask(
        &self,
        f: impl FnOnce(oneshot::Sender<Result<(), DispatchError>>) -> DispatchMsg,
    ) -> Result<(), DispatchError> {
        let (reply, rx) = oneshot::channel();
        self.send(f(reply)).await;
        rx.await.unwrap_or(Err(DispatchError::UnknownSession))
    }
}

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

/// The `voxgate.v1.Bridge` service.
pub struct BridgeService {
    control: Arc<ControlPlane>,
}

impl BridgeService {
    /// The tonic server for the service, with bearer-token auth when `token` is set.
    pub fn server(
        control: Arc<ControlPlane>,
        token: Option<Arc<str>>,
    ) -> tonic::service::interceptor::InterceptedService<
        BridgeServer<BridgeService>,
        impl tonic::service::Interceptor + Clone,
    > {
        let check = move |req: Request<()>| -> Result<Request<()>, Status> {
            let Some(token) = &token else {
                return Ok(req);
            };
            let presented = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match presented {
                Some(p) if crate::signaling::constant_time_eq(p.as_bytes(), token.as_bytes()) => {
                    Ok(req)
                }
                _ => Err(Status::unauthenticated("missing or invalid bearer token")),
            }
        };
        BridgeServer::with_interceptor(BridgeService { control }, check)
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn parse_session_id(s: &str) -> Result<SessionId, Status> {
    s.parse()
        .map_err(|_| Status::not_found(format!("no session {s:?}")))
}

fn attach_status(e: AttachError) -> Status {
    match e {
        AttachError::NotFound => Status::not_found("no such session"),
        AttachError::AlreadyOwned => Status::failed_precondition(
            "session already has an owner (use Tap to listen without owning)",
        ),
        AttachError::Bridge(e) => Status::invalid_argument(e.to_string()),
    }
}

#[tonic::async_trait]
impl Bridge for BridgeService {
    type WorkStream = BoxStream<WorkerCommand>;
    type SessionStream = BoxStream<Uplink>;
    type TapStream = BoxStream<Uplink>;

    async fn work(
        &self,
        request: Request<Streaming<WorkerMessage>>,
    ) -> Result<Response<Self::WorkStream>, Status> {
        let mut inbound = request.into_inner();
        let register = match inbound.message().await? {
            Some(WorkerMessage {
                kind: Some(worker_message::Kind::Register(r)),
            }) => r,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Work message must be register",
                ))
            }
        };
        if register.worker_id.is_empty() || register.worker_id.len() > 256 {
            return Err(Status::invalid_argument("worker_id must be 1..=256 bytes"));
        }
        let (tx, rx) = mpsc::channel(WORKER_QUEUE);
        let dispatch = self.control.dispatch().clone();
        let worker = register.worker_id.clone();
        dispatch
            .ask(|reply| DispatchMsg::Register {
                worker: worker.clone(),
                capacity: register.capacity,
                tx,
                reply,
            })
            .await
            .map_err(|e| match e {
                DispatchError::WorkerExists(_) => Status::already_exists(e.to_string()),
                e => Status::invalid_argument(e.to_string()),
            })?;
        tokio::spawn(async move {
            while let Some(Ok(msg)) = inbound.next().await {
                match msg.kind {
                    Some(worker_message::Kind::Load(l)) => {
                        dispatch
                            .send(DispatchMsg::Load {
                                worker: worker.clone(),
                                active: l.active,
                                capacity: l.capacity,
                            })
                            .await
                    }
                    Some(worker_message::Kind::Reject(r)) => {
                        if let Ok(session) = r.session_id.parse() {
                            dispatch
                                .send(DispatchMsg::Reject {
                                    worker: worker.clone(),
                                    session,
                                })
                                .await
                        }
                    }
                    _ => {}
                }
            }
            dispatch.send(DispatchMsg::WorkerGone { worker }).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn session(
        &self,
        request: Request<Streaming<Downlink>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let attach = match inbound.message().await? {
            Some(Downlink {
                kind: Some(downlink::Kind::Attach(a)),
            }) => a,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Session message must be attach",
                ))
            }
        };
        let id = parse_session_id(&attach.session_id)?;
        let sample_rate = valid_sample_rate(attach.sample_rate_hz)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mode = AudioMode::try_from(attach.mode)
            .map_err(|_| Status::invalid_argument("unknown audio mode"))?;
        let worker = (!attach.worker_id.is_empty()).then(|| attach.worker_id.clone());
        let dispatch = self.control.dispatch().clone();
        dispatch
            .ask(|reply| DispatchMsg::Attached {
                id,
                worker: worker.clone(),
                reply,
            })
            .await
            .map_err(|e| match e {
                DispatchError::AlreadyOwned => Status::failed_precondition(e.to_string()),
                e => Status::not_found(e.to_string()),
            })?;
        let (up_tx, up_rx) = mpsc::channel(UPLINK_QUEUE);
        let (down_tx, down_rx) = mpsc::channel(DOWNLINK_QUEUE);
        let progress_ms = if attach.progress_interval_ms == 0 {
            200
        } else {
            attach.progress_interval_ms
        };
        let endpoints = OwnerEndpoints {
            uplink: up_tx,
            downlink: down_rx,
            sample_rate,
            mode,
            progress_interval: Duration::from_millis(u64::from(progress_ms)),
        };
        if let Err(e) = self.control.attach(id, endpoints).await {
            // The dispatcher thinks this stream owns the session: undo that.
            dispatch.send(DispatchMsg::OwnerLost { id }).await;
            return Err(attach_status(e));
        }
        tracing::info!(session = %id, worker = worker.as_deref().unwrap_or("-"), sample_rate, ?mode, "backend attached");
        tokio::spawn(async move {
            // Downlink: waiting for room here back-pressures the backend through gRPC.
            while let Some(Ok(msg)) = inbound.next().await {
                if down_tx.send(msg).await.is_err() {
                    break; // the session ended
                }
            }
            // Dropping down_tx tells the loop the owner is gone (if the session still lives).
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(up_rx).map(Ok))))
    }

    async fn tap(&self, request: Request<TapRequest>) -> Result<Response<Self::TapStream>, Status> {
        let req = request.into_inner();
        let id = parse_session_id(&req.session_id)?;
        let (tx, rx) = mpsc::channel(UPLINK_QUEUE);
        self.control.tap(id, tx).await.map_err(attach_status)?;
        tracing::info!(session = %id, "tap attached");
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }
}
