//! A session's audio bridge: caller Opus → PCM frames for backends, backend PCM → paced Opus.
//!
//! Sans-IO and owned by the session on its media loop. Uplink (`uplink_decoder.rs`): every
//! received Opus packet is decoded (at the owner's sample rate, so no resampler is needed:
//! libopus decodes at 16, 24 or 48 kHz natively); sequence gaps are filled with frames recovered
//! from in-band FEC or synthesized by packet-loss concealment, flagged `concealed`; frames go to
//! the owner and taps with `try_send`, so a slow backend costs dropped frames (counted), never a
//! blocked loop. Downlink (`downlink_pacer.rs`): backend messages are drained once per 20 ms tick
//! from a bounded channel; PCM is queued, cut into 20 ms frames and Opus-encoded one per tick;
//! an empty queue sends nothing. This file holds the bridge's state, its owner and taps, and
//! the session events it reports.

mod downlink_pacer;
mod held_uplink;
mod owner_uplink;
mod tick_grid;
mod uplink_decoder;

use downlink_pacer::OpusQueue;
pub use downlink_pacer::PendingClears;
use held_uplink::HeldUplink;
pub use held_uplink::{HELD_AUDIO_PACKETS, HELD_DATA_BYTES, HELD_DATA_MESSAGES};
pub use owner_uplink::{
    ChannelTx, CloseReason, MuxLink, MuxReceiver, OwnerUplink, Refused, UPLINK_AUDIO_SLOTS,
    UPLINK_CONTROL_RESERVE, UPLINK_QUEUE,
};
pub use tick_grid::{CoarseTicks, TickGrid};
use uplink_decoder::Audience;

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use voxgate_proto::bridge::{
    session_event, uplink, AudioMode, DataMessage, Downlink, SessionEvent, Uplink,
};

use crate::metrics::{BridgeCounters, CodecKey, HandoffHistogram};

/// One Opus frame: 20 ms.
pub const FRAME: Duration = Duration::from_millis(20);
/// RTP clock ticks per frame (48 kHz clock for Opus).
pub const RTP_TICKS_PER_FRAME: u32 = 960;
/// Largest Opus packet sent or taken from a backend (RFC 6716 allows 1275 bytes per frame).
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

/// The downlink encoder's libopus application (`--opus-application`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum OpusApplication {
    /// SILK for speech at low rates, hybrid above; the default.
    #[default]
    Voip,
    /// Tuned for fidelity to the input rather than speech intelligibility.
    Audio,
    /// RESTRICTED_LOWDELAY: CELT only, no SILK and no speech analysis; the cheapest encoder,
    /// meant for synthetic (TTS) speech.
    Lowdelay,
}

impl OpusApplication {
    /// The flag's value: `voip`, `audio` or `lowdelay`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpusApplication::Voip => "voip",
            OpusApplication::Audio => "audio",
            OpusApplication::Lowdelay => "lowdelay",
        }
    }

    pub fn to_opus(self) -> opus::Application {
        match self {
            OpusApplication::Voip => opus::Application::Voip,
            OpusApplication::Audio => opus::Application::Audio,
            OpusApplication::Lowdelay => opus::Application::LowDelay,
        }
    }
}

/// Downlink encoder settings (`--opus-bitrate`, `--opus-complexity`, `--opus-application`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EncoderSettings {
    pub bitrate: i32,
    pub complexity: i32,
    pub application: OpusApplication,
}

/// An owner's own choice of downlink encoder (its `Attach.encoder`): what it leaves `None`
/// keeps the transceiver's setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderChoice {
    pub application: Option<OpusApplication>,
    /// 0 to 10 (checked where the attach is parsed).
    pub complexity: Option<i32>,
}

impl EncoderSettings {
    /// These settings with `choice` applied.
    pub fn chosen(self, choice: EncoderChoice) -> EncoderSettings {
        EncoderSettings {
            bitrate: self.bitrate,
            complexity: choice.complexity.unwrap_or(self.complexity),
            application: choice.application.unwrap_or(self.application),
        }
    }

    /// A mono encoder at `rate` with these settings, as every PCM session's downlink has.
    pub fn encoder(&self, rate: u32) -> Result<opus::Encoder, opus::Error> {
        let mut enc = opus::Encoder::new(rate, opus::Channels::Mono, self.application.to_opus())?;
        enc.set_bitrate(opus::Bitrate::Bits(self.bitrate))?;
        enc.set_complexity(self.complexity)?;
        // In-band FEC is SILK's (LBRR): a CELT-only low-delay encoder has none to add.
        if self.application != OpusApplication::Lowdelay {
            enc.set_inband_fec(true)?;
        }
        Ok(enc)
    }
}

/// A PCM owner's backend played its first frame: from now on the session costs its encoder
/// (admission counts it at that cost before the CPU window shows it; see
/// `control::process_load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StartedTalking {
    pub rate: u32,
    pub encoder: EncoderSettings,
}

impl StartedTalking {
    /// How the metrics label this session's codecs.
    pub fn codec_key(&self) -> CodecKey {
        CodecKey {
            rate: self.rate,
            application: self.encoder.application.as_str(),
            complexity: self.encoder.complexity,
        }
    }
}

/// The channels that connect a session to its owning backend stream.
pub struct OwnerEndpoints {
    pub uplink: OwnerUplink,
    pub downlink: mpsc::Receiver<Downlink>,
    pub sample_rate: u32,
    pub mode: AudioMode,
    pub progress_interval: Duration,
    /// The owner counts as lost once its uplink queue has stayed full this long.
    pub stall_after: Duration,
    /// Names this attachment, so a late report of its loss is not taken for a newer owner's.
    pub owner_id: u64,
    /// The downlink encoder this owner asked for (PCM mode).
    pub encoder: EncoderChoice,
    /// Clears on their way down `downlink` (counted by the gRPC edge).
    pub clears: PendingClears,
}

struct Owner {
    uplink: OwnerUplink,
    downlink: mpsc::Receiver<Downlink>,
    clears: PendingClears,
    mode: AudioMode,
    progress_interval_samples: u64,
    stall_after: Duration,
    /// Since when the uplink queue has been full (seen on a tick), if it is.
    full_since: Option<Instant>,
    /// The downlink encoder's settings (PCM mode), until its first frame is reported.
    unreported_encoder: Option<EncoderSettings>,
}

/// Something the session must do with its `Rtc` on behalf of the backend.
#[derive(Debug)]
pub enum BridgeAction {
    SendData(DataMessage),
    Hangup(String),
    /// The owner's stream ended without a hangup: the backend is gone.
    OwnerLost,
}

pub struct AudioBridge {
    owner: Option<Owner>,
    /// `owner_id` of the latest owner (kept after it is dropped, for the loss report).
    last_owner_id: u64,
    taps: Vec<mpsc::Sender<Uplink>>,
    session_id: String,
    /// Uplink PCM rate (the owner's; 48 kHz until one attaches).
    rate: u32,
    decoder: Option<opus::Decoder>,
    encoder: Option<opus::Encoder>,
    encoder_settings: EncoderSettings,
    // Scratch buffers, allocated on first use (`scratch`): a session no backend owns needs
    // none, a passthrough one only `encode_buf`. Allocated up front they were 15 KB of every
    // session (`decode_buf` alone 11.5 KB, for 120 ms of 48 kHz of which a decode only ever
    // uses one 20 ms frame; massif on 100 idle sessions).
    /// One decoded uplink frame at the owner's rate (PCM owners).
    decode_buf: Vec<i16>,
    /// The downlink packet a tick hands to str0m (every owner).
    encode_buf: Vec<u8>,
    /// One downlink PCM frame at the owner's rate, the encoder's input (PCM owners).
    frame_buf: Vec<i16>,
    last_rtp_seq: Option<u64>,
    frame_seq: u64,
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
    connected: bool,
    /// The caller's data channel is open (replayed to an owner that attaches later).
    channel_open: bool,
    /// What the caller sent while no backend owned the session (see `held_uplink`).
    held: HeldUplink,
    counters: BridgeCounters,
    /// Hand-off latencies since the loop last took them.
    handoff: HandoffHistogram,
    clock: WallClock,
    /// Set by the owner's first encoded frame, until the loop takes it.
    started_talking: Option<StartedTalking>,
}

impl AudioBridge {
    pub fn new(session_id: String, encoder_settings: EncoderSettings) -> Self {
        let tick_grid = TickGrid::for_session(&session_id);
        AudioBridge {
            owner: None,
            last_owner_id: 0,
            taps: Vec::new(),
            session_id,
            rate: 48_000,
            decoder: None,
            encoder: None,
            encoder_settings,
            decode_buf: Vec::new(),
            encode_buf: Vec::new(),
            frame_buf: Vec::new(),
            last_rtp_seq: None,
            frame_seq: 0,
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
            tick_grid,
            connected: false,
            channel_open: false,
            held: HeldUplink::default(),
            counters: BridgeCounters::default(),
            handoff: HandoffHistogram::default(),
            clock: WallClock::new(),
            started_talking: None,
        }
    }

    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// The hand-off latencies observed since the last call.
    pub fn take_handoff(&mut self) -> HandoffHistogram {
        std::mem::take(&mut self.handoff)
    }

    /// Whether the owner's backend has just played its first PCM frame (once per owner).
    pub fn take_started_talking(&mut self) -> Option<StartedTalking> {
        self.started_talking.take()
    }

    /// The `owner_id` of the latest owner, live or lost.
    pub fn last_owner_id(&self) -> u64 {
        self.last_owner_id
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
            self.detach_owner(CloseReason::Released);
        }
        self.owner.is_some()
    }

    pub fn tap_count(&self) -> usize {
        self.taps.len()
    }

    /// Taps whose subscriber is still there (gone ones are dropped first, so a client that
    /// hangs up its taps can open new ones).
    pub fn live_tap_count(&mut self) -> usize {
        self.taps.retain(|t| !t.is_closed());
        self.taps.len()
    }

    /// `buf` grown to at least `len` (zeros): scratch buffers are allocated on first use, and
    /// after that this is a length check.
    fn scratch<T: Copy + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
        if buf.len() < len {
            buf.resize(len, T::default());
        }
        &mut buf[..len]
    }

    fn frame_samples(&self) -> usize {
        (self.rate / 50) as usize
    }

    fn ms(&self, samples: u64) -> u64 {
        samples * 1000 / u64::from(self.rate)
    }

    /// Picks the grid the next owner's ticks fall on, from its audio mode, the size of the
    /// loop that holds this session and the loop's coarse-tick setting (see
    /// [`TickGrid::for_owner`]). Call before [`AudioBridge::attach_owner`]; without it the
    /// session ticks on its fine grid.
    pub fn choose_tick_grid(&mut self, mode: AudioMode, loop_sessions: usize, coarse: CoarseTicks) {
        let cheap_ticks = mode == AudioMode::OpusPassthrough;
        self.tick_grid = TickGrid::for_owner(&self.session_id, cheap_ticks, loop_sessions, coarse);
    }

    /// Makes `endpoints` the session's owner. The caller checked there was none.
    pub fn attach_owner(
        &mut self,
        endpoints: OwnerEndpoints,
        now: Instant,
        metadata: &std::collections::HashMap<String, String>,
    ) -> Result<(), BridgeError> {
        let rate = valid_sample_rate(endpoints.sample_rate)?;
        let unreported_encoder = if endpoints.mode == AudioMode::Pcm {
            // (Re)build codecs at the owner's rate; a new owner may ask for another rate.
            if self.decoder.is_none() || rate != self.rate {
                self.decoder = Some(opus::Decoder::new(rate, opus::Channels::Mono)?);
            }
            let settings = self.encoder_settings.chosen(endpoints.encoder);
            self.encoder = Some(settings.encoder(rate)?);
            Some(settings)
        } else {
            None
        };
        self.rate = rate;
        let interval_samples =
            (endpoints.progress_interval.as_millis() as u64).max(20) * u64::from(rate) / 1000;
        let mut uplink = endpoints.uplink;
        uplink.mark_attached();
        let owner = Owner {
            uplink,
            downlink: endpoints.downlink,
            clears: endpoints.clears,
            mode: endpoints.mode,
            progress_interval_samples: interval_samples,
            stall_after: endpoints.stall_after,
            full_since: None,
            unreported_encoder,
        };
        self.last_owner_id = endpoints.owner_id;
        self.dropped_ahead_of_clear = 0;
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
        // What happened before this owner attached, in the order it happened.
        let past = [
            (self.connected, session_event::Kind::Connected),
            (self.channel_open, session_event::Kind::DataChannelOpen),
        ];
        for (_, kind) in past.into_iter().filter(|(happened, _)| *happened) {
            self.send_owner(event(kind, "", &self.session_id, &Default::default()));
        }
        self.replay_held();
        // Tick from now on, even before media flows, so backend messages (and a backend that
        // went away) are noticed within a frame; on the shared grid (see `tick_grid`).
        self.next_tick = Some(self.tick_grid.first_after(now));
        Ok(())
    }

    pub fn add_tap(&mut self, tap: mpsc::Sender<Uplink>) -> Result<(), BridgeError> {
        if self.decoder.is_none() {
            self.decoder = Some(opus::Decoder::new(self.rate, opus::Channels::Mono)?);
        }
        self.taps.push(tap);
        Ok(())
    }

    /// Checked on each tick: an owner whose uplink queue has stayed full (of audio) for its
    /// stall time is stuck (a frozen process, or a dead connection not yet noticed). It is dropped, which
    /// ends its stream, and the caller reports the owner lost so the session is dispatched
    /// again. No allocation: a capacity read and an `Instant` comparison.
    pub fn owner_stalled(&mut self, now: Instant) -> bool {
        let Some(o) = self.owner.as_mut() else {
            return false;
        };
        // Full for audio: what is left is the control reserve.
        if o.uplink.has_audio_room() {
            o.full_since = None;
            return false;
        }
        let since = *o.full_since.get_or_insert(now);
        if now.saturating_duration_since(since) < o.stall_after {
            return false;
        }
        self.detach_owner(CloseReason::Stalled);
        true
    }

    /// Drops the owner (its uplink ends, saying `why` to a `Multiplex` channel) and what it
    /// had queued for the caller.
    pub fn detach_owner(&mut self, why: CloseReason) {
        if let Some(o) = self.owner.take() {
            o.uplink.close(why);
        }
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
            self.next_tick
                .get_or_insert(self.tick_grid.first_after(now));
        }
    }

    pub fn on_channel_open(&mut self) {
        self.channel_open = true;
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
        if let Some(o) = self.owner.take() {
            o.uplink.close(CloseReason::Ended);
        }
        self.taps.clear();
        self.next_tick = None;
    }

    fn send_owner(&mut self, msg: Uplink) {
        if let Some(o) = &self.owner {
            match o.uplink.offer(msg) {
                Ok(()) => {}
                Err(Refused::Full) => self.counters.uplink_dropped += 1,
                Err(Refused::Closed) => {} // noticed by poll_downlink
            }
        }
    }

    fn send(&mut self, audience: Audience, msg: Uplink) {
        match audience {
            Audience::All => self.broadcast(msg),
            Audience::OwnerOnly => self.send_owner(msg),
        }
    }

    fn broadcast(&mut self, msg: Uplink) {
        let dropped = &mut self.counters.tap_dropped;
        self.taps
            .retain(|t| match owner_uplink::offer_bounded(t, msg.clone()) {
                Ok(()) => true,
                Err(Refused::Full) => {
                    *dropped += 1;
                    true
                }
                Err(Refused::Closed) => false,
            });
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

/// A run of queued samples from one backend item (`item_id`), for progress and `clear` reports.
struct QueuedItem {
    id: String,
    samples: u64,
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
    use voxgate_proto::bridge::{data_message, downlink, AudioFrame};

    const SETTINGS: EncoderSettings = EncoderSettings {
        bitrate: 32_000,
        complexity: 5,
        application: OpusApplication::Voip,
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
                uplink: OwnerUplink::Stream(up_tx),
                downlink: down_rx,
                sample_rate: rate,
                mode: AudioMode::Pcm,
                progress_interval: Duration::from_millis(200),
                stall_after: Duration::from_secs(5),
                owner_id: 1,
                encoder: EncoderChoice::default(),
                clears: PendingClears::default(),
            },
            up_rx,
            down_tx,
        )
    }

    /// A 48 kHz PCM owner on the given queues.
    fn pcm_endpoints(
        uplink: mpsc::Sender<Uplink>,
        downlink: mpsc::Receiver<Downlink>,
        stall_after: Duration,
    ) -> OwnerEndpoints {
        OwnerEndpoints {
            uplink: OwnerUplink::Stream(uplink),
            downlink,
            sample_rate: 48_000,
            mode: AudioMode::Pcm,
            progress_interval: Duration::from_millis(200),
            stall_after,
            owner_id: 1,
            encoder: EncoderChoice::default(),
            clears: PendingClears::default(),
        }
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
            b.on_audio_packet(now, 100 + i as u64, 960 * i as u32, p.clone());
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
        let (up_tx, _up_rx) = mpsc::channel(UPLINK_CONTROL_RESERVE + 4);
        let (_down_tx, down_rx) = mpsc::channel(4);
        let ep = pcm_endpoints(up_tx, down_rx, Duration::from_secs(5));
        b.attach_owner(ep, now, &Default::default()).unwrap();
        for (i, p) in opus_frames(20).iter().enumerate() {
            b.on_audio_packet(now, i as u64, 0, p.clone());
        }
        // 4 slots beside the reserve: the ATTACHED event plus 3 frames; the other 17 frames are
        // dropped.
        assert_eq!(b.counters().uplink_dropped, 17);
    }

    #[test]
    fn a_backend_behind_on_audio_still_gets_events_messages_and_clears() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (up_tx, mut up_rx) = mpsc::channel(UPLINK_CONTROL_RESERVE + 8);
        let (down_tx, down_rx) = mpsc::channel(4);
        let ep = pcm_endpoints(up_tx, down_rx, Duration::from_secs(5));
        b.attach_owner(ep, now, &Default::default()).unwrap();
        b.on_connected(now);
        // The backend reads nothing: ATTACHED, CONNECTED and 6 frames; 34 frames dropped.
        for (i, p) in opus_frames(40).iter().enumerate() {
            b.on_audio_packet(now, i as u64, 960 * i as u32, p.clone());
        }
        assert_eq!(b.counters().uplink_dropped, 34);
        // Progress reports are dropped like frames: the next one supersedes.
        b.send_progress();
        assert_eq!(b.counters().uplink_dropped, 35);
        // What must not be lost still gets in: an event, the caller's text, a clear's answer.
        b.on_channel_open();
        b.on_channel_data("chat", false, b"stop talking");
        down_tx
            .try_send(Downlink {
                kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
            })
            .unwrap();
        while b.poll_downlink().is_some() {}
        assert_eq!(b.counters().uplink_dropped, 35);
        // Until the reserve is used up too: 13 slots are left; the 14th message is dropped.
        for i in 0..14 {
            b.on_channel_data("chat", false, format!("{i}").as_bytes());
        }
        assert_eq!(b.counters().uplink_dropped, 36);
        let kinds: Vec<&str> = std::iter::from_fn(|| up_rx.try_recv().ok())
            .map(|m| match m.kind {
                Some(uplink::Kind::Event(e)) if e.kind == session_event::Kind::Attached as i32 => {
                    "attached"
                }
                Some(uplink::Kind::Event(e)) if e.kind == session_event::Kind::Connected as i32 => {
                    "connected"
                }
                Some(uplink::Kind::Event(_)) => "event",
                Some(uplink::Kind::Audio(_)) => "audio",
                Some(uplink::Kind::Data(_)) => "data",
                Some(uplink::Kind::Cleared(_)) => "cleared",
                _ => "other",
            })
            .collect();
        let mut want = vec!["attached", "connected"];
        want.extend(["audio"; 6]);
        want.extend(["event", "data", "cleared"]);
        want.extend(["data"; 13]);
        assert_eq!(kinds, want);
    }

    #[test]
    fn an_owner_whose_queue_stays_full_past_the_stall_time_is_dropped() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (up_tx, mut up_rx) = mpsc::channel(UPLINK_CONTROL_RESERVE + 2);
        let (_down_tx, down_rx) = mpsc::channel(4);
        let ep = pcm_endpoints(up_tx, down_rx, Duration::from_secs(2));
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        assert!(!b.owner_stalled(t0), "one slot still free");
        for (i, p) in opus_frames(4).iter().enumerate() {
            b.on_audio_packet(t0, i as u64, 0, p.clone());
        }
        assert!(!b.owner_stalled(t0), "full, but only just");
        // The backend reads once: the clock restarts.
        up_rx.try_recv().unwrap();
        assert!(!b.owner_stalled(t0 + Duration::from_secs(1)));
        b.on_audio_packet(t0, 9, 0, opus_frames(1).remove(0));
        assert!(!b.owner_stalled(t0 + Duration::from_secs(2)));
        assert!(!b.owner_stalled(t0 + Duration::from_millis(3_900)));
        assert!(b.owner_stalled(t0 + Duration::from_secs(4)));
        assert!(!b.has_owner(), "the stuck owner is dropped");
        assert!(
            !b.owner_stalled(t0 + Duration::from_secs(9)),
            "reported once"
        );
    }

    #[test]
    fn a_clear_on_its_way_is_not_held_up_behind_a_full_queue() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (up_tx, mut up) = mpsc::channel(1024);
        let (down, down_rx) = mpsc::channel(8);
        let clears = PendingClears::default();
        let mut ep = pcm_endpoints(up_tx, down_rx, Duration::from_secs(5));
        ep.sample_rate = 16_000;
        ep.clears = clears.clone();
        b.attach_owner(ep, now, &Default::default()).unwrap();
        b.on_connected(now);
        let second = || Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: vec![1u8; 32_000].into(),
                item_id: "long".into(),
            })),
        };
        // 30 s queued: the session takes no more; 7 more seconds wait in the channel.
        for _ in 0..30 {
            down.try_send(second()).unwrap();
            while b.poll_downlink().is_some() {}
        }
        for _ in 0..7 {
            down.try_send(second()).unwrap();
        }
        assert!(b.poll_downlink().is_none());
        assert_eq!(down.capacity(), 1, "the channel is full of audio");
        // The edge announces the clear before it waits for room; the bridge drops the audio
        // ahead of it, which makes that room, and takes the clear.
        clears.announce();
        while b.poll_downlink().is_some() {}
        down.try_send(Downlink {
            kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
        })
        .unwrap();
        while b.poll_downlink().is_some() {}
        let cleared = std::iter::from_fn(|| up.try_recv().ok())
            .find_map(|m| match m.kind {
                Some(uplink::Kind::Cleared(c)) => Some(c),
                _ => None,
            })
            .expect("a Cleared answer");
        assert_eq!(cleared.dropped_ms, 37_000, "{cleared:?}");
        assert!(!clears.any());
        // Audio after the clear plays again.
        down.try_send(second()).unwrap();
        while b.poll_downlink().is_some() {}
        let t = b.next_tick().unwrap();
        assert!(b.tick(t).is_some());
    }

    #[test]
    fn scratch_buffers_are_allocated_on_first_use_at_the_owners_frame_size() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        // A session no backend owns carries no codec buffers (memory per idle session).
        assert_eq!(b.decode_buf.capacity(), 0);
        assert_eq!(b.encode_buf.capacity(), 0);
        assert_eq!(b.frame_buf.capacity(), 0);
        let (ep, mut up, down) = owner(16_000);
        b.attach_owner(ep, now, &Default::default()).unwrap();
        b.on_connected(now);
        for (i, p) in opus_frames(3).into_iter().enumerate() {
            b.on_audio_packet(now, i as u64, 960 * i as u32, p);
        }
        let frames = audio_frames(&mut up);
        assert_eq!(frames.len(), 3);
        assert!(frames
            .iter()
            .all(|f| f.pcm.len() == 320 * 2 && !f.concealed));
        assert_eq!(
            b.decode_buf.len(),
            320,
            "one 20 ms frame at 16 kHz, not 120 ms at 48"
        );
        // 50 ms of backend audio: two whole frames and a tail padded with silence.
        let pcm: Vec<u8> = (0..800).flat_map(|_| 1000i16.to_le_bytes()).collect();
        down.try_send(Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: pcm.into(),
                item_id: String::new(),
            })),
        })
        .unwrap();
        while b.poll_downlink().is_some() {}
        let mut sent = 0;
        for _ in 0..4 {
            let t = b.next_tick().unwrap();
            if let Some((packet, _)) = b.tick(t) {
                assert!(!packet.is_empty() && packet.len() <= MAX_OPUS_PACKET);
                sent += 1;
            }
        }
        assert_eq!(sent, 3, "two whole frames and the padded tail");
        assert_eq!(b.frame_buf.len(), 320);
        assert_eq!(b.encode_buf.len(), MAX_OPUS_PACKET);
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

    /// The TOC configurations (RFC 6716 §3.1, `toc >> 3`) of the frames a PCM owner at
    /// `rate` gets from a bridge whose encoder runs `application`, for a second of speech-band
    /// tone.
    fn downlink_configs(rate: u32, application: OpusApplication) -> Vec<u8> {
        let now = Instant::now();
        let settings = EncoderSettings {
            application,
            ..SETTINGS
        };
        let mut b = AudioBridge::new("s".into(), settings);
        let (ep, _up, down) = owner(rate);
        b.attach_owner(ep, now, &Default::default()).unwrap();
        b.on_connected(now);
        let pcm: Vec<u8> = (0..rate)
            .flat_map(|s| {
                let t = s as f32 / rate as f32;
                (((t * 220.0 * std::f32::consts::TAU).sin() * 8000.0) as i16).to_le_bytes()
            })
            .collect();
        down.try_send(Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: pcm.into(),
                item_id: "item".into(),
            })),
        })
        .unwrap();
        let mut decoder = opus::Decoder::new(rate, opus::Channels::Mono).unwrap();
        let mut out = vec![0i16; 5760];
        let mut configs = Vec::new();
        for _ in 0..20 {
            let t = b.next_tick().unwrap();
            while b.poll_downlink().is_some() {}
            let (packet, _) = b.tick(t).expect("a frame per tick");
            let n = decoder.decode(packet, &mut out, false).expect("decodes");
            assert_eq!(n, (rate / 50) as usize, "20 ms per frame");
            configs.push(packet[0] >> 3);
        }
        configs
    }

    #[test]
    fn lowdelay_application_sends_celt_and_voip_sends_silk() {
        for rate in [16_000, 24_000, 48_000] {
            let celt = downlink_configs(rate, OpusApplication::Lowdelay);
            assert!(
                celt.iter().all(|c| (16..=31).contains(c)),
                "lowdelay at {rate} Hz: CELT-only configs, got {celt:?}"
            );
        }
        let silk = downlink_configs(16_000, OpusApplication::Voip);
        assert!(
            silk.iter().all(|&c| c < 12),
            "voip at 16 kHz: SILK-only configs, got {silk:?}"
        );
    }

    #[test]
    fn sessions_of_one_phase_tick_together_and_a_stalled_clock_rejoins_its_grid() {
        let t0 = Instant::now();
        // Two sessions whose ids put them on the same grid, attached 7 ms apart.
        let mut a = AudioBridge::new("same".into(), SETTINGS);
        let mut b = AudioBridge::new("same".into(), SETTINGS);
        let grid = TickGrid::for_session("same");
        let (ep_a, _up_a, _down_a) = owner(48_000);
        let (ep_b, _up_b, _down_b) = owner(48_000);
        a.attach_owner(ep_a, t0, &Default::default()).unwrap();
        b.attach_owner(ep_b, t0 + Duration::from_millis(7), &Default::default())
            .unwrap();
        a.on_connected(t0);
        b.on_connected(t0 + Duration::from_millis(7));
        // Within one period of each other: same tick, or b exactly one frame later.
        let (ta, tb) = (a.next_tick().unwrap(), b.next_tick().unwrap());
        assert!(tb == ta || tb == ta + FRAME, "{:?}", tb.duration_since(ta));
        for _ in 0..5 {
            let t = a.next_tick().unwrap();
            a.tick(t);
        }
        let on_grid = |t: Instant| grid.first_after(t - FRAME) == t;
        assert!(on_grid(a.next_tick().unwrap()));
        // A loop stalled for 200 ms: the clock restarts on the grid, not at "now + 20 ms".
        let late = a.next_tick().unwrap() + Duration::from_micros(200_321);
        a.tick(late);
        let next = a.next_tick().unwrap();
        assert!(next > late && next <= late + FRAME);
        assert!(on_grid(next));
    }

    #[test]
    fn a_passthrough_owner_of_a_small_loop_ticks_on_a_coarse_grid_and_a_pcm_owner_on_its_own() {
        let t0 = Instant::now();
        // An id whose fine phase is not a coarse one, so the two choices differ.
        let id = (0..100)
            .map(|i| format!("{i:032x}"))
            .find(|id| {
                TickGrid::for_owner(id, true, 1, CoarseTicks::default())
                    != TickGrid::for_session(id)
            })
            .unwrap();
        let on = |grid: TickGrid, t: Instant| grid.first_after(t - FRAME) == t;
        let coarse = CoarseTicks::default();
        let off = CoarseTicks { up_to: 0, ..coarse };
        for (mode, loop_sessions, setting, grid) in [
            (
                AudioMode::OpusPassthrough,
                1,
                coarse,
                TickGrid::for_owner(&id, true, 1, coarse),
            ),
            (AudioMode::Pcm, 1, coarse, TickGrid::for_session(&id)),
            (
                AudioMode::OpusPassthrough,
                tick_grid::COARSE_UP_TO + 1,
                coarse,
                TickGrid::for_session(&id),
            ),
            // The loop's setting reaches the bridge: coarse ticks off.
            (
                AudioMode::OpusPassthrough,
                1,
                off,
                TickGrid::for_session(&id),
            ),
        ] {
            let mut b = AudioBridge::new(id.clone(), SETTINGS);
            let (mut ep, _up, _down) = owner(48_000);
            ep.mode = mode;
            b.choose_tick_grid(mode, loop_sessions, setting);
            b.attach_owner(ep, t0, &Default::default()).unwrap();
            let first = b.next_tick().unwrap();
            assert!(
                on(grid, first),
                "{mode:?} in a loop of {loop_sessions}, {setting:?}"
            );
            b.tick(first);
            assert!(on(grid, b.next_tick().unwrap()), "stays on it");
        }
    }

    fn text(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    /// What an owner's queue holds, one word per message: the event kind, `audio` or the text.
    fn kinds(rx: &mut mpsc::Receiver<Uplink>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| match m.kind {
                Some(uplink::Kind::Event(e)) => e.kind().as_str_name().to_string(),
                Some(uplink::Kind::Audio(_)) | Some(uplink::Kind::Opus(_)) => "audio".into(),
                Some(uplink::Kind::Data(DataMessage {
                    payload: Some(data_message::Payload::Text(t)),
                    ..
                })) => t,
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn what_the_caller_sent_before_the_owner_attached_reaches_it_in_order() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        b.on_connected(t0);
        b.on_channel_open();
        let packets = opus_frames(5);
        b.on_audio_packet(t0, 10, 0, packets[0].clone());
        b.on_channel_data("chat", false, &text("hello bot"));
        for (i, p) in packets.iter().enumerate().skip(1) {
            if i != 3 {
                b.on_audio_packet(t0, 10 + i as u64, 960 * i as u32, p.clone());
            }
        }
        assert_eq!(b.counters().uplink_held, 5);
        let (ep, mut up, _down) = owner(16_000);
        b.attach_owner(ep, t0 + Duration::from_millis(80), &Default::default())
            .unwrap();
        assert_eq!(
            kinds(&mut up),
            [
                "ATTACHED",
                "CONNECTED",
                "DATA_CHANNEL_OPEN",
                "audio",
                "hello bot",
                "audio",
                "audio",
                "audio", // packet 3 was lost: concealed
                "audio",
            ]
        );
        assert_eq!(b.counters().uplink_concealed, 1);
        assert_eq!(b.counters().uplink_held_dropped, 0);
        assert_eq!(b.take_handoff().count, 0, "a replay is not a live hand-off");
        // Live again: the next packet follows the replayed ones.
        b.on_audio_packet(t0, 15, 960 * 5, opus_frames(1).remove(0));
        let frames = audio_frames(&mut up);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].sequence, 5, "frames 0-4 were the replay");
    }

    #[test]
    fn a_long_wait_for_an_owner_keeps_the_newest_second_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        b.on_connected(t0);
        let packets = opus_frames(HELD_AUDIO_PACKETS + 25);
        for (i, p) in packets.iter().enumerate() {
            b.on_audio_packet(t0, i as u64, 960 * i as u32, p.clone());
        }
        for i in 0..HELD_DATA_MESSAGES + 3 {
            b.on_channel_data("chat", false, &text(&format!("m{i}")));
        }
        assert_eq!(b.counters().uplink_held_dropped, 25 + 3);
        let (ep, mut up, _down) = owner(48_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        let got = kinds(&mut up);
        assert_eq!(
            got.iter().filter(|k| *k == "audio").count(),
            HELD_AUDIO_PACKETS
        );
        let texts: Vec<_> = got.iter().filter(|k| k.starts_with('m')).collect();
        assert_eq!(texts.len(), HELD_DATA_MESSAGES);
        assert_eq!(texts[0], "m0", "the first messages are kept");
        assert_eq!(
            b.counters().uplink_dropped,
            0,
            "the replay fits the owner's queue"
        );
    }

    #[test]
    fn an_owner_lost_mid_call_leaves_the_gap_to_the_next_one() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (ep, mut first, _d1) = owner(48_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        let packets = opus_frames(6);
        for (i, p) in packets.iter().enumerate().take(3) {
            b.on_audio_packet(t0, i as u64, 960 * i as u32, p.clone());
        }
        assert_eq!(audio_frames(&mut first).len(), 3);
        b.detach_owner(CloseReason::Released);
        for (i, p) in packets.iter().enumerate().skip(3) {
            b.on_audio_packet(t0, i as u64, 960 * i as u32, p.clone());
        }
        let (ep, mut second, _d2) = owner(48_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        let frames = audio_frames(&mut second);
        let stamps: Vec<u32> = frames.iter().map(|f| f.rtp_timestamp).collect();
        assert_eq!(
            stamps,
            [960 * 3, 960 * 4, 960 * 5],
            "only what the first owner missed"
        );
        assert!(frames.iter().all(|f| !f.concealed));
    }

    #[test]
    fn a_tap_hears_the_caller_live_and_the_owner_still_gets_the_hold_once() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (tap_tx, mut tap) = mpsc::channel(64);
        b.add_tap(tap_tx).unwrap();
        for (i, p) in opus_frames(3).iter().enumerate() {
            b.on_audio_packet(t0, i as u64, 960 * i as u32, p.clone());
        }
        b.on_channel_data("chat", false, &text("hi"));
        assert_eq!(kinds(&mut tap), ["audio", "audio", "audio", "hi"]);
        let (ep, mut up, _down) = owner(48_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        assert_eq!(
            kinds(&mut up),
            ["ATTACHED", "audio", "audio", "audio", "hi"]
        );
        assert!(kinds(&mut tap).is_empty(), "the tap heard it once, live");
    }

    #[test]
    fn unsupported_sample_rate_is_refused() {
        assert!(valid_sample_rate(44_100).is_err());
        assert_eq!(valid_sample_rate(0).unwrap(), 48_000);
    }
}
