//! The gRPC edge of the audio bridge (`voxgate.v1.Bridge`, see `proto/grpc/voxgate.proto`).
//!
//! - `Work`: a backend registers as a worker; dispatch offers flow back on its stream.
//!   Registrations are capped per connection and in total ([`crate::backend::grpc_admission`]).
//! - `Session`: the first message attaches the stream as a session's owner; after that,
//!   downlink messages go to the session's bounded queue (awaiting room: gRPC flow control
//!   pushes back on a backend that sends faster than real time), and the loop's uplink
//!   channel is the response stream. A message over the limit on one backend message is dropped
//!   and counted; the stream goes on.
//! - `Tap`: a listen-only copy of the uplink.
//! - `Multiplex`: many sessions on one stream, each on a numbered channel that behaves like a
//!   `Session` stream ([`crate::backend::multiplex`]).
//!
//! Every call carries the configured credential, if there is one (the interceptor of
//! [`BridgeService::server`]). The streams of a backend's calls (`Session`, `Multiplex`) decode
//! messages up to a batch's size and hold each call message to the per-message limit after
//! decoding, for its own call alone; `Work` and `Tap`, whose messages are small, keep the
//! per-message limit at decoding ([`BridgeRoutes`]; the limits and their memory bound are in
//! [`crate::backend::message_size`]).
//!
//! The dispatcher itself is Sans-IO ([`crate::backend::dispatch`]);
//! [`crate::backend::dispatch_task`] runs it.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::codegen::http;
use tonic::{Request, Response, Status, Streaming};
use voxgate_proto::bridge::bridge_server::{Bridge, BridgeServer};
use voxgate_proto::bridge::{
    downlink, worker_message, Downlink, MultiplexDownlink, MultiplexUplink, TapRequest, Uplink,
    WorkerCommand, WorkerMessage,
};

use crate::backend::attach::{
    attach_owner, attach_status, observe_queue_wait, parse_session_id, unix_micros_now,
    AttachRequest,
};
pub use crate::backend::attach::{DOWNLINK_QUEUE, UPLINK_QUEUE};
use crate::backend::dispatch::DispatchError;
use crate::backend::dispatch_handle::DispatchMsg;
use crate::backend::grpc_admission::{
    check_credential, WorkerLimits, WorkerRegistrations, WorkerSlot,
};
use crate::backend::message_size::{check_downlink, MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};
use crate::backend::multiplex;
use crate::control::plane::ControlPlane;
use crate::media::audio_bridge::{OwnerUplink, TapSubscriber};

const WORKER_QUEUE: usize = 256;
/// Largest gRPC message a backend may send: a `Multiplex` batch (on `Session` and `Multiplex`
/// streams; `Work` and `Tap` messages are held to `MAX_MESSAGE_BYTES`). One backend message is
/// held to `MAX_MESSAGE_BYTES` after decoding, for its own call alone.
pub const MAX_DECODING_MESSAGE_SIZE: usize = MAX_BATCH_BYTES;

/// What the gRPC edge admits (see [`crate::backend::grpc_admission`]).
#[derive(Debug, Clone)]
pub struct GrpcAdmission {
    /// The bearer token every call must carry; `None`: every call passes.
    pub credential: Option<Arc<str>>,
    pub workers: WorkerLimits,
}

/// The `voxgate.v1.Bridge` service.
pub struct BridgeService {
    control: Arc<ControlPlane>,
    workers: Arc<Mutex<WorkerRegistrations>>,
}

impl BridgeService {
    /// The tonic server for the service: every call needs `admission.credential` when set.
    pub fn server(
        control: Arc<ControlPlane>,
        admission: GrpcAdmission,
    ) -> tonic::service::interceptor::InterceptedService<
        BridgeRoutes,
        impl tonic::service::Interceptor + Clone,
    > {
        let metrics = control.metrics.clone();
        let credential = admission.credential;
        let check = move |req: Request<()>| -> Result<Request<()>, Status> {
            let presented = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            match check_credential(credential.as_deref(), presented) {
                Ok(()) => Ok(req),
                Err(refusal) => {
                    metrics.grpc_rejected(refusal);
                    Err(Status::unauthenticated("missing or invalid bearer token"))
                }
            }
        };
        let service = Arc::new(BridgeService {
            control,
            workers: Arc::new(Mutex::new(WorkerRegistrations::new(admission.workers))),
        });
        let routes = BridgeRoutes {
            calls: BridgeServer::from_arc(service.clone())
                .max_decoding_message_size(MAX_BATCH_BYTES),
            small: BridgeServer::from_arc(service).max_decoding_message_size(MAX_MESSAGE_BYTES),
        };
        tonic::service::interceptor::InterceptedService::new(routes, check)
    }
}

/// The service with its two decoding limits: the streams of a backend's calls (`Session`,
/// `Multiplex`) decode up to a batch's size and check each call message after decoding; the
/// rest (`Work`, `Tap`) refuse more than one message's size at decoding.
#[derive(Clone)]
pub struct BridgeRoutes {
    calls: BridgeServer<BridgeService>,
    small: BridgeServer<BridgeService>,
}

impl<B> tower::Service<http::Request<B>> for BridgeRoutes
where
    BridgeServer<BridgeService>: tower::Service<http::Request<B>>,
{
    type Response = <BridgeServer<BridgeService> as tower::Service<http::Request<B>>>::Response;
    type Error = <BridgeServer<BridgeService> as tower::Service<http::Request<B>>>::Error;
    type Future = <BridgeServer<BridgeService> as tower::Service<http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both are always ready (generated code); ask each anyway.
        std::task::ready!(self.calls.poll_ready(cx))?;
        self.small.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        match req.uri().path() {
            "/voxgate.v1.Bridge/Session" | "/voxgate.v1.Bridge/Multiplex" => self.calls.call(req),
            _ => self.small.call(req),
        }
    }
}

impl tonic::server::NamedService for BridgeRoutes {
    const NAME: &'static str = <BridgeServer<BridgeService> as tonic::server::NamedService>::NAME;
}

impl BridgeService {
    /// A registration for a `Work` stream on connection `conn`, within the limits.
    fn admit_worker(&self, conn: Option<std::net::SocketAddr>) -> Result<WorkerSlot, Status> {
        WorkerSlot::take(&self.workers, conn).map_err(|refused| {
            self.control.metrics.grpc_rejected(refused.reason());
            Status::resource_exhausted(refused.to_string())
        })
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Bridge for BridgeService {
    type WorkStream = BoxStream<WorkerCommand>;
    type SessionStream = BoxStream<Uplink>;
    type TapStream = BoxStream<Uplink>;
    type MultiplexStream = BoxStream<MultiplexUplink>;

    async fn work(
        &self,
        request: Request<Streaming<WorkerMessage>>,
    ) -> Result<Response<Self::WorkStream>, Status> {
        let conn = request.remote_addr();
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
        let slot = self.admit_worker(conn)?;
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
                                    attempt: r.attempt,
                                    stale_resume: r.reason == "resume_stale",
                                })
                                .await
                        }
                    }
                    _ => {}
                }
            }
            dispatch.send(DispatchMsg::WorkerGone { worker }).await;
            drop(slot); // the registration is given back once the worker is gone
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn session(
        &self,
        request: Request<Streaming<Downlink>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound.message().await?;
        if let Some(Err(e)) = first.as_ref().map(check_downlink) {
            return Err(Status::resource_exhausted(e.to_string()));
        }
        let attach = match first {
            Some(Downlink {
                kind: Some(downlink::Kind::Attach(a)),
            }) => a,
            _ => {
                return Err(Status::invalid_argument(
                    "the first Session message must be attach",
                ))
            }
        };
        let ask = AttachRequest::parse(&attach)?;
        let (up_tx, up_rx) = mpsc::channel(UPLINK_QUEUE);
        let down = attach_owner(
            &self.control,
            ask,
            OwnerUplink::Stream(up_tx),
            DOWNLINK_QUEUE,
        )
        .await?;
        let metrics = self.control.metrics.clone();
        tokio::spawn(async move {
            // Downlink: waiting for room here back-pressures the backend through gRPC.
            while let Some(Ok(msg)) = inbound.next().await {
                if check_downlink(&msg).is_err() {
                    // Dropped for this session alone (the stream goes on), as on a channel.
                    metrics.session_downlink_too_large();
                    continue;
                }
                if down.send(msg).await.is_err() {
                    break; // the session ended
                }
            }
            // Dropping the sender tells the loop the owner is gone (if the session still lives).
        });
        // The loop's hand-off histogram stops where a frame enters this queue; what the backend
        // waits for beyond it is the gRPC side keeping up (on a saturated core it can fall far
        // behind while the loop stays on time): timed here as each frame leaves the queue.
        let waited = self.control.metrics.uplink_queue_histogram();
        let uplink = ReceiverStream::new(up_rx).map(move |u| {
            observe_queue_wait(&waited, &u, unix_micros_now());
            Ok(u)
        });
        Ok(Response::new(Box::pin(uplink)))
    }

    async fn multiplex(
        &self,
        request: Request<Streaming<MultiplexDownlink>>,
    ) -> Result<Response<Self::MultiplexStream>, Status> {
        let uplink = multiplex::serve(self.control.clone(), request.into_inner());
        Ok(Response::new(Box::pin(uplink)))
    }

    async fn tap(&self, request: Request<TapRequest>) -> Result<Response<Self::TapStream>, Status> {
        let req = request.into_inner();
        let id = parse_session_id(&req.session_id)?;
        let (tx, rx) = mpsc::channel(UPLINK_QUEUE);
        let downlink = req.downlink;
        let tap = TapSubscriber { tx, downlink };
        self.control.tap(id, tap).await.map_err(attach_status)?;
        tracing::info!(session = %id, downlink, "tap attached");
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }
}
