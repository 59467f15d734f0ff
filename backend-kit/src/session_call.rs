//! A call on a `Session` stream of its own: the attach first, then the call's downlink as the
//! request stream (ended by a release), and a reader task handing each uplink message to the
//! call's handler until the stream ends.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use voxgate_proto::bridge::{downlink, Attach, Downlink};

use crate::bridge::Bridge;
use crate::call_event::{CallEvent, CallHandler};
use crate::call_sender::{CallSender, SessionOut};

/// Opens a `Session` stream on `bridge` that attaches with `attach`, and returns the call's
/// downlink at once (`queue`: messages it may have waiting for the stream). What comes back
/// reaches `handler`: the uplink, then `StreamGone` when the stream ends or breaks; an attach
/// the transceiver refuses arrives as `Closed` with its status. Must be called in a runtime.
pub fn attach_session<H: CallHandler>(
    bridge: &Bridge,
    attach: Attach,
    handler: H,
    queue: usize,
) -> CallSender {
    let (tx, rx) = mpsc::channel(queue.max(1));
    let first = Downlink {
        kind: Some(downlink::Kind::Attach(attach)),
    };
    // The queue is new and has room: the attach is its first message.
    let _ = tx.try_send(SessionOut::Message(first));
    let sender = CallSender::session(tx, bridge.refusals());
    tokio::spawn(run(bridge.clone(), rx, handler, sender.clone()));
    sender
}

async fn run<H: CallHandler>(
    bridge: Bridge,
    rx: mpsc::Receiver<SessionOut>,
    mut handler: H,
    sender: CallSender,
) {
    let outbound = ReceiverStream::new(rx).map_while(|out| match out {
        SessionOut::Message(m) => Some(m),
        SessionOut::Release => None,
    });
    let mut uplink = match bridge.client().session(bridge.request(outbound)).await {
        Ok(response) => response.into_inner(),
        Err(status) => return handler.handle(CallEvent::Closed(status), &sender).await,
    };
    let end = loop {
        match uplink.message().await {
            Ok(Some(m)) => handler.handle(CallEvent::Uplink(m), &sender).await,
            Ok(None) => break None,
            Err(status) => break Some(status),
        }
    };
    handler.handle(CallEvent::StreamGone(end), &sender).await;
}
