//! What a call hears from the transceiver, and who hears it.

use std::future::Future;

use tokio::sync::mpsc;
use tonic::Status;
use voxgate_proto::bridge::Uplink;

use crate::call_sender::CallSender;

/// One thing that happened to a call, in the order its stream delivered it.
#[derive(Debug)]
pub enum CallEvent {
    /// A message for the call: a session event (ATTACHED first, ENDED last), caller audio,
    /// caller data, playback progress, the answer to a clear.
    Uplink(Uplink),
    /// The transceiver closed the call: code OK once the session ended or was released, else
    /// the status a `Session` call fails with (an attach refused, a takeover, a stall). On a
    /// `Multiplex` stream this is the channel's `closed`; on a `Session` stream, a failed open.
    /// Nothing more comes.
    Closed(Status),
    /// The stream under the call ended (`None`: cleanly) or broke (`Some`: its status), taking
    /// the call with it. Nothing more comes.
    StreamGone(Option<Status>),
}

impl CallEvent {
    /// Whether nothing more comes after this event.
    pub fn is_last(&self) -> bool {
        !matches!(self, CallEvent::Uplink(_))
    }
}

/// Takes a call's events on the reader of its stream. On a `Multiplex` stream one reader
/// serves every channel: a handler that waits holds up the calls behind it, as a slow reader
/// of a `Session` stream holds up its own call (and the transceiver then drops that stream's
/// audio, see the proto's back-pressure rules). `call` is the call's own downlink.
pub trait CallHandler: Send + 'static {
    fn handle(&mut self, event: CallEvent, call: &CallSender) -> impl Future<Output = ()> + Send;
}

/// A queue as a handler: each event is handed to a task of the call's own, waiting for room.
impl CallHandler for mpsc::Sender<CallEvent> {
    async fn handle(&mut self, event: CallEvent, _call: &CallSender) {
        // A closed queue is a task that has let go of its call: nothing left to tell.
        let _ = self.send(event).await;
    }
}
