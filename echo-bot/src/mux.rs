//! One `Multiplex` stream per worker subscription: every session the bot owns on a transceiver
//! rides on it as a numbered channel, the way the Python SDK carries its calls. A `Session`
//! stream per call costs the transceiver an HTTP/2 stream per caller and the wakeups and writes
//! that go with it: 21.2 against 15.3 µs of CPU per packet at 1,000 passthrough callers
//! (docs/BENCHMARKS.md, `passthrough-sessions` against `passthrough`).
//!
//! Each session task keeps the shape it would have on a `Session` stream: it sends `Downlink`
//! messages and reads `Uplink` ones through its [`ChannelHandle`]. This module numbers the
//! channels, batches what the sessions send, and routes what arrives to the session it is for.
//!
//! ```text
//!  session tasks ──ChannelDownlink──► batcher ──MultiplexDownlink──► transceiver
//!  session tasks ◄──ChannelEvent───── router  ◄──MultiplexUplink───── transceiver
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tracing::{debug, warn};
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{
    downlink, ChannelDownlink, Downlink, MultiplexDownlink, MultiplexUplink, Uplink,
};

use crate::backend::Bot;

/// Messages a session may have in flight towards the batcher (as a `Session` stream's queue).
const CHANNEL_QUEUE: usize = 256;
/// Uplink messages waiting for a session task: a slow task holds up the router, as a slow
/// reader holds up its own `Session` stream.
const UPLINK_QUEUE: usize = 256;
/// Batches waiting for the gRPC stream.
const STREAM_QUEUE: usize = 16;
/// Bytes of audio one batch carries at most: half the transceiver's 256 KiB message cap, so a
/// batch never ends the stream (13 chunks of 100 ms at 48 kHz).
const BATCH_BYTES: usize = 128 * 1024;
/// Counted per message besides its audio (ids, framing).
const MESSAGE_OVERHEAD: usize = 64;

/// What a session's channel hears.
#[derive(Debug)]
pub enum ChannelEvent {
    Uplink(Uplink),
    /// The channel's last message: OK once the session ended or was released, else the status
    /// a `Session` call would have failed with (an attach refused, a takeover).
    Closed(Status),
}

/// Where the router sends each channel's messages.
#[derive(Default)]
struct RouteTable {
    channels: HashMap<u64, mpsc::Sender<ChannelEvent>>,
    /// Cleared by the router when the stream ends: a channel opened after that would wait
    /// forever, so it gets no route and hears the end at once.
    ended: bool,
}

type Routes = Arc<Mutex<RouteTable>>;

/// A worker subscription's `Multiplex` stream.
pub struct Mux {
    down: mpsc::Sender<ChannelDownlink>,
    routes: Routes,
    next_channel: u64,
}

impl Mux {
    /// Opens the stream on `channel` and starts its batcher and router. They stop by
    /// themselves: the batcher once every sender (this and the sessions' handles) is gone, which
    /// closes the stream; the router once the transceiver ends it.
    pub async fn open(channel: Channel, bot: &Bot) -> Result<Mux, Status> {
        let (stream_tx, stream_rx) = mpsc::channel::<MultiplexDownlink>(STREAM_QUEUE);
        let (down, down_rx) = mpsc::channel::<ChannelDownlink>(CHANNEL_QUEUE);
        tokio::spawn(batch(down_rx, stream_tx));
        let uplink = BridgeClient::new(channel)
            .multiplex(bot.request(ReceiverStream::new(stream_rx)))
            .await?
            .into_inner();
        let routes = Routes::default();
        tokio::spawn(route(uplink, Arc::clone(&routes)));
        Ok(Mux {
            down,
            routes,
            next_channel: 1,
        })
    }

    /// A new channel (numbers are never reused within the stream). Its first message must be
    /// the attach.
    pub fn open_channel(&mut self) -> ChannelHandle {
        let channel = self.next_channel;
        self.next_channel += 1;
        let (tx, up) = mpsc::channel(UPLINK_QUEUE);
        let mut routes = lock(&self.routes);
        if !routes.ended {
            routes.channels.insert(channel, tx);
        }
        drop(routes);
        ChannelHandle {
            channel,
            down: self.down.clone(),
            up,
            routes: Arc::clone(&self.routes),
            closed: false,
        }
    }

    /// Whether the stream has ended (new sessions then need a new one).
    pub fn is_closed(&self) -> bool {
        self.down.is_closed() || lock(&self.routes).ended
    }
}

/// One session's end of the stream.
pub struct ChannelHandle {
    channel: u64,
    down: mpsc::Sender<ChannelDownlink>,
    up: mpsc::Receiver<ChannelEvent>,
    routes: Routes,
    /// The transceiver closed the channel: nothing to release.
    closed: bool,
}

impl ChannelHandle {
    /// Sends one message on the channel. A gone stream shows up on [`ChannelHandle::recv`].
    pub async fn send(&self, kind: downlink::Kind) {
        let message = ChannelDownlink {
            channel: self.channel,
            downlink: Some(Downlink { kind: Some(kind) }),
            release: false,
        };
        let _ = self.down.send(message).await;
    }

    /// The next message for this session; `None` when the whole stream broke.
    pub async fn recv(&mut self) -> Option<ChannelEvent> {
        let event = self.up.recv().await;
        if matches!(event, Some(ChannelEvent::Closed(_))) {
            self.closed = true;
        }
        event
    }
}

impl Drop for ChannelHandle {
    /// Gives the session up unless the transceiver already closed the channel, as dropping a
    /// `Session` stream does: the transceiver dispatches the caller again.
    fn drop(&mut self) {
        lock(&self.routes).channels.remove(&self.channel);
        if self.closed {
            return;
        }
        let release = ChannelDownlink {
            channel: self.channel,
            downlink: None,
            release: true,
        };
        if let Err(mpsc::error::TrySendError::Full(release)) = self.down.try_send(release) {
            let down = self.down.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = down.send(release).await;
                });
            }
        }
    }
}

/// Sends what the sessions queued, as many messages per batch as are ready (up to
/// [`BATCH_BYTES`] of audio), so a wakeup carries every session's chunk at once.
async fn batch(mut down: mpsc::Receiver<ChannelDownlink>, stream: mpsc::Sender<MultiplexDownlink>) {
    while let Some(first) = down.recv().await {
        let mut bytes = size(&first);
        let mut messages = vec![first];
        while bytes < BATCH_BYTES {
            match down.try_recv() {
                Ok(m) => {
                    bytes += size(&m);
                    messages.push(m);
                }
                Err(_) => break,
            }
        }
        if stream.send(MultiplexDownlink { messages }).await.is_err() {
            return; // the stream is gone; the router tells the sessions
        }
    }
}

fn size(m: &ChannelDownlink) -> usize {
    let audio = match m.downlink.as_ref().and_then(|d| d.kind.as_ref()) {
        Some(downlink::Kind::Audio(a)) => a.pcm.len(),
        _ => 0,
    };
    audio + MESSAGE_OVERHEAD
}

/// Hands each channel's messages to its session, in order; ends every session's channel
/// (their receivers return `None`) when the stream does.
async fn route(mut uplink: Streaming<MultiplexUplink>, routes: Routes) {
    loop {
        let batch = match uplink.message().await {
            Ok(Some(batch)) => batch,
            Ok(None) => {
                debug!("multiplex stream ended");
                break;
            }
            Err(status) => {
                warn!(code = ?status.code(), message = status.message(), "multiplex stream broke");
                break;
            }
        };
        for m in batch.messages {
            let Some(tx) = lock(&routes).channels.get(&m.channel).cloned() else {
                continue; // a session that has gone; the transceiver hears its release
            };
            let event = match (m.closed, m.uplink) {
                (Some(c), _) => {
                    lock(&routes).channels.remove(&m.channel);
                    ChannelEvent::Closed(Status::new(Code::from_i32(c.code), c.message))
                }
                (None, Some(u)) => ChannelEvent::Uplink(u),
                (None, None) => continue,
            };
            let _ = tx.send(event).await;
        }
    }
    let mut routes = lock(&routes);
    routes.ended = true;
    routes.channels.clear();
}

fn lock(routes: &Routes) -> std::sync::MutexGuard<'_, RouteTable> {
    routes.lock().unwrap_or_else(|p| p.into_inner())
}
