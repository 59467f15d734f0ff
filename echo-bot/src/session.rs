//! One call of the echo bot, from attach to ENDED: caller audio into [`Utterances`], its
//! actions out as reply audio and barge-in clears, text messages echoed back. Every decision is
//! the state machine's; this module moves messages and time. The call itself (its attach, its
//! channel on the worker's `Multiplex` stream, its decline if the attach fails) is the backend
//! kit's.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::time::{sleep_until, Instant};
use tonic::Code;
use tracing::{debug, info, warn};
use voxgate_backend_kit::{Call, CallEvent, CallSender, SendError};
use voxgate_echo_bot::{Action, Utterances, VadConfig};
use voxgate_proto::bridge::{
    data_message, downlink, session_event, uplink, AudioChunk, Clear, DataMessage, Uplink,
};

/// Reply audio is sent in chunks of this length (the transceiver paces it, so all at once).
const CHUNK: Duration = Duration::from_millis(100);

/// Serves `call` until it ends, its stream goes, or the worker lets go of it.
pub async fn serve(mut call: Call, vad: VadConfig) {
    if call.attached().await.is_err() {
        return; // logged, and declined when that helps, by the kit
    }
    let mut out = Downstream::new(vad.sample_rate_hz);
    let mut machine = Utterances::new(vad);
    loop {
        let deadline = machine.poll_timeout();
        let event = tokio::select! {
            _ = call.released() => {
                // Let go without a hangup (dropping the call releases it): the transceiver
                // hands the caller to another worker.
                info!("shutting down: releasing session");
                return;
            }
            _ = sleep_until_opt(deadline) => {
                if let Some(action) = machine.handle_timeout(std::time::Instant::now()) {
                    out.perform(call.sender(), action).await;
                }
                continue;
            }
            event = call.next_event() => event,
        };
        let up = match event {
            Some(CallEvent::Uplink(Uplink { kind: Some(kind) })) => kind,
            Some(CallEvent::Uplink(Uplink { kind: None })) => continue,
            Some(CallEvent::Closed(status)) if status.code() == Code::Ok => {
                info!("session channel closed");
                return;
            }
            Some(CallEvent::Closed(status)) => {
                warn!(code = ?status.code(), message = status.message(), "session channel closed");
                return;
            }
            Some(CallEvent::StreamGone(_)) | None => {
                warn!("multiplex stream broke");
                return;
            }
        };
        match up {
            uplink::Kind::Event(event) => match event.kind() {
                session_event::Kind::Ended => {
                    info!(reason = %event.reason, utterances = out.utterances, "session ended");
                    return;
                }
                other => debug!(event = other.as_str_name(), "session event"),
            },
            uplink::Kind::Audio(frame) => {
                let pcm = out.decode(&frame.pcm);
                if let Some(action) = machine.handle_frame(std::time::Instant::now(), pcm) {
                    out.perform(call.sender(), action).await;
                }
            }
            uplink::Kind::Data(DataMessage {
                label,
                payload: Some(data_message::Payload::Text(text)),
            }) => {
                let echo = json!({ "type": "echo", "text": text }).to_string();
                let payload = Some(data_message::Payload::Text(echo));
                let sent = call
                    .sender()
                    .send(downlink::Kind::Data(DataMessage { label, payload }))
                    .await;
                if let Err(SendError::TooLarge(e)) = sent {
                    // This call's echo only: the stream and its other calls never see it.
                    warn!(error = %e, refused = call.sender().refused(), "echo not sent");
                }
            }
            uplink::Kind::Progress(p) => {
                machine.handle_progress(std::time::Instant::now(), p.queued_ms);
            }
            uplink::Kind::Quality(q) => debug!(
                rtt_ms = ?q.rtt_ms,
                uplink_mos = ?q.uplink.as_ref().and_then(|d| d.mos),
                downlink_mos = ?q.downlink.as_ref().and_then(|d| d.mos),
                "network quality"
            ),
            uplink::Kind::Cleared(c) => info!(
                item_id = %c.item_id,
                item_played_ms = c.item_played_ms,
                dropped_ms = c.dropped_ms,
                "barge-in: reply cut"
            ),
            uplink::Kind::Turn(t) => info!(
                turn = t.turn,
                total_ms = t.total_ms,
                backend_ms = t.backend_ms,
                "turn heard by the caller"
            ),
            // `Sent` reaches downlink taps only, never an owner.
            uplink::Kind::Data(_) | uplink::Kind::Opus(_) | uplink::Kind::Sent(_) => {}
        }
    }
}

/// The call's downlink: turns actions into messages, and counts replies.
struct Downstream {
    sample_rate_hz: u32,
    chunk_samples: usize,
    utterances: u64,
    /// Scratch buffer for decoding uplink frames.
    frame: Vec<i16>,
}

impl Downstream {
    fn new(sample_rate_hz: u32) -> Self {
        let chunk_samples = (u128::from(sample_rate_hz) * CHUNK.as_millis() / 1000) as usize;
        Downstream {
            sample_rate_hz,
            chunk_samples: chunk_samples.max(1),
            utterances: 0,
            frame: Vec::with_capacity(sample_rate_hz as usize / 50),
        }
    }

    /// PCM16 little-endian bytes into samples (a stray odd byte is ignored).
    fn decode(&mut self, bytes: &[u8]) -> &[i16] {
        self.frame.clear();
        let samples = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]));
        self.frame.extend(samples);
        &self.frame
    }

    /// Sends what `action` asks for. A gone stream shows up as the call's next event.
    async fn perform(&mut self, call: &CallSender, action: Action) {
        match action {
            Action::PlayUtterance(pcm) => {
                self.utterances += 1;
                let item_id = format!("utt-{}", self.utterances);
                for chunk in pcm.chunks(self.chunk_samples) {
                    let bytes: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
                    let pcm = Bytes::from(bytes);
                    let item_id = item_id.clone();
                    let _ = call
                        .send(downlink::Kind::Audio(AudioChunk { pcm, item_id }))
                        .await;
                }
                let ms = pcm.len() as u64 * 1000 / u64::from(self.sample_rate_hz.max(1));
                info!(item_id, ms, "utterance played");
            }
            Action::Clear => {
                let _ = call.send(downlink::Kind::Clear(Clear {})).await;
                info!("barge-in: clear sent");
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(d) => sleep_until(Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}
