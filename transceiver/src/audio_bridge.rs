//! A session's audio bridge: caller Opus → PCM frames for backends, backend PCM → paced Opus.
//!
//! Sans-IO and owned by the session on its media loop. Uplink: every received Opus packet is
//! decoded (at the owner's sample rate, so no resampler is needed: libopus decodes at 16, 24 or
//! 48 kHz natively); sequence gaps are filled with frames recovered from in-band FEC or
//! synthesized by packet-loss concealment, flagged `concealed`; frames go to the owner and taps
//! with `try_send`, so a slow backend costs dropped frames (counted), never a blocked loop.
//! Downlink: backend messages are drained once per 20 ms tick from a bounded channel; PCM is
//! queued, cut into 20 ms frames and Opus-encoded one per tick; an empty queue sends nothing.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::mpsc::{self, error::TryRecvError, error::TrySendError};
use voxgate_proto::bridge::{
    data_message, downlink, session_event, uplink, AudioFrame, AudioMode, Cleared, DataMessage,
    Downlink, OpusPacket, PlaybackProgress, SessionEvent, Uplink,
};

/// One Opus frame: 20 ms.
pub const FRAME: Duration = Duration::from_millis(20);
/// RTP clock ticks per frame (48 kHz clock for Opus).
pub const RTP_TICKS_PER_FRAME: u32 = 960;
/// Longest run of lost packets filled with concealment; a longer gap is a discontinuity.
const MAX_CONCEALED_RUN: u64 = 5;
/// Downlink audio the loop holds; beyond it, backend messages wait in the channel (and gRPC
/// flow control pushes back on the backend).
const MAX_QUEUED_DOWNLINK: Duration = Duration::from_secs(30);
const MAX_OPUS_PACKET: usize = 1500;

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("unsupported sample rate {0} (use 16000, 24000 or 48000)")]
    SampleRate(u32),
    #[error("opus: {0}")]
    Opus(#[from] opus::Error),
}

pub fn valid_sample_rate(rate: u32) -> Result<u32, BridgeError> {
    match rate {
        0 => Ok(48_000),
        16_000 | 24_000 | 48_000 => Ok(rate),
        r => Err(BridgeError::SampleRate(r)),
    }
}

/// Downlink encoder settings (`--opus-bitrate`, `--opus-complexity`).
#[derive(Debug, Clone, Copy)]
pub struct EncoderSettings {
    pub bitrate: i32,
    pub complexity: i32,
}

/// The channels that connect a session to its owning backend stream.
pub struct OwnerEndpoints {
    pub uplink: mpsc::Sender<Uplink>,
    pub downlink: mpsc::Receiver<Downlink>,
    pub sample_rate: u32,
    pub mode: AudioMode,
    pub progress_interval: Duration,
}

struct Owner {
    uplink: mpsc::Sender<Uplink>,
    downlink: mpsc::Receiver<Downlink>,
    mode: AudioMode,
    progress_interval_samples: u64,
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub struct BridgeCounters {
    pub uplink_frames: u64,
    pub uplink_concealed: u64,
    pub uplink_dropped: u64,
    pub downlink_frames: u64,
    pub downlink_cleared: u64,
    pub tap_dropped: u64,
}

impl BridgeCounters {
    /// `self - earlier`, field by field (counters only grow).
    pub fn since(&self, earlier: &BridgeCounters) -> BridgeCounters {
        BridgeCounters {
            uplink_frames: self.uplink_frames - earlier.uplink_frames,
            uplink_concealed: self.uplink_concealed - earlier.uplink_concealed,
            uplink_dropped: self.uplink_dropped - earlier.uplink_dropped,
            downlink_frames: self.downlink_frames - earlier.downlink_frames,
            downlink_cleared: self.downlink_cleared - earlier.downlink_cleared,
            tap_dropped: self.tap_dropped - earlier.tap_dropped,
        }
    }

    pub fn add(&mut self, d: &BridgeCounters) {
        self.uplink_frames += d.uplink_frames;
        self.uplink_concealed += d.uplink_concealed;
        self.uplink_dropped += d.uplink_dropped;
        self.downlink_frames += d.downlink_frames;
        self.downlink_cleared += d.downlink_cleared;
        self.tap_dropped += d.tap_dropped;
    }
}

/// Upper bounds (µs) of the hand-off latency buckets: socket arrival → frame in the backend
/// streams' queues. The last bucket is +Inf.
pub const HANDOFF_BUCKETS_US: [u64; 10] =
    [25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000];

/// A histogram counted in plain integers on the loop, published in bulk (no atomics per frame).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandoffHistogram {
    pub buckets: [u64; HANDOFF_BUCKETS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl HandoffHistogram {
    pub fn observe(&mut self, us: u64) {
        let i = HANDOFF_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(HANDOFF_BUCKETS_US.len());
        self.buckets[i] += 1;
        self.sum_us += us;
        self.count += 1;
    }

    pub fn add(&mut self, other: &HandoffHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.sum_us += other.sum_us;
        self.count += other.count;
    }
}

/// Something the session must do with its `Rtc` on behalf of the backend.
#[derive(Debug)]
pub enum BridgeAction {
    SendData(DataMessage),
    Hangup(String),
    /// The owner's stream ended without a hangup: the backend is gone.
    OwnerLost,
}

struct QueuedItem {
    id: String,
    samples: u64,
}

pub struct AudioBridge {
    owner: Option<Owner>,
    taps: Vec<mpsc::Sender<Uplink>>,
    session_id: String,
    /// Uplink PCM rate (the owner's; 48 kHz until one attaches).
    rate: u32,
    decoder: Option<opus::Decoder>,
    encoder: Option<opus::Encoder>,
    encoder_settings: EncoderSettings,
    decode_buf: Vec<i16>,
    encode_buf: Vec<u8>,
    frame_buf: Vec<i16>,
    last_rtp_seq: Option<u64>,
    frame_seq: u64,
    down_pcm: VecDeque<i16>,
    down_opus: VecDeque<Bytes>,
    items: VecDeque<QueuedItem>,
    current_item: Option<(String, u64)>,
    played_samples: u64,
    since_progress: u64,
    was_playing: bool,
    out_rtp_ts: u32,
    next_tick: Option<Instant>,
    connected: bool,
    counters: BridgeCounters,
    /// Hand-off latencies since the loop last took them.
    handoff: HandoffHistogram,
    clock: WallClock,
}

impl AudioBridge {
    pub fn new(session_id: String, encoder_settings: EncoderSettings) -> Self {
        AudioBridge {
            owner: None,
            taps: Vec::new(),
            session_id,
            rate: 48_000,
            decoder: None,
            encoder: None,
            encoder_settings,
            decode_buf: vec![0; 5760],
            encode_buf: vec![0; MAX_OPUS_PACKET],
            frame_buf: vec![0; 960],
            last_rtp_seq: None,
            frame_seq: 0,
            down_pcm: VecDeque::new(),
            down_opus: VecDeque::new(),
            items: VecDeque::new(),
            current_item: None,
            played_samples: 0,
            since_progress: 0,
            was_playing: false,
            out_rtp_ts: rand::random(),
            next_tick: None,
            connected: false,
            counters: BridgeCounters::default(),
            handoff: HandoffHistogram::default(),
            clock: WallClock::new(),
        }
    }

    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// The hand-off latencies observed since the last call.
    pub fn take_handoff(&mut self) -> HandoffHistogram {
        std::mem::take(&mut self.handoff)
    }

    pub fn has_owner(&self) -> bool {
        self.owner.is_some()
    }

    /// Drops an owner whose streams are closed (its backend died but no tick noticed yet), so
    /// a new owner can attach at once. Returns whether a live owner remains.
    pub fn has_live_owner(&mut self) -> bool {
        let dead = self
            .owner
            .as_ref()
            .is_some_and(|o| o.uplink.is_closed() || o.downlink.is_closed());
        if dead {
            self.detach_owner();
        }
        self.owner.is_some()
    }

    pub fn tap_count(&self) -> usize {
        self.taps.len()
    }

    fn frame_samples(&self) -> usize {
        (self.rate / 50) as usize
    }

    fn ms(&self, samples: u64) -> u64 {
        samples * 1000 / u64::from(self.rate)
    }

    /// Makes `endpoints` the session's owner. The caller checked there was none.
    pub fn attach_owner(
        &mut self,
        endpoints: OwnerEndpoints,
        now: Instant,
        metadata: &std::collections::HashMap<String, String>,
    ) -> Result<(), BridgeError> {
        let rate = valid_sample_rate(endpoints.sample_rate)?;
        if endpoints.mode == AudioMode::Pcm {
            // (Re)build codecs at the owner's rate; a new owner may ask for another rate.
            if self.decoder.is_none() || rate != self.rate {
                self.decoder = Some(opus::Decoder::new(rate, opus::Channels::Mono)?);
            }
            let mut enc = opus::Encoder::new(rate, opus::Channels::Mono, opus::Application::Voip)?;
            enc.set_bitrate(opus::Bitrate::Bits(self.encoder_settings.bitrate))?;
            enc.set_complexity(self.encoder_settings.complexity)?;
            enc.set_inband_fec(true)?;
            self.encoder = Some(enc);
        }
        self.rate = rate;
        self.frame_buf.resize(self.frame_samples(), 0);
        let interval_samples =
            (endpoints.progress_interval.as_millis() as u64).max(20) * u64::from(rate) / 1000;
        let owner = Owner {
            uplink: endpoints.uplink,
            downlink: endpoints.downlink,
            mode: endpoints.mode,
            progress_interval_samples: interval_samples,
        };
        self.down_pcm.clear();
        self.down_opus.clear();
        self.items.clear();
        self.owner = Some(owner);
        self.send_owner(event(
            session_event::Kind::Attached,
            "",
            &self.session_id,
            metadata,
        ));
        if self.connected {
            self.send_owner(event(
                session_event::Kind::Connected,
                "",
                &self.session_id,
                &Default::default(),
            ));
        }
        // Tick from now on, even before media flows, so backend messages (and a backend that
        // went away) are noticed within a frame.
        self.next_tick = Some(now + FRAME);
        Ok(())
    }

    pub fn add_tap(&mut self, tap: mpsc::Sender<Uplink>) -> Result<(), BridgeError> {
        if self.decoder.is_none() {
            self.decoder = Some(opus::Decoder::new(self.rate, opus::Channels::Mono)?);
        }
        self.taps.push(tap);
        Ok(())
    }

    pub fn detach_owner(&mut self) {
        self.owner = None;
        self.next_tick = None;
        self.down_pcm.clear();
        self.down_opus.clear();
        self.items.clear();
    }

    /// Media is flowing: tell subscribers and start the downlink clock.
    pub fn on_connected(&mut self, now: Instant) {
        self.connected = true;
        let ev = event(
            session_event::Kind::Connected,
            "",
            &self.session_id,
            &Default::default(),
        );
        self.broadcast(ev);
        if self.owner.is_some() {
            self.next_tick.get_or_insert(now + FRAME);
        }
    }

    pub fn on_channel_open(&mut self) {
        let ev = event(
            session_event::Kind::DataChannelOpen,
            "",
            &self.session_id,
            &Default::default(),
        );
        self.broadcast(ev);
    }

    /// The session ended: a last event to everyone, then the channels close.
    pub fn on_ended(&mut self, reason: &str) {
        let ev = event(
            session_event::Kind::Ended,
            reason,
            &self.session_id,
            &Default::default(),
        );
        self.broadcast(ev);
        self.owner = None;
        self.taps.clear();
        self.next_tick = None;
    }

    pub fn on_channel_data(&mut self, label: &str, binary: bool, data: &[u8]) {
        if self.owner.is_none() && self.taps.is_empty() {
            return;
        }
        let payload = if binary {
            data_message::Payload::Binary(Bytes::copy_from_slice(data))
        } else {
            data_message::Payload::Text(String::from_utf8_lossy(data).into_owned())
        };
        let msg = Uplink {
            kind: Some(uplink::Kind::Data(DataMessage {
                label: label.to_string(),
                payload: Some(payload),
            })),
        };
        self.broadcast(msg);
    }

    /// One received Opus packet (in order, as str0m delivers them).
    pub fn on_audio_packet(&mut self, arrival: Instant, rtp_seq: u64, rtp_ts: u32, data: &[u8]) {
        let gap = match self.last_rtp_seq {
            Some(last) if rtp_seq > last + 1 => rtp_seq - last - 1,
            Some(last) if rtp_seq <= last => return, // duplicate or stale
            _ => 0,
        };
        self.last_rtp_seq = Some(rtp_seq);
        if self.owner.is_none() && self.taps.is_empty() {
            return;
        }
        let arrival_us = self.clock.unix_micros(arrival);
        let passthrough = self
            .owner
            .as_ref()
            .is_some_and(|o| o.mode == AudioMode::OpusPassthrough);
        if passthrough {
            let msg = Uplink {
                kind: Some(uplink::Kind::Opus(OpusPacket {
                    data: Bytes::copy_from_slice(data),
                    rtp_sequence: rtp_seq as u32 & 0xffff,
                    rtp_timestamp: rtp_ts,
                    arrival_unix_micros: arrival_us,
                })),
            };
            self.broadcast(msg);
            self.handoff.observe(arrival.elapsed().as_micros() as u64);
            return;
        }
        if gap > 0 && gap <= MAX_CONCEALED_RUN {
            for k in 0..gap {
                let ts = rtp_ts.wrapping_sub(((gap - k) as u32) * RTP_TICKS_PER_FRAME);
                // The frame just before this packet can be recovered from its in-band FEC;
                // earlier ones are synthesized by PLC.
                let fec = k + 1 == gap;
                self.decode_and_send(if fec { data } else { &[] }, fec, ts, arrival_us, true);
            }
        }
        self.decode_and_send(data, false, rtp_ts, arrival_us, false);
        // Socket arrival → frame queued for the backends (the media-latency target).
        let us = arrival.elapsed().as_micros() as u64;
        self.handoff.observe(us);
    }

    fn decode_and_send(
        &mut self,
        data: &[u8],
        fec: bool,
        ts: u32,
        arrival_us: i64,
        concealed: bool,
    ) {
        let frame = self.frame_samples();
        let Some(decoder) = self.decoder.as_mut() else {
            return;
        };
        let out = &mut self.decode_buf[..frame];
        let n = match decoder.decode(data, out, fec) {
            Ok(n) => n.min(frame),
            Err(_) => {
                // A packet libopus cannot decode is concealed like a lost one.
                match decoder.decode(&[], out, false) {
                    Ok(n) => n.min(frame),
                    Err(_) => return,
                }
            }
        };
        let concealed = concealed || data.is_empty();
        let mut pcm = BytesMut::with_capacity(n * 2);
        for s in &out[..n] {
            pcm.put_i16_le(*s);
        }
        let msg = Uplink {
            kind: Some(uplink::Kind::Audio(AudioFrame {
                sequence: self.frame_seq,
                rtp_timestamp: ts,
                arrival_unix_micros: arrival_us,
                sample_rate_hz: self.rate,
                pcm: pcm.freeze(),
                concealed,
            })),
        };
        self.frame_seq += 1;
        self.counters.uplink_frames += 1;
        if concealed {
            self.counters.uplink_concealed += 1;
        }
        self.broadcast(msg);
    }

    fn send_owner(&mut self, msg: Uplink) {
        if let Some(o) = &self.owner {
            match o.uplink.try_send(msg) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => self.counters.uplink_dropped += 1,
                Err(TrySendError::Closed(_)) => {} // noticed by poll_downlink
            }
        }
    }

    fn broadcast(&mut self, msg: Uplink) {
        let dropped = &mut self.counters.tap_dropped;
        self.taps.retain(|t| match t.try_send(msg.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                *dropped += 1;
                true
            }
            Err(TrySendError::Closed(_)) => false,
        });
        self.send_owner(msg);
    }

    pub fn next_tick(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Drains backend messages; returns the next one the session must act on.
    pub fn poll_downlink(&mut self) -> Option<BridgeAction> {
        loop {
            let owner = self.owner.as_mut()?;
            if self.down_pcm.len() as u64 >= MAX_QUEUED_DOWNLINK.as_secs() * u64::from(self.rate) {
                return None;
            }
            let msg = match owner.downlink.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    self.detach_owner();
                    return Some(BridgeAction::OwnerLost);
                }
            };
            match msg.kind {
                Some(downlink::Kind::Audio(chunk)) => self.queue_pcm(&chunk.pcm, chunk.item_id),
                Some(downlink::Kind::Opus(p)) => {
                    if owner.mode == AudioMode::OpusPassthrough {
                        self.down_opus.push_back(p.data);
                    }
                }
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
        let dropped = self.down_pcm.len() as u64 + self.down_opus.len() as u64 * 960;
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
        // Fixed cadence, no drift; after a long stall, restart the clock instead of bursting.
        let mut next = due + FRAME;
        if now > next + 3 * FRAME {
            next = now + FRAME;
        }
        self.next_tick = Some(next);
        let ts = self.out_rtp_ts;
        self.out_rtp_ts = self.out_rtp_ts.wrapping_add(RTP_TICKS_PER_FRAME);
        let owner = self.owner.as_ref()?;
        if !self.connected {
            return None;
        }
        let len = if owner.mode == AudioMode::OpusPassthrough {
            let packet = self.down_opus.pop_front()?;
            let n = packet.len().min(self.encode_buf.len());
            self.encode_buf[..n].copy_from_slice(&packet[..n]);
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
            for (dst, src) in self.frame_buf.iter_mut().zip(self.down_pcm.drain(..take)) {
                *dst = src;
            }
            self.frame_buf[take..].fill(0);
            self.account_played(take as u64);
            let encoder = self.encoder.as_mut()?;
            match encoder.encode(&self.frame_buf, &mut self.encode_buf) {
                Ok(n) => n,
                Err(_) => return None,
            }
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

    fn send_progress(&mut self) {
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

fn event(
    kind: session_event::Kind,
    reason: &str,
    session_id: &str,
    metadata: &std::collections::HashMap<String, String>,
) -> Uplink {
    Uplink {
        kind: Some(uplink::Kind::Event(SessionEvent {
            kind: kind as i32,
            reason: reason.to_string(),
            session_id: session_id.to_string(),
            metadata: metadata.clone(),
        })),
    }
}

/// Maps loop `Instant`s to wall-clock microseconds (captured once, so no syscall per packet).
struct WallClock {
    base_instant: Instant,
    base_unix_micros: i64,
}

impl WallClock {
    /// Reads both clocks back to back (a base taken earlier would bias every timestamp).
    fn new() -> Self {
        let base_instant = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        WallClock {
            base_instant,
            base_unix_micros: unix,
        }
    }

    fn unix_micros(&self, t: Instant) -> i64 {
        match t.checked_duration_since(self.base_instant) {
            Some(d) => self.base_unix_micros + d.as_micros() as i64,
            None => self.base_unix_micros - (self.base_instant - t).as_micros() as i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: EncoderSettings = EncoderSettings {
        bitrate: 32_000,
        complexity: 5,
    };

    fn owner(
        rate: u32,
    ) -> (
        OwnerEndpoints,
        mpsc::Receiver<Uplink>,
        mpsc::Sender<Downlink>,
    ) {
        let (up_tx, up_rx) = mpsc::channel(1024);
        let (down_tx, down_rx) = mpsc::channel(64);
        (
            OwnerEndpoints {
                uplink: up_tx,
                downlink: down_rx,
                sample_rate: rate,
                mode: AudioMode::Pcm,
                progress_interval: Duration::from_millis(200),
            },
            up_rx,
            down_tx,
        )
    }

    fn opus_frames(n: usize) -> Vec<Vec<u8>> {
        let mut enc =
            opus::Encoder::new(48_000, opus::Channels::Mono, opus::Application::Voip).unwrap();
        enc.set_inband_fec(true).unwrap();
        enc.set_packet_loss_perc(10).unwrap();
        (0..n)
            .map(|i| {
                let pcm: Vec<i16> = (0..960)
                    .map(|s| {
                        let t = (i * 960 + s) as f32 / 48_000.0;
                        ((t * 440.0 * std::f32::consts::TAU).sin() * 8000.0) as i16
                    })
                    .collect();
                enc.encode_vec(&pcm, 1500).unwrap()
            })
            .collect()
    }

    fn audio_frames(rx: &mut mpsc::Receiver<Uplink>) -> Vec<AudioFrame> {
        let mut v = Vec::new();
        while let Ok(m) = rx.try_recv() {
            if let Some(uplink::Kind::Audio(a)) = m.kind {
                v.push(a);
            }
        }
        v
    }

    #[test]
    fn lost_packets_become_concealed_frames_with_contiguous_sequence() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (ep, mut up, _down) = owner(16_000);
        b.attach_owner(ep, now, &Default::default()).unwrap();
        let packets = opus_frames(10);
        for (i, p) in packets.iter().enumerate() {
            if i == 3 || i == 6 || i == 7 {
                continue; // lost
            }
            b.on_audio_packet(now, 100 + i as u64, 960 * i as u32, p);
        }
        let frames = audio_frames(&mut up);
        assert_eq!(frames.len(), 10);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.sequence, i as u64);
            assert_eq!(f.pcm.len(), 320 * 2, "20 ms at 16 kHz");
            assert_eq!(f.concealed, i == 3 || i == 6 || i == 7, "frame {i}");
            assert_eq!(f.rtp_timestamp, 960 * i as u32);
        }
    }

    #[test]
    fn slow_backend_costs_dropped_frames_not_blocking() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (up_tx, _up_rx) = mpsc::channel(4);
        let (_down_tx, down_rx) = mpsc::channel(4);
        let ep = OwnerEndpoints {
            uplink: up_tx,
            downlink: down_rx,
            sample_rate: 48_000,
            mode: AudioMode::Pcm,
            progress_interval: Duration::from_millis(200),
        };
        b.attach_owner(ep, now, &Default::default()).unwrap();
        for (i, p) in opus_frames(20).iter().enumerate() {
            b.on_audio_packet(now, i as u64, 0, p);
        }
        // 4 slots: the ATTACHED event plus 3 frames; the other 17 frames are dropped.
        assert_eq!(b.counters().uplink_dropped, 17);
    }

    #[test]
    fn downlink_is_paced_one_frame_per_tick_and_clear_reports_played_time() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (ep, mut up, down) = owner(48_000);
        b.attach_owner(ep, now, &Default::default()).unwrap();
        b.on_connected(now);
        // 1 s of audio in one chunk.
        let pcm: Vec<u8> = (0..48_000).flat_map(|_| 1000i16.to_le_bytes()).collect();
        down.try_send(Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: pcm.into(),
                item_id: "item-1".into(),
            })),
        })
        .unwrap();
        let mut t = now;
        let mut sent = 0;
        for _ in 0..10 {
            t = b.next_tick().unwrap();
            while b.poll_downlink().is_some() {}
            if b.tick(t).is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 10, "one frame per tick, no burst");
        down.try_send(Downlink {
            kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
        })
        .unwrap();
        let t = b.next_tick().unwrap().max(t);
        while b.poll_downlink().is_some() {}
        assert!(b.tick(t).is_none(), "nothing plays after clear");
        let cleared = std::iter::from_fn(|| up.try_recv().ok())
            .find_map(|m| match m.kind {
                Some(uplink::Kind::Cleared(c)) => Some(c),
                _ => None,
            })
            .expect("a Cleared answer");
        assert_eq!(cleared.played_ms, 200);
        assert_eq!(cleared.item_played_ms, 200);
        assert_eq!(cleared.item_id, "item-1");
        assert_eq!(cleared.dropped_ms, 800);
    }

    #[test]
    fn unsupported_sample_rate_is_refused() {
        assert!(valid_sample_rate(44_100).is_err());
        assert_eq!(valid_sample_rate(0).unwrap(), 48_000);
    }
}
