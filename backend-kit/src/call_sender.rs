//! A call's downlink: what the backend sends to its caller (audio, clear, data, hangup), queued
//! for the call's `Session` stream or for its channel of a `Multiplex` stream.
//!
//! Every message is weighed before it is queued ([`crate::message_size`]): one over the
//! transceiver's limit is refused here, for this call alone, with [`SendError::TooLarge`], and
//! counted on the [`crate::Bridge`] it came through; the stream and the other calls on it never
//! see it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use voxgate_proto::bridge::{downlink, ChannelDownlink, Downlink};

use crate::message_size::{
    channel_entry_len, check_channel_downlink, check_session_downlink, TooLarge, MAX_MESSAGE_BYTES,
};

/// What a `Session` stream's writer takes: a message, or the end of the stream (the call
/// given up without a hangup).
#[derive(Debug)]
pub(crate) enum SessionOut {
    Message(Downlink),
    Release,
}

/// What a `Multiplex` stream's batcher takes.
#[derive(Debug)]
pub(crate) enum ChannelOut {
    /// A message weighed at queueing: `len` is its entry length in a batch, within the limit.
    Checked {
        message: ChannelDownlink,
        len: usize,
    },
    /// A message sent as it is, in a batch of its own, whatever its size (tests that probe the
    /// transceiver's own limits).
    Unchecked(ChannelDownlink),
}

impl ChannelOut {
    pub(crate) fn checked(message: ChannelDownlink) -> Result<ChannelOut, TooLarge> {
        let len = check_channel_downlink(&message, MAX_MESSAGE_BYTES)?;
        Ok(ChannelOut::Checked { message, len })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Refused before queueing: no message to the transceiver may be this large.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    /// The call's stream is gone (its end reaches the handler).
    #[error("the call's stream is gone")]
    Closed,
    /// `try_send` only: the queue towards the stream is full.
    #[error("the call's downlink queue is full")]
    Full,
}

/// A call's downlink; clones send on the same call, in one order.
#[derive(Clone, Debug)]
pub struct CallSender {
    route: Route,
    refused: Arc<AtomicU64>,
}

#[derive(Clone, Debug)]
enum Route {
    Session(mpsc::Sender<SessionOut>),
    Channel {
        tx: mpsc::Sender<ChannelOut>,
        channel: u64,
    },
}

/// One weighed item and the queue it goes to.
enum Queued<'a> {
    Session(&'a mpsc::Sender<SessionOut>, SessionOut),
    Channel(&'a mpsc::Sender<ChannelOut>, ChannelOut),
}

impl CallSender {
    pub(crate) fn session(tx: mpsc::Sender<SessionOut>, refused: Arc<AtomicU64>) -> CallSender {
        CallSender {
            route: Route::Session(tx),
            refused,
        }
    }

    pub(crate) fn channel(
        tx: mpsc::Sender<ChannelOut>,
        channel: u64,
        refused: Arc<AtomicU64>,
    ) -> CallSender {
        CallSender {
            route: Route::Channel { tx, channel },
            refused,
        }
    }

    /// The call's channel on its `Multiplex` stream (`None` on a `Session` stream).
    pub fn channel_number(&self) -> Option<u64> {
        match &self.route {
            Route::Session(_) => None,
            Route::Channel { channel, .. } => Some(*channel),
        }
    }

    /// Sends one message, waiting for room in the queue (the stream's flow control).
    pub async fn send(&self, kind: downlink::Kind) -> Result<(), SendError> {
        match self.weigh(kind)? {
            Queued::Session(tx, item) => tx.send(item).await.map_err(|_| SendError::Closed),
            Queued::Channel(tx, item) => tx.send(item).await.map_err(|_| SendError::Closed),
        }
    }

    /// Queues one message if there is room now.
    pub fn try_send(&self, kind: downlink::Kind) -> Result<(), SendError> {
        match self.weigh(kind)? {
            Queued::Session(tx, item) => tx.try_send(item).map_err(try_send_error),
            Queued::Channel(tx, item) => tx.try_send(item).map_err(try_send_error),
        }
    }

    /// As [`CallSender::send`], from a thread outside the runtime.
    pub fn blocking_send(&self, kind: downlink::Kind) -> Result<(), SendError> {
        match self.weigh(kind)? {
            Queued::Session(tx, item) => tx.blocking_send(item).map_err(|_| SendError::Closed),
            Queued::Channel(tx, item) => tx.blocking_send(item).map_err(|_| SendError::Closed),
        }
    }

    /// Gives the call up without a hangup, after what was queued before: the transceiver
    /// dispatches the caller again. Ends a `Session` stream; on a `Multiplex` channel, the
    /// transceiver answers with `closed` (OK).
    pub async fn release(&self) {
        // A gone stream has released the call already.
        let _ = match self.release_item() {
            Queued::Session(tx, item) => tx.send(item).await.is_ok(),
            Queued::Channel(tx, item) => tx.send(item).await.is_ok(),
        };
    }

    /// As [`CallSender::release`], from a thread outside the runtime.
    pub fn blocking_release(&self) {
        let _ = match self.release_item() {
            Queued::Session(tx, item) => tx.blocking_send(item).is_ok(),
            Queued::Channel(tx, item) => tx.blocking_send(item).is_ok(),
        };
    }

    /// Releases without waiting (from a `Drop`): at once if there is room, else from a task.
    pub(crate) fn release_now(&self) {
        use mpsc::error::TrySendError::Full;
        let full = match self.release_item() {
            Queued::Session(tx, item) => matches!(tx.try_send(item), Err(Full(_))),
            Queued::Channel(tx, item) => matches!(tx.try_send(item), Err(Full(_))),
        };
        if full {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let sender = self.clone();
                runtime.spawn(async move { sender.release().await });
            }
        }
    }

    /// Messages refused for their size on the bridge this call came through.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn weigh(&self, kind: downlink::Kind) -> Result<Queued<'_>, SendError> {
        let message = Downlink { kind: Some(kind) };
        let weighed = match &self.route {
            Route::Session(tx) => check_session_downlink(&message, MAX_MESSAGE_BYTES)
                .map(|_| Queued::Session(tx, SessionOut::Message(message))),
            Route::Channel { tx, channel } => ChannelOut::checked(ChannelDownlink {
                channel: *channel,
                downlink: Some(message),
                release: false,
            })
            .map(|item| Queued::Channel(tx, item)),
        };
        weighed.map_err(|too_large| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            SendError::TooLarge(too_large)
        })
    }

    fn release_item(&self) -> Queued<'_> {
        match &self.route {
            Route::Session(tx) => Queued::Session(tx, SessionOut::Release),
            Route::Channel { tx, channel } => {
                let message = ChannelDownlink {
                    channel: *channel,
                    downlink: None,
                    release: true,
                };
                let len = channel_entry_len(&message);
                Queued::Channel(tx, ChannelOut::Checked { message, len })
            }
        }
    }
}

fn try_send_error<T>(e: mpsc::error::TrySendError<T>) -> SendError {
    match e {
        mpsc::error::TrySendError::Full(_) => SendError::Full,
        mpsc::error::TrySendError::Closed(_) => SendError::Closed,
    }
}

#[cfg(test)]
mod tests;
