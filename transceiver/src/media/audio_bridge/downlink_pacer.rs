//! Downlink: backend messages → a queue of PCM (or Opus) → one Opus frame per 20 ms tick, plus
//! `clear` (barge-in) and playback progress reports to the owner.
//!
//! Backend messages are drained once per tick from the owner's bounded channel; PCM is queued,
//! cut into 20 ms frames and Opus-encoded one per tick into a reusable buffer; an empty queue
//! sends nothing. Ticks fall on the session's shared 20 ms grid (see `tick_grid`). What the
//! owner must hear (clear answers, progress) goes through the bridge's [`Outbox`], and so does
//! each frame sent, for the taps that asked for the downlink (a call recorder).

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use voxgate_proto::bridge::{
    downlink, uplink, AudioMode, Cleared, DataMessage, Downlink, PlaybackProgress, SentAudio,
    Uplink,
};

use super::codec::{BridgeError, EncoderChoice, EncoderSettings, StartedTalking};
use super::frame::{frame_samples, ms, scratch, FRAME, MAX_OPUS_PACKET, RTP_TICKS_PER_FRAME};
use super::opus_queue::{OpusQueue, MAX_QUEUED_DOWNLINK};
use super::outbox::Outbox;
use super::pending_clears::PendingClears;
use super::reply_onset::{is_loud, ReplyOnset, ReplyOnsetWatch};
use super::tick_grid::{CoarseTicks, TickGrid};
use super::wall_clock::WallClock;
use crate::metrics::BridgeCounters;

/// Something the session must do with its `Rtc` on behalf of the backend.
#[derive(Debug)]
pub enum BridgeAction {
    SendData(DataMessage),
    Hangup(String),
    /// The owner's stream ended without a hangup: the backend is gone.
    OwnerLost,
}

/// A backend message on a session's downlink queue, with when it entered the queue (the gRPC
/// edge stamps it): the turn timing's boundary between the backend and the transceiver
/// (`media::turn_timing`), which the pacer's 20 ms drain would otherwise blur.
#[derive(Debug)]
pub struct QueuedDownlink {
    pub queued_at: Instant,
    pub msg: Downlink,
}

impl From<Downlink> for QueuedDownlink {
    /// Stamped now: the message enters the queue.
    fn from(msg: Downlink) -> Self {
        QueuedDownlink {
            queued_at: Instant::now(),
            msg,
        }
    }
}

/// What the pacer takes from an owner when it attaches.
pub struct DownlinkOwner {
    pub downlink: mpsc::Receiver<QueuedDownlink>,
    pub clears: PendingClears,
    pub mode: AudioMode,
    pub rate: u32,
    /// Played samples between progress reports.
    pub progress_interval_samples: u64,
    /// The encoder the owner chose (PCM mode), built by [`DownlinkPacer::encoder_for`].
    pub encoder: Option<(opus::Encoder, EncoderSettings)>,
}

/// The attached owner's side of the pacer.
struct Owner {
    downlink: mpsc::Receiver<QueuedDownlink>,
    clears: PendingClears,
    passthrough: bool,
    progress_interval_samples: u64,
    /// The downlink encoder's settings (PCM mode), until its first frame is reported.
    unreported_encoder: Option<EncoderSettings>,
}

/// A run of queued samples from one backend item (`item_id`), for progress and `clear` reports.
struct QueuedItem {
    id: String,
    samples: u64,
}

pub struct DownlinkPacer {
    owner: Option<Owner>,
    /// PCM rate of the owner's audio (48 kHz until one attaches).
    rate: u32,
    encoder: Option<opus::Encoder>,
    /// The transceiver's encoder settings (`--opus-*`), which an owner's choice refines.
    encoder_settings: EncoderSettings,
    /// The packet a tick hands to str0m (every owner), allocated on first use.
    pub(super) encode_buf: Vec<u8>,
    /// One PCM frame at the owner's rate, the encoder's input (PCM owners).
    pub(super) frame_buf: Vec<i16>,
    down_pcm: VecDeque<i16>,
    down_opus: OpusQueue,
    items: VecDeque<QueuedItem>,
    current_item: Option<(String, u64)>,
    played_samples: u64,
    /// Samples of queued audio dropped ahead of a clear on its way (see `PendingClears`),
    /// reported by that clear.
    dropped_ahead_of_clear: u64,
    since_progress: u64,
    was_playing: bool,
    out_rtp_ts: u32,
    next_tick: Option<Instant>,
    /// The shared 20 ms grid this session's ticks fall on (see `tick_grid`).
    tick_grid: TickGrid,
    /// `downlink_frames`, `pcm_frames_encoded`, `downlink_cleared`, `downlink_oversize`,
    /// `downlink_wrong_mode`, `downlink_full_ticks`.
    counters: BridgeCounters,
    /// Set by the owner's first encoded frame, until the loop takes it.
    started_talking: Option<StartedTalking>,
    /// Stamps the frames downlink taps hear.
    clock: WallClock,
    /// The reply's onset after the caller pauses (for `media::turn_timing`).
    onset: ReplyOnsetWatch,
}

impl DownlinkPacer {
    pub fn new(session_id: &str, encoder_settings: EncoderSettings, clock: WallClock) -> Self {
        DownlinkPacer {
            owner: None,
            rate: 48_000,
            encoder: None,
            encoder_settings,
            encode_buf: Vec::new(),
            frame_buf: Vec::new(),
            down_pcm: VecDeque::new(),
            down_opus: OpusQueue::default(),
            items: VecDeque::new(),
            current_item: None,
            played_samples: 0,
            dropped_ahead_of_clear: 0,
            since_progress: 0,
            was_playing: false,
            out_rtp_ts: rand::random(),
            next_tick: None,
            tick_grid: TickGrid::for_session(session_id),
            counters: BridgeCounters::default(),
            started_talking: None,
            clock,
            onset: ReplyOnsetWatch::default(),
        }
    }

    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// The caller paused: look for the reply's onset from now (see `reply_onset`).
    pub fn watch_for_reply(&mut self, now: Instant) {
        self.onset.arm(now);
    }

    /// The caller speaks again: stop looking.
    pub fn stop_watching_for_reply(&mut self) {
        self.onset.disarm();
    }

    /// The reply's onset, once found.
    pub fn take_reply_onset(&mut self) -> Option<ReplyOnset> {
        self.onset.take()
    }

    pub fn next_tick(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Whether the owner's backend has just played its first PCM frame (once per owner).
    pub fn take_started_talking(&mut self) -> Option<StartedTalking> {
        self.started_talking.take()
    }

    /// The owner's downlink stream is gone (its backend died, or dropped it).
    pub fn owner_is_closed(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.downlink.is_closed())
    }

    /// Picks the grid the next owner's ticks fall on, from its audio mode, the size of the
    /// loop that holds this session and the loop's coarse-tick setting (see
    /// [`TickGrid::for_owner`]).
    pub fn choose_tick_grid(
        &mut self,
        session_id: &str,
        mode: AudioMode,
        loop_sessions: usize,
        coarse: CoarseTicks,
    ) {
        let cheap_ticks = mode == AudioMode::OpusPassthrough;
        self.tick_grid = TickGrid::for_owner(session_id, cheap_ticks, loop_sessions, coarse);
    }

    /// The encoder a PCM owner at `rate` gets with its `choice` applied to the transceiver's
    /// settings; none for a passthrough owner.
    pub fn encoder_for(
        &self,
        rate: u32,
        mode: AudioMode,
        choice: EncoderChoice,
    ) -> Result<Option<(opus::Encoder, EncoderSettings)>, BridgeError> {
        if mode != AudioMode::Pcm {
            return Ok(None);
        }
        let settings = self.encoder_settings.chosen(choice);
        Ok(Some((settings.encoder(rate)?, settings)))
    }

    /// Takes a new owner's downlink. It ticks from now on, even before media flows, so backend
    /// messages (and a backend that went away) are noticed within a frame; on the shared grid.
    pub fn attach(&mut self, owner: DownlinkOwner, now: Instant) {
        let unreported_encoder = owner.encoder.map(|(encoder, settings)| {
            self.encoder = Some(encoder);
            settings
        });
        self.rate = owner.rate;
        self.owner = Some(Owner {
            downlink: owner.downlink,
            clears: owner.clears,
            passthrough: owner.mode == AudioMode::OpusPassthrough,
            progress_interval_samples: owner.progress_interval_samples,
            unreported_encoder,
        });
        self.dropped_ahead_of_clear = 0;
        self.drop_queued();
        self.next_tick = Some(self.tick_grid.first_after(now));
    }

    /// The owner is gone: what it had queued for the caller goes with it.
    pub fn detach(&mut self) {
        self.owner = None;
        self.next_tick = None;
        self.drop_queued();
    }

    /// Media is flowing: an owner that attached before starts its clock now if it has none.
    pub fn on_connected(&mut self, now: Instant) {
        if self.owner.is_some() {
            self.next_tick
                .get_or_insert(self.tick_grid.first_after(now));
        }
    }

    /// The session ended: no more ticks.
    pub fn on_ended(&mut self) {
        self.owner = None;
        self.next_tick = None;
    }

    fn drop_queued(&mut self) {
        self.down_pcm.clear();
        self.down_opus.clear();
        self.items.clear();
    }

    /// Whether the queue holds its bound (30 s of audio).
    fn queue_full(&self) -> bool {
        self.down_pcm.len() as u64 >= MAX_QUEUED_DOWNLINK.as_secs() * u64::from(self.rate)
            || self.down_opus.is_full()
    }

    /// Drains backend messages; returns the next one the session must act on. On
    /// [`BridgeAction::OwnerLost`] the pacer has already let the owner go.
    pub fn poll_downlink(&mut self, out: &mut Outbox) -> Option<BridgeAction> {
        loop {
            let full = self.queue_full();
            let owner = self.owner.as_mut()?;
            let clearing = owner.clears.any();
            if !clearing && full {
                self.counters.downlink_full_ticks += 1;
                return None;
            }
            let passthrough = owner.passthrough;
            let QueuedDownlink { queued_at, msg } = match owner.downlink.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    self.detach();
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
                Some(downlink::Kind::Audio(chunk)) => {
                    self.queue_pcm(queued_at, &chunk.pcm, chunk.item_id)
                }
                Some(downlink::Kind::Opus(_)) if !passthrough => {
                    self.counters.downlink_wrong_mode += 1
                }
                Some(downlink::Kind::Opus(p)) if p.data.len() > MAX_OPUS_PACKET => {
                    self.counters.downlink_oversize += 1
                }
                Some(downlink::Kind::Opus(p)) => {
                    self.down_opus.push(&p.data);
                    let queued = self.down_opus.len() as u64 * self.passthrough_frame();
                    self.onset
                        .on_queued(queued_at, self.played_samples + queued);
                }
                Some(downlink::Kind::Clear(_)) => self.clear(out),
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

    /// A passthrough packet's share of `played_samples` (20 ms at the owner's rate).
    fn passthrough_frame(&self) -> u64 {
        960 * u64::from(self.rate) / 48_000
    }

    fn queue_pcm(&mut self, queued_at: Instant, pcm: &[u8], item_id: String) {
        let samples = (pcm.len() / 2) as u64;
        if samples == 0 {
            return;
        }
        self.down_pcm.extend(
            pcm.chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
        let end = self.played_samples + self.down_pcm.len() as u64;
        self.onset.on_queued(queued_at, end);
        match self.items.back_mut() {
            Some(last) if last.id == item_id => last.samples += samples,
            _ => self.items.push_back(QueuedItem {
                id: item_id,
                samples,
            }),
        }
    }

    fn clear(&mut self, out: &mut Outbox) {
        let dropped = self.down_pcm.len() as u64
            + self.down_opus.len() as u64 * 960
            + std::mem::take(&mut self.dropped_ahead_of_clear);
        self.drop_queued();
        self.onset.on_cleared();
        self.counters.downlink_cleared += 1;
        let (item_id, item_played) = self.current_item.clone().unwrap_or_default();
        let msg = Uplink {
            kind: Some(uplink::Kind::Cleared(Cleared {
                played_ms: ms(self.played_samples, self.rate),
                dropped_ms: ms(dropped, self.rate),
                item_id,
                item_played_ms: ms(item_played, self.rate),
            })),
        };
        out.send_owner_and_downlink_taps(msg);
    }

    /// The 20 ms downlink tick: returns the next Opus packet to send as RTP (with its RTP
    /// timestamp), or `None` when nothing is queued or the caller is not `connected` yet.
    /// Call at `next_tick()`.
    pub fn tick(
        &mut self,
        now: Instant,
        connected: bool,
        out: &mut Outbox,
    ) -> Option<(&[u8], u32)> {
        let due = self.next_tick?;
        // Fixed cadence, no drift; after a long stall, restart on the grid instead of bursting.
        let mut next = due + FRAME;
        if now > next + 3 * FRAME {
            next = self.tick_grid.first_after(now);
        }
        self.next_tick = Some(next);
        let ts = self.out_rtp_ts;
        self.out_rtp_ts = self.out_rtp_ts.wrapping_add(RTP_TICKS_PER_FRAME);
        let passthrough = self.owner.as_ref()?.passthrough;
        if !connected {
            return None;
        }
        let start = self.played_samples;
        let len = if passthrough {
            let n = self
                .down_opus
                .pop_into(scratch(&mut self.encode_buf, MAX_OPUS_PACKET))?;
            self.account_played(self.passthrough_frame(), out);
            n
        } else {
            self.encode_frame(out)?
        };
        self.counters.downlink_frames += 1;
        if self.onset.armed() {
            // Passthrough audio is not decoded: every packet counts as loud.
            let loud = passthrough || is_loud(&self.frame_buf[..frame_samples(self.rate)]);
            self.onset.on_sent(now, start, ts, loud);
        }
        if out.has_downlink_taps() {
            self.tell_downlink_taps(now, ts, len, passthrough, out);
        }
        Some((&self.encode_buf[..len], ts))
    }

    /// The frame just sent, for the downlink taps: the PCM that was encoded, or a passthrough
    /// owner's packet as it went out. Built only while such a tap listens.
    fn tell_downlink_taps(
        &self,
        now: Instant,
        ts: u32,
        len: usize,
        passthrough: bool,
        out: &mut Outbox,
    ) {
        let (rate, pcm, opus) = if passthrough {
            let packet = Bytes::copy_from_slice(&self.encode_buf[..len]);
            (48_000, Bytes::new(), packet)
        } else {
            let frame = &self.frame_buf[..frame_samples(self.rate)];
            let mut pcm = BytesMut::with_capacity(frame.len() * 2);
            for s in frame {
                pcm.put_i16_le(*s);
            }
            (self.rate, pcm.freeze(), Bytes::new())
        };
        let item_id = self.current_item.as_ref().map(|(id, _)| id.clone());
        out.send_downlink_taps(Uplink {
            kind: Some(uplink::Kind::Sent(SentAudio {
                sent_unix_micros: self.clock.unix_micros(now),
                rtp_timestamp: ts,
                sample_rate_hz: rate,
                pcm,
                opus,
                item_id: item_id.unwrap_or_default(),
            })),
        });
    }

    /// Encodes the next 20 ms of queued PCM (a short tail padded with silence rather than held
    /// back) into `encode_buf`; returns its length, or `None` when nothing is queued.
    fn encode_frame(&mut self, out: &mut Outbox) -> Option<usize> {
        let frame = frame_samples(self.rate);
        if self.down_pcm.is_empty() {
            self.finish_playing(out);
            return None;
        }
        let take = self.down_pcm.len().min(frame);
        let pcm = scratch(&mut self.frame_buf, frame);
        for (dst, src) in pcm.iter_mut().zip(self.down_pcm.drain(..take)) {
            *dst = src;
        }
        pcm[take..].fill(0);
        self.account_played(take as u64, out);
        let encoder = self.encoder.as_mut()?;
        let packet = scratch(&mut self.encode_buf, MAX_OPUS_PACKET);
        let n = encoder.encode(&self.frame_buf[..frame], packet).ok()?;
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
        Some(n)
    }

    fn account_played(&mut self, samples: u64, out: &mut Outbox) {
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
            self.send_progress(out);
        }
    }

    fn finish_playing(&mut self, out: &mut Outbox) {
        if self.was_playing {
            self.was_playing = false;
            self.send_progress(out);
        }
    }

    pub(super) fn send_progress(&mut self, out: &mut Outbox) {
        self.since_progress = 0;
        let queued = self.down_pcm.len() as u64 + self.down_opus.len() as u64 * 960;
        let (item_id, item_played) = self.current_item.clone().unwrap_or_default();
        let msg = Uplink {
            kind: Some(uplink::Kind::Progress(PlaybackProgress {
                played_ms: ms(self.played_samples, self.rate),
                queued_ms: ms(queued, self.rate),
                item_id,
                item_played_ms: ms(item_played, self.rate),
            })),
        };
        out.send_owner(msg);
    }
}
