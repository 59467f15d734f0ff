//! The gRPC edge of a `Multiplex` stream: many sessions on one stream, each on a channel that
//! behaves like a `Session` stream (the contract is in `proto/grpc/voxgate.proto`).
//!
//! - Uplink ([`UplinkBatches`], the response): every channel's owner, on whichever media loop,
//!   queues into the stream's one [`MuxLink`]; each poll drains what is there into one
//!   `MultiplexUplink`. A loop pass that produced frames for fifty of the backend's sessions
//!   thus wakes one task and becomes one message, one HTTP/2 DATA frame and one write, where
//!   fifty `Session` streams cost fifty of each (measured in docs/BENCHMARKS.md, `-mux` rows).
//! - Downlink ([`run_inbound`], one task per stream): each `ChannelDownlink` goes to its
//!   channel's bounded queue with `try_send`, never awaiting room, so one channel cannot hold up
//!   another; attaches run as tasks of their own for the same reason.
//!
//! Bounds: a stream has at most [`MAX_ATTACHES_IN_FLIGHT`] attaches pending, a pending channel
//! holds at most [`MAX_WAITING`] messages, and open channels need live sessions the backend
//! owns. What does not fit is dropped and counted (`voxgate_multiplex_dropped_total{reason}`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Status, Streaming};
use voxgate_proto::bridge::{
    downlink, ChannelDownlink, Downlink, MultiplexDownlink, MultiplexUplink,
};

use crate::backend::bridge_service::{
    attach_owner, observe_queue_wait, unix_micros_now, AttachRequest, DOWNLINK_QUEUE,
};
use crate::control::plane::ControlPlane;
use crate::media::audio_bridge::{ChannelTx, MuxLink, MuxReceiver, OwnerUplink};
use crate::metrics::{Metrics, MultiplexDrop};

/// Most channel messages in one `MultiplexUplink`: 256 frames of 48 kHz PCM are 0.5 MB, well
/// under the 4 MB a gRPC client takes by default.
const MAX_BATCH: usize = 256;
/// Slots of a channel's downlink queue that only clear, data and hangup may use: audio beyond
/// [`DOWNLINK_QUEUE`] is dropped, and a barge-in still gets through.
const DOWNLINK_CONTROL_RESERVE: usize = 16;
/// Messages that wait for a channel's attach to finish.
const MAX_WAITING: usize = 64;
/// Attaches a stream may have pending at once (each is a round trip to the dispatcher and a
/// media loop); more are refused with RESOURCE_EXHAUSTED.
const MAX_ATTACHES_IN_FLIGHT: usize = 256;

/// Starts serving one `Multiplex` stream; returns its response.
pub fn serve(control: Arc<ControlPlane>, inbound: Streaming<MultiplexDownlink>) -> UplinkBatches {
    let (link, rx) = MuxLink::new();
    let metrics = control.metrics.clone();
    let waited = metrics.uplink_queue_histogram();
    tokio::spawn(run_inbound(control, link, inbound));
    UplinkBatches {
        rx,
        metrics,
        waited,
    }
}

/// The stream's response: one `MultiplexUplink` per poll with everything queued.
pub struct UplinkBatches {
    rx: MuxReceiver,
    metrics: Arc<Metrics>,
    /// Each frame's wait in the queue (`voxgate_bridge_uplink_queue_seconds`).
    waited: prometheus_client::metrics::histogram::Histogram,
}

impl Stream for UplinkBatches {
    type Item = Result<MultiplexUplink, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut messages = Vec::new();
        match this.rx.poll_take(cx, &mut messages, MAX_BATCH) {
            Poll::Pending => Poll::Pending,
            // Every sender is gone: the backend's side ended and every channel closed.
            Poll::Ready(0) => Poll::Ready(None),
            Poll::Ready(n) => {
                let now = unix_micros_now();
                for m in &messages {
                    if let Some(u) = &m.uplink {
                        observe_queue_wait(&this.waited, u, now);
                    }
                }
                this.metrics.multiplex_batch(n);
                Poll::Ready(Some(Ok(MultiplexUplink { messages })))
            }
        }
    }
}

/// A channel as the inbound task knows it.
enum Slot {
    /// Its attach is in flight; messages for it wait here. `release`: the backend already gave
    /// it up.
    Attaching {
        waiting: Vec<Downlink>,
        release: bool,
    },
    /// Attached: its session's downlink queue.
    Open(mpsc::Sender<Downlink>),
}

/// An attach's outcome: the channel and, if it succeeded, its session's downlink queue.
type Attached = (u64, Option<mpsc::Sender<Downlink>>);

/// Reads the backend's messages until the stream ends, then releases every channel (their
/// downlink queues close, and the loops hand the sessions back to the dispatcher).
async fn run_inbound(
    control: Arc<ControlPlane>,
    link: Arc<MuxLink>,
    mut inbound: Streaming<MultiplexDownlink>,
) {
    let metrics = control.metrics.clone();
    metrics.multiplex_streams(1);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Attached>();
    let mut channels = Channels {
        slots: HashMap::new(),
        attaching: 0,
        control,
        link,
        done: done_tx,
    };
    loop {
        tokio::select! {
            msg = inbound.next() => match msg {
                Some(Ok(batch)) => {
                    for m in batch.messages {
                        channels.on_message(m);
                    }
                }
                // The backend closed its side, or the connection broke.
                Some(Err(_)) | None => break,
            },
            Some((channel, down)) = done_rx.recv() => channels.on_attached(channel, down),
        }
    }
    let open = channels.slots.len();
    drop(channels);
    metrics.multiplex_streams(-1);
    tracing::info!(
        channels = open,
        "multiplex stream ended: its channels are released"
    );
}

/// The inbound task's channel table.
struct Channels {
    slots: HashMap<u64, Slot>,
    attaching: usize,
    control: Arc<ControlPlane>,
    link: Arc<MuxLink>,
    done: mpsc::UnboundedSender<Attached>,
}

impl Channels {
    fn drop_counted(&self, reason: MultiplexDrop) {
        self.control.metrics.multiplex_dropped(reason);
    }

    fn on_message(&mut self, m: ChannelDownlink) {
        let channel = m.channel;
        if m.release {
            match self.slots.get_mut(&channel) {
                Some(Slot::Attaching { release, .. }) => *release = true,
                // Dropping the queue's sender is what releases the session.
                Some(Slot::Open(_)) => {
                    self.slots.remove(&channel);
                }
                None => self.drop_counted(MultiplexDrop::UnknownChannel),
            }
            return;
        }
        let Some(d) = m.downlink else {
            return; // an empty message: nothing to do
        };
        if matches!(self.slots.get(&channel), Some(Slot::Open(tx)) if tx.is_closed()) {
            // The session ended or dropped this owner; the channel is over.
            self.slots.remove(&channel);
        }
        match self.slots.get_mut(&channel) {
            Some(Slot::Open(tx)) => forward(&self.control.metrics, tx, d),
            Some(Slot::Attaching { waiting, .. }) => {
                if waiting.len() < MAX_WAITING {
                    waiting.push(d);
                } else {
                    self.drop_counted(MultiplexDrop::AttachPending);
                }
            }
            None => match d.kind {
                Some(downlink::Kind::Attach(a)) => self.start_attach(channel, &a),
                _ => self.drop_counted(MultiplexDrop::UnknownChannel),
            },
        }
    }

    fn start_attach(&mut self, channel: u64, attach: &voxgate_proto::bridge::Attach) {
        if self.attaching >= MAX_ATTACHES_IN_FLIGHT {
            self.link.close_channel(
                channel,
                tonic::Code::ResourceExhausted,
                format!("more than {MAX_ATTACHES_IN_FLIGHT} attaches pending on this stream"),
            );
            return;
        }
        let ask = match AttachRequest::parse(attach) {
            Ok(a) => a,
            Err(status) => {
                self.link
                    .close_channel(channel, status.code(), status.message().to_string());
                return;
            }
        };
        // Channels whose sessions ended since the last attach leave the table here, so it
        // holds live channels and the few that closed since.
        self.slots.retain(|_, s| match s {
            Slot::Open(tx) => !tx.is_closed(),
            Slot::Attaching { .. } => true,
        });
        self.slots.insert(
            channel,
            Slot::Attaching {
                waiting: Vec::new(),
                release: false,
            },
        );
        self.attaching += 1;
        let (control, link, done) = (self.control.clone(), self.link.clone(), self.done.clone());
        tokio::spawn(async move {
            let uplink = OwnerUplink::Channel(ChannelTx::new(link.clone(), channel));
            let capacity = DOWNLINK_QUEUE + DOWNLINK_CONTROL_RESERVE;
            let down = match attach_owner(&control, ask, uplink, capacity).await {
                Ok(tx) => Some(tx),
                Err(status) => {
                    link.close_channel(channel, status.code(), status.message().to_string());
                    None
                }
            };
            // Fails only once the stream ended: dropping `down` then releases the session.
            let _ = done.send((channel, down));
        });
    }

    fn on_attached(&mut self, channel: u64, down: Option<mpsc::Sender<Downlink>>) {
        self.attaching -= 1;
        let Some(Slot::Attaching { waiting, release }) = self.slots.remove(&channel) else {
            return;
        };
        let Some(tx) = down else {
            for _ in waiting {
                self.drop_counted(MultiplexDrop::UnknownChannel);
            }
            return;
        };
        if release {
            return; // dropping `tx` releases the session at once
        }
        for d in waiting {
            forward(&self.control.metrics, &tx, d);
        }
        self.slots.insert(channel, Slot::Open(tx));
    }
}

/// Hands a message to an open channel's queue without waiting: audio only while the queue has
/// more room than the control reserve, the rest while it has any.
fn forward(metrics: &Metrics, tx: &mpsc::Sender<Downlink>, d: Downlink) {
    let audio = matches!(
        d.kind,
        Some(downlink::Kind::Audio(_) | downlink::Kind::Opus(_))
    );
    match d.kind {
        // A repeated attach on an open channel is ignored, as on a `Session` stream.
        Some(downlink::Kind::Attach(_)) | None => {}
        _ if audio && tx.capacity() <= DOWNLINK_CONTROL_RESERVE => {
            metrics.multiplex_dropped(MultiplexDrop::DownlinkFull)
        }
        _ => {
            if tx.try_send(d).is_err() {
                metrics.multiplex_dropped(MultiplexDrop::DownlinkFull);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxgate_proto::bridge::{AudioChunk, Clear, OpusPacket};

    fn opus() -> Downlink {
        Downlink {
            kind: Some(downlink::Kind::Opus(OpusPacket::default())),
        }
    }

    #[test]
    fn a_full_channel_drops_audio_but_keeps_room_for_a_clear() {
        let metrics = Metrics::new();
        let (tx, mut rx) = mpsc::channel(DOWNLINK_QUEUE + DOWNLINK_CONTROL_RESERVE);
        for _ in 0..DOWNLINK_QUEUE + 10 {
            forward(&metrics, &tx, opus());
        }
        let pcm = Downlink {
            kind: Some(downlink::Kind::Audio(AudioChunk::default())),
        };
        forward(&metrics, &tx, pcm);
        let clear = Downlink {
            kind: Some(downlink::Kind::Clear(Clear {})),
        };
        forward(&metrics, &tx, clear);
        let mut got = Vec::new();
        while let Ok(d) = rx.try_recv() {
            got.push(d);
        }
        assert_eq!(got.len(), DOWNLINK_QUEUE + 1);
        assert!(matches!(
            got.last().and_then(|d| d.kind.as_ref()),
            Some(downlink::Kind::Clear(_))
        ));
        let text = metrics.encode();
        assert!(
            text.contains(r#"voxgate_multiplex_dropped_total{reason="downlink_full"} 11"#),
            "{text}"
        );
    }
}
