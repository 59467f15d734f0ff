//! Where a session's uplink goes: its owner's `Session` stream (a bounded queue of its own), or
//! a channel of a `Multiplex` stream (one queue shared by every channel of that stream, on every
//! media loop).
//!
//! Both take messages with a non-blocking offer and refuse what does not fit, keeping the last
//! [`UPLINK_CONTROL_RESERVE`] slots (per channel) for messages that must not be lost.
//!
//! Why a shared queue: with one `Session` stream per call, every 20 ms frame wakes its own
//! stream task, becomes its own HTTP/2 DATA frame and, on a busy connection, its own `writev`.
//! A `Multiplex` stream's response drains everything its channels queued since it last ran
//! into one message, so a media-loop pass that produced frames for fifty sessions of a backend
//! costs one wake, one DATA frame and one write (see `backend::multiplex`). What that saves,
//! in the gRPC uplink and in the whole transceiver's CPU per packet, is in
//! docs/SESSION_COST.md, "One stream for many sessions".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::{self, error::TrySendError};
use voxgate_proto::bridge::{uplink, ChannelClosed, ChannelUplink, Uplink};

/// Slots of an owner's uplink queue that audio frames and progress reports may use: about 2 s of
/// frames. A backend further behind than that is stuck, and old audio is worthless to it.
pub const UPLINK_AUDIO_SLOTS: usize = 100;
/// Slots of every uplink queue (an owner's or a tap's) that audio and progress reports may not
/// take. A backend that lags behind fills its queue with audio, and then the next frame is
/// dropped (old audio is worthless, and the next progress report supersedes the last). Events,
/// the caller's data messages and the answer to a clear must not be lost that way: they go
/// into these slots. Only a backend that falls this many of them behind loses one (counted in
/// `uplink_dropped`, like a frame).
pub const UPLINK_CONTROL_RESERVE: usize = 16;
/// Uplink messages one owner (a `Session` stream, or each channel of a `Multiplex` stream) may
/// have queued.
pub const UPLINK_QUEUE: usize = UPLINK_AUDIO_SLOTS + UPLINK_CONTROL_RESERVE;

/// Why an offered message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No room for this kind of message: counted as dropped.
    Full,
    /// The backend's stream is gone (noticed by the downlink side).
    Closed,
}

/// Why an owner's uplink ends; a `Multiplex` channel tells its backend in `closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The session ended (its ENDED event went first).
    Ended,
    /// The backend gave the session up, or its streams are gone.
    Released,
    /// Another backend attached to the session.
    Replaced,
    /// The owner's queue stayed full past the stall time.
    Stalled,
}

impl CloseReason {
    fn status(self) -> (tonic::Code, &'static str) {
        match self {
            CloseReason::Ended => (tonic::Code::Ok, "session ended"),
            CloseReason::Released => (tonic::Code::Ok, "released"),
            CloseReason::Replaced => (tonic::Code::Aborted, "another backend owns the session"),
            CloseReason::Stalled => (
                tonic::Code::ResourceExhausted,
                "backend stalled: its uplink stayed full past --backend-stall-secs",
            ),
        }
    }
}

/// Whether `msg` may be dropped when its queue is short of room: a frame (newer audio matters
/// more) or a progress report (the next one supersedes it).
pub fn droppable(msg: &Uplink) -> bool {
    matches!(
        msg.kind,
        Some(uplink::Kind::Audio(_) | uplink::Kind::Opus(_) | uplink::Kind::Progress(_))
    )
}

/// `try_send` that keeps the last [`UPLINK_CONTROL_RESERVE`] slots of `tx` for messages that are
/// not [`droppable`]. A capacity read: no lock and no allocation.
pub fn offer_bounded(tx: &mpsc::Sender<Uplink>, msg: Uplink) -> Result<(), Refused> {
    if droppable(&msg) && tx.capacity() <= UPLINK_CONTROL_RESERVE {
        return Err(Refused::Full);
    }
    tx.try_send(msg).map_err(|e| match e {
        TrySendError::Full(_) => Refused::Full,
        TrySendError::Closed(_) => Refused::Closed,
    })
}

/// An owner's uplink.
pub enum OwnerUplink {
    /// A `Session` stream: its own bounded queue; the stream ends when this is dropped.
    Stream(mpsc::Sender<Uplink>),
    /// A channel of a `Multiplex` stream.
    Channel(ChannelTx),
}

impl OwnerUplink {
    pub fn offer(&self, msg: Uplink) -> Result<(), Refused> {
        match self {
            OwnerUplink::Stream(tx) => offer_bounded(tx, msg),
            OwnerUplink::Channel(c) => c.offer(msg),
        }
    }

    /// Whether an audio frame would be taken now (false: the backend is behind).
    pub fn has_audio_room(&self) -> bool {
        match self {
            OwnerUplink::Stream(tx) => tx.capacity() > UPLINK_CONTROL_RESERVE,
            OwnerUplink::Channel(c) => c.link.queued() < c.link.limit(UPLINK_AUDIO_SLOTS),
        }
    }

    /// The backend's side of the stream is gone.
    pub fn is_closed(&self) -> bool {
        match self {
            OwnerUplink::Stream(tx) => tx.is_closed(),
            OwnerUplink::Channel(c) => c.link.tx.is_closed(),
        }
    }

    /// The owner has been attached: from now on its channel (if it is one) counts toward its
    /// stream's queue and ends with `closed` (an attach that fails is answered by the gRPC edge).
    pub fn mark_attached(&mut self) {
        if let OwnerUplink::Channel(c) = self {
            if !c.attached {
                c.attached = true;
                c.link.channels.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Ends the owner's uplink: a `Session` stream ends once its sender is dropped; a channel
    /// is told why in `closed`.
    pub fn close(mut self, reason: CloseReason) {
        if let OwnerUplink::Channel(c) = &mut self {
            c.reason = reason;
        }
    }
}

/// The loop side of one `Multiplex` stream: the queue its response drains, shared by the
/// stream's channels on every media loop, and how many messages it holds. Bounded by count:
/// each open channel may add [`UPLINK_QUEUE`] messages to it.
pub struct MuxLink {
    tx: mpsc::UnboundedSender<ChannelUplink>,
    counts: Arc<LinkCounts>,
    channels: AtomicUsize,
}

/// Messages queued on a link (raised by the loops, lowered by the stream's response).
#[derive(Default)]
struct LinkCounts {
    queued: AtomicUsize,
}

impl MuxLink {
    /// A link and the receiving end its response stream drains.
    pub fn new() -> (Arc<MuxLink>, MuxReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        let counts = Arc::new(LinkCounts::default());
        let link = Arc::new(MuxLink {
            tx,
            counts: counts.clone(),
            channels: AtomicUsize::new(0),
        });
        (link, MuxReceiver { rx, counts })
    }

    /// Sends a channel's last message (an attach that failed, from the gRPC edge). It bypasses
    /// the bound: a channel ends once.
    pub fn close_channel(&self, channel: u64, code: tonic::Code, message: String) {
        self.push(ChannelUplink {
            channel,
            uplink: None,
            closed: Some(ChannelClosed {
                code: code as i32,
                message,
            }),
        });
    }

    /// Channels open on this link.
    pub fn open_channels(&self) -> usize {
        self.channels.load(Ordering::Relaxed)
    }

    fn queued(&self) -> usize {
        self.counts.queued.load(Ordering::Relaxed)
    }

    /// The most messages the link may hold before one that needs `per_channel` slots per open
    /// channel is refused.
    fn limit(&self, per_channel: usize) -> usize {
        per_channel * self.open_channels().max(1)
    }

    fn push(&self, m: ChannelUplink) -> bool {
        self.counts.queued.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(m).is_err() {
            self.counts.queued.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// The response side of a [`MuxLink`]: takes what the loops queued, lowering the count.
pub struct MuxReceiver {
    rx: mpsc::UnboundedReceiver<ChannelUplink>,
    counts: Arc<LinkCounts>,
}

impl MuxReceiver {
    /// Moves up to `max` queued messages into `out`; `Ready(0)` once every sender is gone.
    pub fn poll_take(
        &mut self,
        cx: &mut std::task::Context<'_>,
        out: &mut Vec<ChannelUplink>,
        max: usize,
    ) -> std::task::Poll<usize> {
        let n = std::task::ready!(self.rx.poll_recv_many(cx, out, max));
        self.counts.queued.fetch_sub(n, Ordering::Relaxed);
        std::task::Poll::Ready(n)
    }
}

/// One session's channel on a `Multiplex` stream. Dropping it (the owner detached, the session
/// ended) sends the channel's `closed`.
pub struct ChannelTx {
    link: Arc<MuxLink>,
    channel: u64,
    attached: bool,
    reason: CloseReason,
}

impl ChannelTx {
    pub fn new(link: Arc<MuxLink>, channel: u64) -> Self {
        ChannelTx {
            link,
            channel,
            attached: false,
            reason: CloseReason::Released,
        }
    }

    fn offer(&self, msg: Uplink) -> Result<(), Refused> {
        let per_channel = if droppable(&msg) {
            UPLINK_AUDIO_SLOTS
        } else {
            UPLINK_QUEUE
        };
        if self.link.queued() >= self.link.limit(per_channel) {
            return Err(Refused::Full);
        }
        let m = ChannelUplink {
            channel: self.channel,
            uplink: Some(msg),
            closed: None,
        };
        if self.link.push(m) {
            Ok(())
        } else {
            Err(Refused::Closed)
        }
    }
}

impl Drop for ChannelTx {
    fn drop(&mut self) {
        if !self.attached {
            return;
        }
        self.link.channels.fetch_sub(1, Ordering::Relaxed);
        let (code, message) = self.reason.status();
        self.link
            .close_channel(self.channel, code, message.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxgate_proto::bridge::{OpusPacket, SessionEvent};

    fn frame() -> Uplink {
        Uplink {
            kind: Some(uplink::Kind::Opus(OpusPacket::default())),
        }
    }

    fn ev() -> Uplink {
        Uplink {
            kind: Some(uplink::Kind::Event(SessionEvent::default())),
        }
    }

    fn drain(rx: &mut MuxReceiver) -> Vec<ChannelUplink> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut out = Vec::new();
        while let std::task::Poll::Ready(n) = rx.poll_take(&mut cx, &mut out, 1024) {
            if n == 0 {
                break;
            }
        }
        out
    }

    fn channel(link: &Arc<MuxLink>, n: u64) -> OwnerUplink {
        let mut up = OwnerUplink::Channel(ChannelTx::new(link.clone(), n));
        up.mark_attached();
        up
    }

    #[test]
    fn channels_share_a_queue_bounded_per_open_channel_with_a_control_reserve() {
        let (link, mut rx) = MuxLink::new();
        let a = channel(&link, 1);
        let b = channel(&link, 2);
        // Two channels: 200 audio slots between them, whoever uses them.
        for _ in 0..200 {
            a.offer(frame()).unwrap();
        }
        assert_eq!(b.offer(frame()), Err(Refused::Full));
        assert!(!b.has_audio_room());
        // Events still get in, up to the reserve of both channels.
        for _ in 0..2 * UPLINK_CONTROL_RESERVE {
            b.offer(ev()).unwrap();
        }
        assert_eq!(b.offer(ev()), Err(Refused::Full));
        // The response takes everything: room again.
        assert_eq!(drain(&mut rx).len(), 200 + 2 * UPLINK_CONTROL_RESERVE);
        assert!(b.has_audio_room());
        b.offer(frame()).unwrap();
    }

    #[test]
    fn a_channel_ends_with_closed_saying_why_and_a_failed_attach_sends_nothing() {
        let (link, mut rx) = MuxLink::new();
        let a = channel(&link, 7);
        a.offer(ev()).unwrap();
        a.close(CloseReason::Stalled);
        let unattached = OwnerUplink::Channel(ChannelTx::new(link.clone(), 8));
        unattached.close(CloseReason::Ended);
        let got = drain(&mut rx);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].uplink.is_some() && got[0].closed.is_none());
        let closed = got[1].closed.as_ref().expect("closed last");
        assert_eq!(got[1].channel, 7);
        assert_eq!(closed.code, tonic::Code::ResourceExhausted as i32);
        assert_eq!(link.open_channels(), 0);
    }

    #[test]
    fn a_link_whose_response_is_gone_refuses_as_closed_and_counts_nothing() {
        let (link, rx) = MuxLink::new();
        let a = channel(&link, 1);
        drop(rx);
        assert!(a.is_closed());
        assert_eq!(a.offer(frame()), Err(Refused::Closed));
        assert_eq!(link.queued(), 0);
    }
}
