//! One `Multiplex` stream: many calls, a numbered channel each, the way the Python SDK carries
//! its calls. A `Session` stream per call costs the transceiver an HTTP/2 stream per caller
//! and the wakeups and writes that go with it; on one stream its media loop hands over every
//! call's messages at once, and the calls' writes leave together too.
//!
//! ```text
//!  CallSender ─ChannelOut─► queue ─► Batches (BatchBuilder) ─MultiplexDownlink─► transceiver
//!  handler ◄─CallEvent── router task (ChannelTable) ◄─────────MultiplexUplink──── transceiver
//!  attach() ─(channel, handler)─► router, before the attach leaves
//! ```
//!
//! Channels are numbered from 1 and never reused within the stream. The router hands each
//! channel's messages to its handler in order, and when the stream ends tells every call still
//! on it (`StreamGone`); a call attached after that hears it at once.

pub mod batch;
pub mod channel_table;

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};
use tracing::{debug, warn};
use voxgate_proto::bridge::{downlink, Attach, ChannelDownlink, MultiplexUplink};

use crate::bridge::Bridge;
use crate::call_event::{CallEvent, CallHandler};
use crate::call_sender::{CallSender, ChannelOut, SendError};
use batch::{BatchLimits, Batches};
use channel_table::{ChannelTable, Route};

/// A call's handler and downlink, as the router holds them.
type Registration<H> = (u64, H, CallSender);

/// How a stream ended: `None` cleanly, else the status it broke with.
type StreamEnd = Option<Status>;

/// A worker's `Multiplex` stream to one transceiver, for calls handled by `H`.
pub struct MultiplexClient<H: CallHandler> {
    down: mpsc::Sender<ChannelOut>,
    registrations: mpsc::UnboundedSender<Registration<H>>,
    next_channel: AtomicU64,
    end: watch::Receiver<Option<StreamEnd>>,
    bridge: Bridge,
}

impl<H: CallHandler> MultiplexClient<H> {
    /// Opens the stream on `bridge` (`queue`: messages all its calls together may have waiting
    /// for it) and starts its router. The stream closes once this client and every call's
    /// sender are gone, or when the transceiver ends it.
    pub async fn open(bridge: &Bridge, queue: usize) -> Result<Self, Status> {
        let (down, rx) = mpsc::channel(queue.max(1));
        let outbound = Batches::new(rx, BatchLimits::default(), bridge.refusals());
        let request = bridge.request(outbound);
        let uplink = bridge.client().multiplex(request).await?.into_inner();
        let (registrations, registered) = mpsc::unbounded_channel();
        let (end_tx, end) = watch::channel(None);
        tokio::spawn(route(uplink, registered, end_tx));
        Ok(MultiplexClient {
            down,
            registrations,
            next_channel: AtomicU64::new(1),
            end,
            bridge: bridge.clone(),
        })
    }

    /// Attaches a session on a new channel: its events go to `handler`, from the answer to the
    /// attach (ATTACHED, or `Closed` with the status a `Session` call would get) on. Returns
    /// the call's downlink once the attach is queued.
    pub async fn attach(&self, attach: Attach, handler: H) -> CallSender {
        let channel = self.next_channel.fetch_add(1, Ordering::Relaxed);
        let sender = CallSender::channel(self.down.clone(), channel, self.bridge.refusals());
        if let Err(gone) = self.registrations.send((channel, handler, sender.clone())) {
            // The router has stopped: the stream is over, and so is this call.
            let (_, mut handler, sender) = gone.0;
            let end = self.end.borrow().clone().flatten();
            handler.handle(CallEvent::StreamGone(end), &sender).await;
            return sender;
        }
        // An attach weighs a few dozen bytes; a gone stream reaches the handler by itself.
        let _ = sender.send(downlink::Kind::Attach(attach)).await;
        sender
    }

    /// Sends `m` as it is, in a message of its own, unweighed: for tests of how the transceiver
    /// treats what the kit never sends (unknown channels, messages over its limit).
    pub async fn send_unchecked(&self, m: ChannelDownlink) -> Result<(), SendError> {
        let item = ChannelOut::Unchecked(m);
        self.down.send(item).await.map_err(|_| SendError::Closed)
    }

    /// Whether the stream has ended (new calls then need a new one).
    pub fn is_closed(&self) -> bool {
        self.down.is_closed() || self.end.borrow().is_some()
    }

    /// Waits for the end of the stream: `None` if the transceiver ended it cleanly, else the
    /// status it broke with.
    pub async fn ended(&self) -> Option<Status> {
        let mut end = self.end.clone();
        let ended = end.wait_for(Option::is_some).await;
        ended.ok().and_then(|end| end.clone()).flatten()
    }

    /// Downlink messages refused so far for their size (on this stream's bridge).
    pub fn refused(&self) -> u64 {
        self.bridge.refused()
    }
}

/// Hands each channel's messages to its handler, in order, until the stream ends; then tells
/// every call still on it.
async fn route<H: CallHandler>(
    mut uplink: Streaming<MultiplexUplink>,
    mut registrations: mpsc::UnboundedReceiver<Registration<H>>,
    end: watch::Sender<Option<StreamEnd>>,
) {
    let mut table: ChannelTable<(H, CallSender)> = ChannelTable::default();
    let ended = loop {
        tokio::select! {
            // A channel is registered before its attach is queued: taking registrations first
            // routes the answer to it.
            biased;
            Some((channel, handler, sender)) = registrations.recv() => {
                table.insert(channel, (handler, sender));
            }
            batch = uplink.message() => match batch {
                Ok(Some(batch)) => {
                    for m in batch.messages {
                        deliver(&mut table, m).await;
                    }
                }
                Ok(None) => {
                    debug!("multiplex stream ended");
                    break None;
                }
                Err(status) => {
                    warn!(code = ?status.code(), message = status.message(), "multiplex stream broke");
                    break Some(status);
                }
            },
        }
    };
    end.send_replace(Some(ended.clone()));
    registrations.close();
    while let Ok((channel, handler, sender)) = registrations.try_recv() {
        table.insert(channel, (handler, sender));
    }
    for (mut handler, sender) in table.drain() {
        handler
            .handle(CallEvent::StreamGone(ended.clone()), &sender)
            .await;
    }
}

async fn deliver<H: CallHandler>(
    table: &mut ChannelTable<(H, CallSender)>,
    m: voxgate_proto::bridge::ChannelUplink,
) {
    match table.route(m) {
        // A call given up; the transceiver hears its release.
        None => {}
        Some((Route::Open((handler, sender)), events)) => {
            for event in events {
                handler.handle(event, sender).await;
            }
        }
        Some((Route::Last((mut handler, sender)), events)) => {
            for event in events {
                handler.handle(event, &sender).await;
            }
        }
    }
}
