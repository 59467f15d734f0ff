//! The gRPC edge of the audio bridge (`voxgate.v1.Bridge`, see `proto/grpc/voxgate.proto`).
//!
//! - `Work`: a backend registers as a worker; dispatch offers flow back on its stream.
//! - `Session`: the first message attaches the stream as a session's owner; after that,
//!   downlink messages go to the session's bounded queue (awaiting room: gRPC flow control
//!   pushes back on a backend that sends faster than real time), and the loop's uplink
//!   channel is the response stream.
//! - `Tap`: a listen-only copy of the uplink.
//! - `Multiplex`: many sessions on one stream, each on a numbered channel that behaves like a
//!   `Session` stream ([`crate::backend::multiplex`]).
//!
//! The dispatcher itself is Sans-IO ([`crate::backend::dispatch`]);
//! [`crate::backend::dispatch_task`] runs it.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use voxgate_proto::bridge::bridge_server::{Bridge, BridgeServer};
use voxgate_proto::bridge::{
    downlink, worker_message, Downlink, MultiplexDownlink, MultiplexUplink, TapRequest, Uplink,
    WorkerCommand, WorkerMessage,
};

use crate::auth;
use crate::backend::attach::{
    attach_owner, attach_status, observe_queue_wait, parse_session_id, unix_micros_now,
    AttachRequest,
};
pub use crate::backend::attach::{DOWNLINK_QUEUE, UPLINK_QUEUE};
use crate::backend::dispatch::DispatchError;
use crate::backend::dispatch_handle::DispatchMsg;
use crate::backend::multiplex;
use crate::control::plane::ControlPlane;
use crate::media::audio_bridge::OwnerUplink;

const WORKER_QUEUE: usize = 256;
/// Largest gRPC message a backend may send. A downlink chunk of a second of 48 kHz PCM is
/// 96 KiB; tonic's 4 MiB default would let one session queue hundreds of MiB (64 messages).
pub const MAX_DECODING_MESSAGE_SIZE: usize = 256 * 1024;
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
            let presented = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            if auth::bearer_allowed(token.as_deref(), presented) {
                Ok(req)
            } else {
                Err(Status::unauthenticated("missing or invalid bearer token"))
            }
        };
        let server = BridgeServer::new(BridgeService { control })
            .max_decoding_message_size(MAX_DECODING_MESSAGE_SIZE);
        tonic::service::interceptor::InterceptedService::new(server, check)
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
                                    attempt: r.attempt,
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
        let ask = AttachRequest::parse(&attach)?;
        let (up_tx, up_rx) = mpsc::channel(UPLINK_QUEUE);
        let down = attach_owner(
            &self.control,
            ask,
            OwnerUplink::Stream(up_tx),
            DOWNLINK_QUEUE,
        )
        .await?;
        tokio::spawn(async move {
            // Downlink: waiting for room here back-pressures the backend through gRPC.
            while let Some(Ok(msg)) = inbound.next().await {
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
        self.control.tap(id, tx).await.map_err(attach_status)?;
        tracing::info!(session = %id, "tap attached");
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }
}
