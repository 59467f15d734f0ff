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
//! holds at most [`MAX_WAITING`] messages (and all of them together
//! [`MAX_WAITING_FOR_ATTACH_BYTES_PER_STREAM`]), and open channels need live sessions the backend
//! owns. A channel message over the limit on one backend message is dropped for its channel
//! alone (an attach that large is refused, as on a `Session` stream), and an uplink batch stops
//! at a byte bound ([`crate::backend::message_size`] says why and what that bounds). What does
//! not fit is dropped and counted (`voxgate_multiplex_dropped_total{reason}`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Status, Streaming};
use voxgate_proto::bridge::{
    downlink, ChannelDownlink, ChannelUplink, Downlink, MultiplexDownlink, MultiplexUplink,
};

use crate::backend::attach::{
    attach_owner, observe_queue_wait, unix_micros_now, AttachRequest, DownlinkTx, DOWNLINK_QUEUE,
};
use crate::backend::message_size::{check_downlink, uplink_batch_len, TooLarge};
use crate::control::plane::ControlPlane;
use crate::media::audio_bridge::{ChannelTx, MuxLink, MuxReceiver, OwnerUplink};
use crate::metrics::{Metrics, MultiplexDrop};

/// Most channel messages in one `MultiplexUplink` (and at most `MAX_UPLINK_BATCH_BYTES` of
/// them): 256 frames of 48 kHz PCM are 0.5 MB, well under the 4 MB a gRPC client takes by
/// default.
const MAX_BATCH: usize = 256;
/// Slots of a channel's downlink queue that only clear, data and hangup may use, so a barge-in
/// gets through whatever audio is queued.
const DOWNLINK_CONTROL_RESERVE: usize = 16;
/// Audio a channel may have waiting here while its session's queue is full (the session itself
/// holds 30 s): a text-to-speech backend that sends a long answer at once loses nothing, a
/// runaway one loses what is past this (4 MB: 40 s of 48 kHz PCM).
const MAX_WAITING_AUDIO_BYTES: usize = 4 << 20;
/// The same, for all channels of one stream together.
const MAX_WAITING_AUDIO_BYTES_PER_STREAM: usize = 64 << 20;
/// How often audio waiting here is offered to its session again (a session takes its backend's
/// messages once per 20 ms frame).
const RETRY_WAITING: std::time::Duration = std::time::Duration::from_millis(10);
/// Messages that wait for a channel's attach to finish.
const MAX_WAITING: usize = 64;
/// Bytes of messages waiting for attaches, all channels of one stream together (each message
/// is at most `MAX_MESSAGE_BYTES`: without this, the attaches in flight times `MAX_WAITING`).
const MAX_WAITING_FOR_ATTACH_BYTES_PER_STREAM: usize = 16 << 20;
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
        carried: Vec::new(),
        metrics,
        waited,
    }
}

/// The stream's response: one `MultiplexUplink` per poll with everything queued, up to the
/// batch's bounds.
pub struct UplinkBatches {
    rx: MuxReceiver,
    /// Messages taken from the queue that did not fit the last batch (in order): the next one
    /// starts with them.
    carried: Vec<ChannelUplink>,
    metrics: Arc<Metrics>,
    /// Each frame's wait in the queue (`voxgate_bridge_uplink_queue_seconds`).
    waited: prometheus_client::metrics::histogram::Histogram,
}

impl Stream for UplinkBatches {
    type Item = Result<MultiplexUplink, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut messages = std::mem::take(&mut this.carried);
        if messages.is_empty() {
            match this.rx.poll_take(cx, &mut messages, MAX_BATCH) {
                Poll::Pending => return Poll::Pending,
                // Every sender is gone: the backend's side ended and every channel closed.
                Poll::Ready(0) => return Poll::Ready(None),
                Poll::Ready(_) => {}
            }
        }
        this.carried = messages.split_off(uplink_batch_len(&messages));
        let now = unix_micros_now();
        for m in &messages {
            if let Some(u) = &m.uplink {
                observe_queue_wait(&this.waited, u, now);
            }
        }
        this.metrics.multiplex_batch(messages.len());
        Poll::Ready(Some(Ok(MultiplexUplink { messages })))
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
    /// Attached: its session's downlink queue, and audio waiting for room in it.
    Open(OpenChannel),
}

struct OpenChannel {
    down: DownlinkTx,
    /// Audio that found the session's queue full, oldest first, and its bytes.
    waiting: std::collections::VecDeque<Downlink>,
    waiting_bytes: usize,
}

/// An attach's outcome: the channel and, if it succeeded, its session's downlink queue.
type Attached = (u64, Option<DownlinkTx>);

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
        waiting_bytes: 0,
        waiting_for_attach_bytes: 0,
        control,
        link,
        done: done_tx,
        told_too_large: false,
    };
    let mut retry = tokio::time::interval(RETRY_WAITING);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let why = loop {
        tokio::select! {
            msg = inbound.next() => match msg {
                Some(Ok(batch)) => {
                    for m in batch.messages {
                        channels.on_message(m);
                    }
                }
                // The connection broke, or the backend broke the protocol (a batch over the
                // service's decoding limit ends the stream with RESOURCE_EXHAUSTED, as on any
                // stream; a channel message over the limit on one message does not get here).
                Some(Err(status)) => break status.to_string(),
                // tonic ends a request stream the peer reset with CANCEL as if it had been
                // closed (`codec::decode`): a proxy timing the stream out looks the same here.
                None => break "the backend closed its side, or reset it with CANCEL".to_string(),
            },
            Some((channel, down)) = done_rx.recv() => channels.on_attached(channel, down),
            _ = retry.tick(), if channels.waiting_bytes > 0 => channels.offer_waiting(),
        }
    };
    let open = channels.slots.len();
    drop(channels);
    metrics.multiplex_streams(-1);
    tracing::info!(
        channels = open,
        reason = %why,
        "multiplex stream ended: its channels are released"
    );
}

/// The inbound task's channel table.
struct Channels {
    slots: HashMap<u64, Slot>,
    attaching: usize,
    /// Bytes of the messages waiting in every `Slot::Attaching`.
    waiting_for_attach_bytes: usize,
    /// Audio bytes waiting in every channel's `waiting`.
    waiting_bytes: usize,
    control: Arc<ControlPlane>,
    link: Arc<MuxLink>,
    done: mpsc::UnboundedSender<Attached>,
    /// Whether a message over the size limit was logged yet (once per stream; all are counted).
    told_too_large: bool,
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
                Some(Slot::Open(_)) => self.remove(channel),
                None => self.drop_counted(MultiplexDrop::UnknownChannel),
            }
            return;
        }
        let Some(d) = m.downlink else {
            return; // an empty message: nothing to do
        };
        if let Err(too_large) = check_downlink(&d) {
            self.refuse_too_large(channel, &d, too_large);
            return;
        }
        if matches!(self.slots.get(&channel), Some(Slot::Open(c)) if c.down.tx.is_closed()) {
            // The session ended or dropped this owner; the channel is over.
            self.remove(channel);
        }
        match self.slots.get_mut(&channel) {
            Some(Slot::Open(c)) => {
                let room = MAX_WAITING_AUDIO_BYTES_PER_STREAM.saturating_sub(self.waiting_bytes);
                let before = c.waiting_bytes;
                c.forward(&self.control.metrics, d, room);
                self.waiting_bytes = self.waiting_bytes + c.waiting_bytes - before;
            }
            Some(Slot::Attaching { waiting, .. }) => {
                let n = prost::Message::encoded_len(&d);
                let room = MAX_WAITING_FOR_ATTACH_BYTES_PER_STREAM - self.waiting_for_attach_bytes;
                if waiting.len() < MAX_WAITING && n <= room {
                    self.waiting_for_attach_bytes += n;
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

    /// Drops a message over the limit on one backend message, for its channel alone: the
    /// stream and every other channel go on. An attach that large is refused as a `Session`
    /// stream's would be.
    fn refuse_too_large(&mut self, channel: u64, d: &Downlink, e: TooLarge) {
        self.drop_counted(MultiplexDrop::TooLarge);
        if !self.told_too_large {
            self.told_too_large = true;
            tracing::warn!(channel, error = %e, "multiplex: a message over the size limit was dropped (only the first is logged per stream; all are counted)");
        }
        let attach = matches!(d.kind, Some(downlink::Kind::Attach(_)));
        if attach && !self.slots.contains_key(&channel) {
            self.link
                .close_channel(channel, tonic::Code::ResourceExhausted, e.to_string());
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
        let closed: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Open(c) if c.down.tx.is_closed()))
            .map(|(k, _)| *k)
            .collect();
        for k in closed {
            self.remove(k);
        }
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

    fn on_attached(&mut self, channel: u64, down: Option<DownlinkTx>) {
        self.attaching -= 1;
        let Some(Slot::Attaching { waiting, release }) = self.slots.remove(&channel) else {
            return;
        };
        let held: usize = waiting.iter().map(prost::Message::encoded_len).sum();
        self.waiting_for_attach_bytes -= held;
        let Some(down) = down else {
            for _ in waiting {
                self.drop_counted(MultiplexDrop::UnknownChannel);
            }
            return;
        };
        if release {
            return; // dropping `down` releases the session at once
        }
        let mut open = OpenChannel {
            down,
            waiting: Default::default(),
            waiting_bytes: 0,
        };
        for d in waiting {
            let room = MAX_WAITING_AUDIO_BYTES_PER_STREAM
                .saturating_sub(self.waiting_bytes + open.waiting_bytes);
            open.forward(&self.control.metrics, d, room);
        }
        self.waiting_bytes += open.waiting_bytes;
        self.slots.insert(channel, Slot::Open(open));
    }

    /// Offers waiting audio to sessions whose queues have room again.
    fn offer_waiting(&mut self) {
        let mut freed = 0;
        for slot in self.slots.values_mut() {
            if let Slot::Open(c) = slot {
                freed += c.offer_waiting();
            }
        }
        self.waiting_bytes -= freed;
    }

    /// Forgets a channel; dropping its sender releases the session if it still lives.
    fn remove(&mut self, channel: u64) {
        if let Some(Slot::Open(c)) = self.slots.remove(&channel) {
            self.waiting_bytes -= c.waiting_bytes;
        }
    }
}

fn is_audio(d: &Downlink) -> bool {
    matches!(
        d.kind,
        Some(downlink::Kind::Audio(_) | downlink::Kind::Opus(_))
    )
}

fn audio_bytes(d: &Downlink) -> usize {
    match &d.kind {
        Some(downlink::Kind::Audio(a)) => a.pcm.len(),
        Some(downlink::Kind::Opus(p)) => p.data.len(),
        _ => 0,
    }
}

impl OpenChannel {
    /// Hands a message to the session's queue without waiting. Audio goes in order: behind
    /// audio already waiting, or into `waiting` (up to `stream_room` more bytes) when the queue
    /// has no room beyond the control reserve. A clear drops the waiting audio with the queued
    /// audio it clears. Data and hangup use the reserve.
    fn forward(&mut self, metrics: &Metrics, d: Downlink, stream_room: usize) {
        match d.kind {
            // A repeated attach on an open channel is ignored, as on a `Session` stream.
            Some(downlink::Kind::Attach(_)) | None => return,
            Some(downlink::Kind::Clear(_)) => {
                self.waiting.clear();
                self.waiting_bytes = 0;
            }
            _ => {}
        }
        if is_audio(&d) && (!self.waiting.is_empty() || !self.has_audio_room()) {
            let n = audio_bytes(&d);
            if self.waiting_bytes + n > MAX_WAITING_AUDIO_BYTES || n > stream_room {
                metrics.multiplex_dropped(MultiplexDrop::DownlinkFull);
            } else {
                self.waiting_bytes += n;
                self.waiting.push_back(d);
            }
            return;
        }
        if self.down.try_send(d).is_err() {
            metrics.multiplex_dropped(MultiplexDrop::DownlinkFull);
        }
    }

    fn has_audio_room(&self) -> bool {
        self.down.tx.capacity() > DOWNLINK_CONTROL_RESERVE
    }

    /// Moves waiting audio into the session's queue while it has room; returns the bytes moved.
    fn offer_waiting(&mut self) -> usize {
        let mut moved = 0;
        while self.has_audio_room() {
            let Some(d) = self.waiting.pop_front() else {
                break;
            };
            let n = audio_bytes(&d);
            if self.down.tx.try_send(d.into()).is_err() {
                break; // the session is gone: the channel goes at the next message
            }
            moved += n;
        }
        self.waiting_bytes -= moved;
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxgate_proto::bridge::{AudioChunk, Clear, OpusPacket};

    #[test]
    fn audio_past_the_sessions_queue_waits_in_order_and_a_clear_drops_it() {
        let metrics = Metrics::new();
        let (tx, mut rx) = mpsc::channel(DOWNLINK_QUEUE + DOWNLINK_CONTROL_RESERVE);
        let mut c = OpenChannel {
            down: DownlinkTx {
                tx,
                clears: Default::default(),
            },
            waiting: Default::default(),
            waiting_bytes: 0,
        };
        let packet = |n: u8| Downlink {
            kind: Some(downlink::Kind::Opus(OpusPacket {
                data: vec![n; 100].into(),
                ..Default::default()
            })),
        };
        for n in 0..DOWNLINK_QUEUE + 10 {
            c.forward(&metrics, packet(n as u8), usize::MAX);
        }
        assert_eq!(c.waiting.len(), 10, "the session's queue took its share");
        assert_eq!(c.waiting_bytes, 1_000);
        // The session takes 5: 5 waiting packets follow, in order.
        for n in 0..5 {
            let got = rx.try_recv().unwrap().msg;
            assert!(matches!(got.kind, Some(downlink::Kind::Opus(p)) if p.data[0] == n));
        }
        assert_eq!(c.offer_waiting(), 500);
        let clear = Downlink {
            kind: Some(downlink::Kind::Clear(Clear {})),
        };
        c.forward(&metrics, clear, usize::MAX);
        assert!(c.waiting.is_empty() && c.waiting_bytes == 0);
        let mut got = Vec::new();
        while let Ok(d) = rx.try_recv() {
            got.push(d.msg);
        }
        assert_eq!(got.len(), DOWNLINK_QUEUE + 1, "59 + 5 moved + the clear");
        assert!(matches!(
            got.last().and_then(|d| d.kind.as_ref()),
            Some(downlink::Kind::Clear(_))
        ));
        assert!(!metrics.encode().contains("downlink_full"));
    }

    #[test]
    fn audio_past_the_waiting_bound_is_dropped_and_counted() {
        let metrics = Metrics::new();
        let (tx, _rx) = mpsc::channel(DOWNLINK_CONTROL_RESERVE + 1);
        let mut c = OpenChannel {
            down: DownlinkTx {
                tx,
                clears: Default::default(),
            },
            waiting: Default::default(),
            waiting_bytes: 0,
        };
        let chunk = || Downlink {
            kind: Some(downlink::Kind::Audio(AudioChunk {
                pcm: vec![0; 1 << 20].into(),
                item_id: String::new(),
            })),
        };
        for _ in 0..6 {
            c.forward(&metrics, chunk(), usize::MAX);
        }
        // One in the queue, 4 MB waiting, one dropped; and a stream out of room takes none.
        assert_eq!(c.waiting_bytes, MAX_WAITING_AUDIO_BYTES);
        c.forward(&metrics, chunk(), 0);
        let text = metrics.encode();
        assert!(
            text.contains(r#"voxgate_multiplex_dropped_total{reason="downlink_full"} 2"#),
            "{text}"
        );
    }
}
