//! Downlink batching on a `Multiplex` stream: every call's queued messages leave together, in
//! one `MultiplexDownlink` per poll of the stream, so one write and one wakeup of the
//! transceiver carry every call's chunk.
//!
//! A batch is sized by its real encoded size against the transceiver's limit on one message (it
//! takes batches up to 4 MiB now; older transceivers ended a stream, and every call on it, for a
//! batch over that limit): [`BatchBuilder`] adds each message's
//! entry length (from `prost`'s `encoded_len`, weighed when the call queued it) and takes no
//! message that would pass the limit; that message starts the next batch. A message that could
//! fit no batch was refused when its call sent it ([`crate::CallSender`]).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use voxgate_proto::bridge::{ChannelDownlink, MultiplexDownlink};

use crate::call_sender::ChannelOut;
use crate::message_size::MAX_MESSAGE_BYTES;

/// How much one `MultiplexDownlink` may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Encoded bytes: the transceiver's message limit.
    pub bytes: usize,
    /// Channel messages: bounds one batch's time in the encoder and in the transceiver's loop.
    pub messages: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            bytes: MAX_MESSAGE_BYTES,
            messages: 256,
        }
    }
}

/// The batch being filled. Sans-IO: messages and their weights in, batches out.
#[derive(Debug)]
pub struct BatchBuilder {
    limits: BatchLimits,
    messages: Vec<ChannelDownlink>,
    bytes: usize,
}

impl BatchBuilder {
    pub fn new(limits: BatchLimits) -> BatchBuilder {
        BatchBuilder {
            limits,
            messages: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds `m`, whose entry length is `len` ([`crate::message_size::channel_entry_len`]), if
    /// the batch stays within its limits; gives `m` back if not.
    pub fn push(&mut self, m: ChannelDownlink, len: usize) -> Result<(), ChannelDownlink> {
        if self.is_full() || self.bytes + len > self.limits.bytes {
            return Err(m);
        }
        self.bytes += len;
        self.messages.push(m);
        Ok(())
    }

    /// No message more fits, whatever its size.
    pub fn is_full(&self) -> bool {
        self.messages.len() >= self.limits.messages
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The encoded size of the batch so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The batch, leaving the builder empty; `None` if it is.
    pub fn take(&mut self) -> Option<MultiplexDownlink> {
        if self.messages.is_empty() {
            return None;
        }
        self.bytes = 0;
        let messages = std::mem::take(&mut self.messages);
        Some(MultiplexDownlink { messages })
    }
}

/// The `Multiplex` request stream: each item is one batch of what the calls queued by the time
/// tonic polls it (no task of its own, no second queue).
pub(crate) struct Batches {
    rx: mpsc::Receiver<ChannelOut>,
    builder: BatchBuilder,
    /// A message taken that did not fit the last batch: the next one starts with it.
    carried: Option<ChannelOut>,
    /// Messages dropped here because no batch could hold them (only a message weighed against
    /// other limits gets here: calls refuse those first).
    dropped: Arc<AtomicU64>,
}

impl Batches {
    pub(crate) fn new(
        rx: mpsc::Receiver<ChannelOut>,
        limits: BatchLimits,
        dropped: Arc<AtomicU64>,
    ) -> Batches {
        Batches {
            rx,
            builder: BatchBuilder::new(limits),
            carried: None,
            dropped,
        }
    }
}

impl tokio_stream::Stream for Batches {
    type Item = MultiplexDownlink;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<MultiplexDownlink>> {
        let this = self.get_mut();
        loop {
            let next = match this.carried.take() {
                Some(item) => item,
                None => match this.rx.poll_recv(cx) {
                    Poll::Ready(Some(item)) => item,
                    Poll::Ready(None) if this.builder.is_empty() => return Poll::Ready(None),
                    Poll::Ready(None) | Poll::Pending => break,
                },
            };
            match next {
                ChannelOut::Checked { message, len } => match this.builder.push(message, len) {
                    Ok(()) if this.builder.is_full() => break,
                    Ok(()) => {}
                    Err(_) if this.builder.is_empty() => {
                        this.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(message) => {
                        this.carried = Some(ChannelOut::Checked { message, len });
                        break;
                    }
                },
                ChannelOut::Unchecked(message) if this.builder.is_empty() => {
                    let messages = vec![message];
                    return Poll::Ready(Some(MultiplexDownlink { messages }));
                }
                unchecked @ ChannelOut::Unchecked(_) => {
                    this.carried = Some(unchecked);
                    break;
                }
            }
        }
        match this.builder.take() {
            Some(batch) => Poll::Ready(Some(batch)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests;
