//! The kit against a fake transceiver on loopback that holds the real one's message limit
//! (`max_decoding_message_size` 256 KiB): what the kit sends is what a transceiver takes, and
//! a message the transceiver would refuse never reaches the wire.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::{Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};
use voxgate_backend_kit::{
    attach_session, AttachSettings, Bridge, CallEvent, MultiplexClient, Registration, SendError,
    WorkStream, MAX_MESSAGE_BYTES,
};
use voxgate_proto::bridge::bridge_server::{self, BridgeServer};
use voxgate_proto::bridge::{
    data_message, downlink, session_event, uplink, worker_command, worker_message, AudioChunk,
    AudioMode, ChannelUplink, DataMessage, Dispatch, Downlink, MultiplexDownlink, MultiplexUplink,
    SessionEvent, TapRequest, Uplink, WorkerCommand, WorkerMessage,
};

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// What the fake transceiver saw.
#[derive(Default)]
struct Seen {
    /// Downlink messages per channel (`Multiplex`) or per session id (`Session`).
    messages: HashMap<String, Vec<Downlink>>,
    /// Largest `MultiplexDownlink` taken, encoded.
    largest_batch: usize,
    /// How each stream ended: "ok", or the status a read failed with.
    ends: Vec<String>,
    registered: Vec<String>,
}

#[derive(Clone, Default)]
struct FakeTransceiver {
    seen: Arc<Mutex<Seen>>,
}

fn attached() -> Uplink {
    Uplink {
        kind: Some(uplink::Kind::Event(SessionEvent {
            kind: session_event::Kind::Attached as i32,
            ..Default::default()
        })),
    }
}

impl FakeTransceiver {
    fn end(&self, how: String) {
        self.seen.lock().unwrap().ends.push(how);
    }
}

#[tonic::async_trait]
impl bridge_server::Bridge for FakeTransceiver {
    type WorkStream = Out<WorkerCommand>;
    type SessionStream = Out<Uplink>;
    type TapStream = Out<Uplink>;
    type MultiplexStream = Out<MultiplexUplink>;

    /// Takes the registration, then offers session "s1".
    async fn work(
        &self,
        request: Request<Streaming<WorkerMessage>>,
    ) -> Result<Response<Self::WorkStream>, Status> {
        let mut up = request.into_inner();
        let Some(WorkerMessage {
            kind: Some(worker_message::Kind::Register(r)),
        }) = up.message().await?
        else {
            return Err(Status::invalid_argument("register first"));
        };
        self.seen.lock().unwrap().registered.push(r.worker_id);
        let offer = WorkerCommand {
            kind: Some(worker_command::Kind::Dispatch(Dispatch {
                session_id: "s1".into(),
                attempt: 1,
                ..Default::default()
            })),
        };
        let stream = tokio_stream::iter([Ok(offer)]).chain(tokio_stream::pending());
        Ok(Response::new(Box::pin(stream)))
    }

    /// Answers the attach with ATTACHED, then records the call's messages until it ends.
    async fn session(
        &self,
        request: Request<Streaming<Downlink>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut down = request.into_inner();
        let Some(Downlink {
            kind: Some(downlink::Kind::Attach(attach)),
        }) = down.message().await?
        else {
            return Err(Status::invalid_argument("attach first"));
        };
        let (tx, rx) = mpsc::channel(8);
        tx.send(Ok(attached())).await.unwrap();
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                match down.message().await {
                    Ok(Some(m)) => {
                        let mut seen = this.seen.lock().unwrap();
                        let key = attach.session_id.clone();
                        seen.messages.entry(key).or_default().push(m);
                    }
                    Ok(None) => break this.end("ok".into()),
                    Err(status) => break this.end(format!("{:?}", status.code())),
                }
            }
            drop(tx);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn tap(&self, _: Request<TapRequest>) -> Result<Response<Self::TapStream>, Status> {
        Err(Status::unimplemented("tap"))
    }

    /// Answers each attach with ATTACHED on its channel and records every channel's messages.
    async fn multiplex(
        &self,
        request: Request<Streaming<MultiplexDownlink>>,
    ) -> Result<Response<Self::MultiplexStream>, Status> {
        let mut down = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let batch = match down.message().await {
                    Ok(Some(batch)) => batch,
                    Ok(None) => break this.end("ok".into()),
                    Err(status) => {
                        this.end(format!("{:?}", status.code()));
                        let _ = tx.send(Err(status)).await;
                        break;
                    }
                };
                let size = prost::Message::encoded_len(&batch);
                let mut answers = Vec::new();
                {
                    let mut seen = this.seen.lock().unwrap();
                    seen.largest_batch = seen.largest_batch.max(size);
                    for m in batch.messages {
                        let Some(d) = m.downlink else { continue };
                        if matches!(d.kind, Some(downlink::Kind::Attach(_))) {
                            answers.push(ChannelUplink {
                                channel: m.channel,
                                uplink: Some(attached()),
                                closed: None,
                            });
                        }
                        let key = m.channel.to_string();
                        seen.messages.entry(key).or_default().push(d);
                    }
                }
                if !answers.is_empty() {
                    let _ = tx.send(Ok(MultiplexUplink { messages: answers })).await;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// The fake on a free loopback port, with the transceiver's message limit.
async fn start() -> (FakeTransceiver, Bridge) {
    let fake = FakeTransceiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let service = BridgeServer::new(fake.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES);
    tokio::spawn(
        Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let pause = Duration::from_millis(20);
    let bridge = Bridge::connect_retrying(&endpoint, None, 50, pause)
        .await
        .unwrap();
    (fake, bridge)
}

fn text(chars: usize) -> downlink::Kind {
    downlink::Kind::Data(DataMessage {
        label: "oai-events".into(),
        payload: Some(data_message::Payload::Text("\\u0001".repeat(chars / 6))),
    })
}

async fn wait_attached(events: &mut mpsc::Receiver<CallEvent>) {
    let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("an answer in time");
    match event {
        Some(CallEvent::Uplink(u)) if u == attached() => {}
        other => panic!("not attached: {other:?}"),
    }
}

async fn wait_until(mut done: impl FnMut() -> bool) {
    for _ in 0..250 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not in 5 s");
}

#[tokio::test]
async fn an_echo_over_the_limit_is_refused_for_its_call_and_every_other_call_goes_on() {
    let (fake, bridge) = start().await;
    let mux = MultiplexClient::open(&bridge, 256).await.unwrap();
    let settings = AttachSettings {
        worker_id: "w".into(),
        sample_rate_hz: 48_000,
        mode: AudioMode::Pcm,
        progress_interval_ms: 0,
        encoder: None,
    };
    let (a_tx, mut a_events) = mpsc::channel(16);
    let (b_tx, mut b_events) = mpsc::channel(16);
    let a = mux.attach(settings.attach("a"), a_tx).await;
    let b = mux.attach(settings.attach("b"), b_tx).await;
    wait_attached(&mut a_events).await;
    wait_attached(&mut b_events).await;

    // Issue 37's echo: a 60 KB text of control characters, JSON-escaped to about 360 KB.
    let refused = a.send(text(360_000)).await.unwrap_err();
    assert!(matches!(refused, SendError::TooLarge(_)), "{refused}");
    assert_eq!(mux.refused(), 1);
    // Both calls go on, their messages packed into batches the transceiver takes: 100 data
    // messages of 60 KB on one, 100 ms chunks of audio on the other.
    for k in 0..100 {
        b.send(text(60_000)).await.unwrap();
        let pcm = vec![k as u8; 9_600].into();
        let chunk = AudioChunk {
            pcm,
            item_id: String::new(),
        };
        a.send(downlink::Kind::Audio(chunk)).await.unwrap();
    }
    let count = |channel: &str| {
        let seen = fake.seen.lock().unwrap();
        seen.messages.get(channel).map_or(0, Vec::len)
    };
    wait_until(|| count("1") == 101 && count("2") == 101).await;
    {
        let seen = fake.seen.lock().unwrap();
        assert!(seen.ends.is_empty(), "the stream lives: {:?}", seen.ends);
        assert!(
            seen.largest_batch <= MAX_MESSAGE_BYTES && seen.largest_batch > MAX_MESSAGE_BYTES / 2,
            "batches are filled up to the limit, never past it: {}",
            seen.largest_batch
        );
    }
    assert!(!mux.is_closed());

    // The same message sent unweighed is what the kit saves its calls from: the transceiver
    // ends the stream, and every call on it hears so.
    let raw = voxgate_proto::bridge::ChannelDownlink {
        channel: 1,
        downlink: Some(Downlink {
            kind: Some(text(360_000)),
        }),
        release: false,
    };
    mux.send_unchecked(raw).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), mux.ended())
        .await
        .expect("the stream ends");
    assert!(ended.is_some(), "it broke, it did not end cleanly");
    for events in [&mut a_events, &mut b_events] {
        match events.recv().await {
            Some(CallEvent::StreamGone(Some(_))) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(mux.is_closed());
}

#[tokio::test]
async fn a_worker_registers_attaches_its_offer_on_a_session_stream_and_release_ends_it() {
    let (fake, bridge) = start().await;
    let registration = Registration {
        worker_id: "w1".into(),
        capacity: 2,
        active: 0,
    };
    let mut work = WorkStream::open(&bridge, &registration).await.unwrap();
    assert_eq!(fake.seen.lock().unwrap().registered, vec!["w1".to_string()]);
    let offer = work.next_offer().await.unwrap().expect("an offer");
    assert_eq!((offer.session_id(), offer.attempt()), ("s1", 1));
    let settings = AttachSettings {
        worker_id: "w1".into(),
        sample_rate_hz: 16_000,
        mode: AudioMode::Pcm,
        progress_interval_ms: 100,
        encoder: None,
    };
    let (tx, mut events) = mpsc::channel(16);
    let call = attach_session(&bridge, offer.attach(&settings), tx, 8);
    wait_attached(&mut events).await;
    assert!(matches!(
        call.send(text(360_000)).await,
        Err(SendError::TooLarge(_))
    ));
    call.send(text(100)).await.unwrap();
    call.release().await;
    let seen = fake.seen.clone();
    wait_until(|| seen.lock().unwrap().ends == ["ok"]).await;
    let messages = fake.seen.lock().unwrap().messages["s1"].len();
    assert_eq!(messages, 1, "the refused message never left");
    assert_eq!(bridge.refused(), 1);
}
