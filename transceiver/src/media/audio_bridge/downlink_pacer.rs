//! Downlink: backend messages → a queue of PCM (or Opus) → one Opus frame per 20 ms tick, plus
//! `clear` (barge-in) and playback progress reports to the owner.
//!
//! Backend messages are drained once per tick from a bounded channel; PCM is queued, cut into
//! 20 ms frames and Opus-encoded one per tick into the bridge's reusable buffer; an empty queue
//! sends nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::TryRecvError;
use voxgate_proto::bridge::{downlink, uplink, AudioMode, Cleared, PlaybackProgress, Uplink};

use super::{
    AudioBridge, BridgeAction, QueuedItem, StartedTalking, FRAME, MAX_OPUS_PACKET,
    RTP_TICKS_PER_FRAME,
};

/// Downlink audio the loop holds, PCM or Opus; beyond it, backend messages wait in the channel
/// (and gRPC flow control pushes back on the backend).
const MAX_QUEUED_DOWNLINK: Duration = Duration::from_secs(30);
/// Passthrough Opus packets (20 ms each) in [`MAX_QUEUED_DOWNLINK`].
pub(super) const MAX_QUEUED_OPUS_FRAMES: usize =
    (MAX_QUEUED_DOWNLINK.as_millis() / FRAME.as_millis()) as usize;

/// Passthrough downlink: Opus packets copied back to back into one byte queue, so the queue
/// holds at most 30 s × 1500 bytes whatever buffers the backend's messages arrived in (a
/// `Bytes` kept from a message would pin the message's whole receive buffer).
#[derive(Default)]
pub(super) struct OpusQueue {
    bytes: VecDeque<u8>,
    lens: VecDeque<u16>,
}

impl OpusQueue {
    pub(super) fn len(&self) -> usize {
        self.lens.len()
    }

    pub(super) fn is_full(&self) -> bool {
        self.lens.len() >= MAX_QUEUED_OPUS_FRAMES
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.lens.clear();
    }

    /// Queues one packet of at most [`MAX_OPUS_PACKET`] bytes (the caller checked).
    fn push(&mut self, packet: &[u8]) {
        self.bytes.extend(packet);
        self.lens.push_back(packet.len() as u16);
    }

    /// Moves the oldest packet into `out`; returns its length.
    fn pop_into(&mut self, out: &mut [u8]) -> Option<usize> {
        let n = usize::from(self.lens.pop_front()?);
        for (dst, src) in out.iter_mut().zip(self.bytes.drain(..n)) {
            *dst = src;
        }
        Some(n)
    }
}

/// Clears a backend has sent that its session has not taken yet. The gRPC edge counts one up
/// before it queues a clear and the bridge counts it down when it takes it. While one is on its
/// way the bridge takes queued audio even past its 30 s, only to drop it (a clear drops all the
/// audio before it), so a barge-in is never held up behind a full queue.
#[derive(Debug, Clone, Default)]
pub struct PendingClears(Arc<AtomicUsize>);

impl PendingClears {
    /// A clear is about to be queued.
    pub fn announce(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// An announced clear could not be queued after all.
    pub fn withdraw(&self) {
        self.taken();
    }

    pub(super) fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }

    fn taken(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

impl AudioBridge {
    pub fn next_tick(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Drains backend messages; returns the next one the session must act on.
    pub fn poll_downlink(&mut self) -> Option<BridgeAction> {
        loop {
            let owner = self.owner.as_mut()?;
            let clearing = owner.clears.any();
            if !clearing
                && (self.down_pcm.len() as u64
                    >= MAX_QUEUED_DOWNLINK.as_secs() * u64::from(self.rate)
                    || self.down_opus.is_full())
            {
                self.counters.downlink_full_ticks += 1;
                return None;
            }
            let passthrough = owner.mode == AudioMode::OpusPassthrough;
            let msg = match owner.downlink.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    self.detach_owner(super::CloseReason::Released);
                    return Some(BridgeAction::OwnerLost);
                }
            };
            if clearing {
                // Audio ahead of a clear on its way: the clear would drop it.
                match &msg.kind {
                    Some(downlink::Kind::Audio(a)) if !passthrough => {
                        self.dropped_ahead_of_clear += (a.pcm.len() / 2) as u64;
                        continue;
                    }
                    Some(downlink::Kind::Opus(_)) if passthrough => {
                        self.dropped_ahead_of_clear += 960 * u64::from(self.rate) / 48_000;
                        continue;
                    }
                    Some(downlink::Kind::Clear(_)) => owner.clears.taken(),
                    _ => {}
                }
            }
            match msg.kind {
                Some(downlink::Kind::Audio(_)) if passthrough => {
                    self.counters.downlink_wrong_mode += 1
                }
                Some(downlink::Kind::Audio(chunk)) => self.queue_pcm(&chunk.pcm, chunk.item_id),
                Some(downlink::Kind::Opus(_)) if !passthrough => {
                    self.counters.downlink_wrong_mode += 1
                }
                Some(downlink::Kind::Opus(p)) if p.data.len() > MAX_OPUS_PACKET => {
                    self.counters.downlink_oversize += 1
                }
                Some(downlink::Kind::Opus(p)) => self.down_opus.push(&p.data),
                Some(downlink::Kind::Clear(_)) => self.clear(),
                Some(downlink::Kind::Data(d)) => return Some(BridgeAction::SendData(d)),
                Some(downlink::Kind::Hangup(h)) => {
                    let reason = if h.reason.is_empty() {
                        "backend_hangup".to_string()
                    } else {
                        h.reason
                    };
                    return Some(BridgeAction::Hangup(reason));
                }
                Some(downlink::Kind::Attach(_)) | None => {} // repeated attach: ignored
            }
        }
    }

    fn queue_pcm(&mut self, pcm: &[u8], item_id: String) {
        let samples = (pcm.len() / 2) as u64;
        if samples == 0 {
            return;
        }
        self.down_pcm.extend(
            pcm.chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
        match self.items.back_mut() {
            Some(last) if last.id == item_id => last.samples += samples,
            _ => self.items.push_back(QueuedItem {
                id: item_id,
                samples,
            }),
        }
    }

    fn clear(&mut self) {
        let dropped = self.down_pcm.len() as u64
            + self.down_opus.len() as u64 * 960
            + std::mem::take(&mut self.dropped_ahead_of_clear);
        self.down_pcm.clear();
        self.down_opus.clear();
        self.items.clear();
        self.counters.downlink_cleared += 1;
        let (item_id, item_played) = self.current_item.clone().unwrap_or_default();
        let msg = Uplink {
            kind: Some(uplink::Kind::Cleared(Cleared {
                played_ms: self.ms(self.played_samples),
                dropped_ms: self.ms(dropped),
                item_id,
                item_played_ms: self.ms(item_played),
            })),
        };
        self.send_owner(msg);
    }

    /// The 20 ms downlink tick: returns the next Opus packet to send as RTP (with its RTP
    /// timestamp), or `None` when nothing is queued. Call at `next_tick()`.
    pub fn tick(&mut self, now: Instant) -> Option<(&[u8], u32)> {
        let due = self.next_tick?;
        // Fixed cadence, no drift; after a long stall, restart on the grid instead of bursting.
        let mut next = due + FRAME;
        if now > next + 3 * FRAME {
            next = self.tick_grid.first_after(now);
        }
        self.next_tick = Some(next);
        let ts = self.out_rtp_ts;
        self.out_rtp_ts = self.out_rtp_ts.wrapping_add(RTP_TICKS_PER_FRAME);
        let owner = self.owner.as_ref()?;
        if !self.connected {
            return None;
        }
        let len = if owner.mode == AudioMode::OpusPassthrough {
            let n = self
                .down_opus
                .pop_into(Self::scratch(&mut self.encode_buf, MAX_OPUS_PACKET))?;
            self.account_played(960 * u64::from(self.rate) / 48_000);
            n
        } else {
            let frame = self.frame_samples();
            if self.down_pcm.is_empty() {
                self.finish_playing();
                return None;
            }
            // A short tail is padded with silence rather than held back.
            let take = self.down_pcm.len().min(frame);
            let pcm = Self::scratch(&mut self.frame_buf, frame);
            for (dst, src) in pcm.iter_mut().zip(self.down_pcm.drain(..take)) {
                *dst = src;
            }
            pcm[take..].fill(0);
            self.account_played(take as u64);
            let encoder = self.encoder.as_mut()?;
            let out = Self::scratch(&mut self.encode_buf, MAX_OPUS_PACKET);
            let n = match encoder.encode(&self.frame_buf[..frame], out) {
                Ok(n) => n,
                Err(_) => return None,
            };
            self.counters.pcm_frames_encoded += 1;
            if let Some(encoder) = self
                .owner
                .as_mut()
                .and_then(|o| o.unreported_encoder.take())
            {
                self.started_talking = Some(StartedTalking {
                    rate: self.rate,
                    encoder,
                });
            }
            n
        };
        self.counters.downlink_frames += 1;
        Some((&self.encode_buf[..len], ts))
    }

    fn account_played(&mut self, samples: u64) {
        self.played_samples += samples;
        self.since_progress += samples;
        self.was_playing = true;
        let mut left = samples;
        while left > 0 {
            let Some(front) = self.items.front_mut() else {
                break;
            };
            let n = left.min(front.samples);
            front.samples -= n;
            left -= n;
            match &mut self.current_item {
                Some((id, played)) if *id == front.id => *played += n,
                _ => self.current_item = Some((front.id.clone(), n)),
            }
            if front.samples == 0 {
                self.items.pop_front();
            }
        }
        let interval = self
            .owner
            .as_ref()
            .map_or(u64::MAX, |o| o.progress_interval_samples);
        if self.since_progress >= interval {
            self.send_progress();
        }
    }

    fn finish_playing(&mut self) {
        if self.was_playing {
            self.was_playing = false;
            self.send_progress();
        }
    }

    pub(super) fn send_progress(&mut self) {
        self.since_progress = 0;
        let queued = self.down_pcm.len() as u64 + self.down_opus.len() as u64 * 960;
        let (item_id, item_played) = self.current_item.clone().unwrap_or_default();
        let msg = Uplink {
            kind: Some(uplink::Kind::Progress(PlaybackProgress {
                played_ms: self.ms(self.played_samples),
                queued_ms: self.ms(queued),
                item_id,
                item_played_ms: self.ms(item_played),
            })),
        };
        self.send_owner(msg);
    }
}
