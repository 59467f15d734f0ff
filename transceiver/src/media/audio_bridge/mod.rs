//! A session's audio bridge: caller Opus → PCM frames for backends, backend PCM → paced Opus.
//!
//! Sans-IO and owned by the session on its media loop, in two directions that each own their
//! state and write to one [`Outbox`] (the owner's uplink and the taps):
//! - the uplink ([`UplinkDecoder`], `uplink_decoder.rs`): every received Opus packet is decoded
//!   at the owner's sample rate (libopus decodes at 16, 24 or 48 kHz natively, so no resampler
//!   is needed); sequence gaps are filled with frames recovered from in-band FEC or synthesized
//!   by packet-loss concealment, flagged `concealed`; what the caller sends while no backend
//!   owns the session is held for the next owner (`held_uplink.rs`);
//! - the downlink ([`DownlinkPacer`], `downlink_pacer.rs`): backend messages are drained once
//!   per 20 ms tick from a bounded channel; PCM is queued, cut into 20 ms frames and
//!   Opus-encoded one per tick; an empty queue sends nothing.
//!
//! Frames leave with `try_send`, so a slow backend costs dropped frames (counted), never a
//! blocked loop. [`AudioBridge`] holds the two directions and the outbox, attaches and detaches
//! owners, and turns the session's events into events for its subscribers.

mod codec;
mod downlink_pacer;
mod frame;
mod held_uplink;
mod opus_queue;
mod outbox;
mod owner_uplink;
mod pending_clears;
mod reply_onset;
mod tick_grid;
mod uplink_decoder;
mod wall_clock;

pub use codec::{
    valid_sample_rate, BridgeError, EncoderChoice, EncoderSettings, OpusApplication, StartedTalking,
};
pub use downlink_pacer::{BridgeAction, QueuedDownlink};
use downlink_pacer::{DownlinkOwner, DownlinkPacer};
pub use frame::{FRAME, RTP_TICKS_PER_FRAME};
pub use held_uplink::{HELD_AUDIO_PACKETS, HELD_DATA_BYTES, HELD_DATA_MESSAGES};
use outbox::Outbox;
pub use outbox::TapSubscriber;
pub use owner_uplink::{
    ChannelTx, CloseReason, MuxLink, MuxReceiver, OwnerUplink, Refused, UPLINK_AUDIO_SLOTS,
    UPLINK_CONTROL_RESERVE, UPLINK_QUEUE,
};
pub use pending_clears::PendingClears;
pub use reply_onset::{ReplyOnset, LOUD_DBFS, QUIET_BEFORE_ONSET};
pub use tick_grid::{CoarseTicks, TickGrid};
use uplink_decoder::UplinkDecoder;
use wall_clock::WallClock;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use voxgate_proto::bridge::{
    session_event, uplink, AudioMode, Quality, QualitySummary, SessionEvent, Uplink,
};

use crate::metrics::{BridgeCounters, HandoffHistogram};

/// The channels that connect a session to its owning backend stream.
pub struct OwnerEndpoints {
    pub uplink: OwnerUplink,
    pub downlink: mpsc::Receiver<QueuedDownlink>,
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

pub struct AudioBridge {
    session_id: String,
    uplink: UplinkDecoder,
    downlink: DownlinkPacer,
    /// The owner's uplink and the taps: where both directions' messages go.
    out: Outbox,
    /// `owner_id` of the latest owner (kept after it is dropped, for the loss report).
    last_owner_id: u64,
    /// When media started flowing, and when the caller's data channel opened (wall clock, µs):
    /// told at once, with these times, to an owner or tap that comes later.
    connected_at: Option<i64>,
    channel_open_at: Option<i64>,
    /// The time base of every stamp the backends get (see `wall_clock`).
    clock: WallClock,
    /// The call the session carries and its generation in it, told to each owner in ATTACHED.
    call_id: String,
    generation: u32,
}

impl AudioBridge {
    pub fn new(session_id: String, encoder_settings: EncoderSettings) -> Self {
        let clock = WallClock::now();
        AudioBridge {
            downlink: DownlinkPacer::new(&session_id, encoder_settings, clock),
            uplink: UplinkDecoder::new(clock),
            out: Outbox::default(),
            session_id,
            last_owner_id: 0,
            connected_at: None,
            channel_open_at: None,
            clock,
            call_id: String::new(),
            generation: 1,
        }
    }

    /// The call this session carries (its own id for a new call) and its generation in it.
    pub fn set_call(&mut self, call_id: String, generation: u32) {
        self.call_id = call_id;
        self.generation = generation;
    }

    /// Every direction's counts so far.
    pub fn counters(&self) -> BridgeCounters {
        let mut c = *self.uplink.counters();
        c.add(self.downlink.counters());
        c.add(self.out.counters());
        c
    }

    /// The hand-off latencies observed since the last call.
    pub fn take_handoff(&mut self) -> HandoffHistogram {
        self.uplink.take_handoff()
    }

    /// Whether the owner's backend has just played its first PCM frame (once per owner).
    pub fn take_started_talking(&mut self) -> Option<StartedTalking> {
        self.downlink.take_started_talking()
    }

    /// The `owner_id` of the latest owner, live or lost.
    pub fn last_owner_id(&self) -> u64 {
        self.last_owner_id
    }

    pub fn has_owner(&self) -> bool {
        self.out.has_owner()
    }

    /// Drops an owner whose streams are closed (its backend died but no tick noticed yet), so
    /// a new owner can attach at once. Returns whether a live owner remains.
    pub fn has_live_owner(&mut self) -> bool {
        if self.out.owner_is_closed() || self.downlink.owner_is_closed() {
            self.detach_owner(CloseReason::Released);
        }
        self.out.has_owner()
    }

    pub fn tap_count(&self) -> usize {
        self.out.tap_count()
    }

    /// Taps whose subscriber is still there (gone ones are dropped first, so a client that
    /// hangs up its taps can open new ones).
    pub fn live_tap_count(&mut self) -> usize {
        self.out.live_tap_count()
    }

    /// Picks the grid the next owner's ticks fall on, from its audio mode, the size of the
    /// loop that holds this session and the loop's coarse-tick setting (see
    /// [`TickGrid::for_owner`]). Call before [`AudioBridge::attach_owner`]; without it the
    /// session ticks on its fine grid.
    pub fn choose_tick_grid(&mut self, mode: AudioMode, loop_sessions: usize, coarse: CoarseTicks) {
        self.downlink
            .choose_tick_grid(&self.session_id, mode, loop_sessions, coarse);
    }

    /// Makes `endpoints` the session's owner. The caller checked there was none. Nothing
    /// changes if the owner's codecs cannot be built.
    pub fn attach_owner(
        &mut self,
        endpoints: OwnerEndpoints,
        now: Instant,
        metadata: &HashMap<String, String>,
    ) -> Result<(), BridgeError> {
        let rate = valid_sample_rate(endpoints.sample_rate)?;
        let mode = endpoints.mode;
        // (Re)build codecs at the owner's rate; a new owner may ask for another rate.
        let decoder = self.uplink.decoder_for(rate, mode)?;
        let encoder = self.downlink.encoder_for(rate, mode, endpoints.encoder)?;
        self.uplink.attach(rate, mode, decoder);
        let progress_ms = (endpoints.progress_interval.as_millis() as u64).max(20);
        self.downlink.attach(
            DownlinkOwner {
                downlink: endpoints.downlink,
                clears: endpoints.clears,
                mode,
                rate,
                progress_interval_samples: progress_ms * u64::from(rate) / 1000,
                encoder,
            },
            now,
        );
        self.out.attach(endpoints.uplink, endpoints.stall_after);
        self.last_owner_id = endpoints.owner_id;
        let at = self.clock.unix_micros(now);
        let mut attached = event(session_event::Kind::Attached, "", self.id(at), metadata);
        if let Some(uplink::Kind::Event(e)) = &mut attached.kind {
            e.call_id = if self.call_id.is_empty() {
                self.session_id.clone()
            } else {
                self.call_id.clone()
            };
            e.generation = self.generation;
        }
        self.out.send_owner(attached);
        for ev in self.past_events().into_iter().flatten() {
            self.out.send_owner(ev);
        }
        self.uplink.replay_held(&mut self.out);
        Ok(())
    }

    /// The events that happened already, in the order they happened, with their own times:
    /// what a newcomer (owner or tap) is told first.
    fn past_events(&self) -> [Option<Uplink>; 2] {
        let past = [
            (self.connected_at, session_event::Kind::Connected),
            (self.channel_open_at, session_event::Kind::DataChannelOpen),
        ];
        past.map(|(at, kind)| at.map(|at| event(kind, "", self.id(at), &HashMap::new())))
    }

    /// A listen-only subscriber (`downlink`: it also hears what is sent to the caller). It is
    /// told the past events first; its queue is new, so they fit.
    pub fn add_tap(&mut self, tap: TapSubscriber) -> Result<(), BridgeError> {
        self.uplink.ensure_decoder()?;
        for ev in self.past_events().into_iter().flatten() {
            let _ = owner_uplink::offer_bounded(&tap.tx, ev);
        }
        self.out.add_tap(tap);
        Ok(())
    }

    /// The session id with an event time, for [`event`].
    fn id(&self, at: i64) -> EventOf<'_> {
        EventOf {
            session_id: &self.session_id,
            at,
        }
    }

    /// Checked on each tick: an owner whose uplink queue has stayed full (of audio) for its
    /// stall time is stuck (a frozen process, or a dead connection not yet noticed). It is
    /// dropped, which ends its stream, and the caller reports the owner lost so the session is
    /// dispatched again.
    pub fn owner_stalled(&mut self, now: Instant) -> bool {
        if !self.out.owner_stalled(now) {
            return false;
        }
        self.detach_owner(CloseReason::Stalled);
        true
    }

    /// Drops the owner (its uplink ends, saying `why` to a `Multiplex` channel) and what it
    /// had queued for the caller.
    pub fn detach_owner(&mut self, why: CloseReason) {
        self.out.detach(why);
        self.downlink.detach();
        self.uplink.detach();
    }

    /// Media is flowing: tell subscribers and start the downlink clock.
    pub fn on_connected(&mut self, now: Instant) {
        let at = self.clock.unix_micros(now);
        self.connected_at = Some(at);
        let ev = event(
            session_event::Kind::Connected,
            "",
            self.id(at),
            &HashMap::new(),
        );
        self.out.broadcast(ev);
        self.downlink.on_connected(now);
    }

    pub fn on_channel_open(&mut self, now: Instant) {
        let at = self.clock.unix_micros(now);
        self.channel_open_at = Some(at);
        let kind = session_event::Kind::DataChannelOpen;
        let ev = event(kind, "", self.id(at), &HashMap::new());
        self.out.broadcast(ev);
    }

    /// The caller's network quality of the last few seconds, for the owner and taps.
    /// A turn's mouth-to-ear split, to the owner and every tap.
    pub fn on_turn(&mut self, turn: voxgate_proto::bridge::TurnLatency) {
        self.out.broadcast(Uplink {
            kind: Some(uplink::Kind::Turn(turn)),
        });
    }

    pub fn on_quality(&mut self, quality: Quality) {
        self.out.broadcast(Uplink {
            kind: Some(uplink::Kind::Quality(Box::new(quality))),
        });
    }

    /// The session ended: a last event to everyone (with the call's quality as a whole), then
    /// the channels close.
    pub fn on_ended(&mut self, now: Instant, reason: &str, quality: Option<QualitySummary>) {
        let at = self.clock.unix_micros(now);
        let kind = session_event::Kind::Ended;
        let mut ev = event(kind, reason, self.id(at), &HashMap::new());
        if let Some(uplink::Kind::Event(e)) = &mut ev.kind {
            e.quality = quality.map(Box::new);
        }
        self.out.broadcast(ev);
        self.out.close_all();
        self.downlink.on_ended();
        self.uplink.detach();
    }

    /// A message on the caller's data channel (`label`), for the owner and taps.
    pub fn on_channel_data(&mut self, label: &str, binary: bool, data: &[u8]) {
        self.uplink
            .on_channel_data(label, binary, data, &mut self.out);
    }

    /// One received Opus packet (in order, as str0m delivers them); see
    /// [`UplinkDecoder::on_audio_packet`].
    pub fn on_audio_packet<D>(&mut self, arrival: Instant, rtp_seq: u64, rtp_ts: u32, data: D)
    where
        D: AsRef<[u8]> + Send + 'static,
    {
        self.uplink
            .on_audio_packet(arrival, rtp_seq, rtp_ts, data, &mut self.out);
    }

    pub fn next_tick(&self) -> Option<Instant> {
        self.downlink.next_tick()
    }

    /// The caller paused (or speaks again): the downlink looks for the reply's onset (or
    /// stops); see `reply_onset`.
    pub fn watch_for_reply(&mut self, now: Instant, watch: bool) {
        if watch {
            self.downlink.watch_for_reply(now);
        } else {
            self.downlink.stop_watching_for_reply();
        }
    }

    pub fn take_reply_onset(&mut self) -> Option<ReplyOnset> {
        self.downlink.take_reply_onset()
    }

    /// Drains backend messages; returns the next one the session must act on.
    pub fn poll_downlink(&mut self) -> Option<BridgeAction> {
        let action = self.downlink.poll_downlink(&mut self.out);
        if matches!(action, Some(BridgeAction::OwnerLost)) {
            // The pacer let the owner's downlink go; its uplink goes too.
            self.out.detach(CloseReason::Released);
            self.uplink.detach();
        }
        action
    }

    /// The 20 ms downlink tick: returns the next Opus packet to send as RTP (with its RTP
    /// timestamp), or `None` when nothing is queued. Call at `next_tick()`.
    pub fn tick(&mut self, now: Instant) -> Option<(&[u8], u32)> {
        let connected = self.connected_at.is_some();
        self.downlink.tick(now, connected, &mut self.out)
    }
}

/// Whose event and when (wall clock, µs).
struct EventOf<'a> {
    session_id: &'a str,
    at: i64,
}

fn event(
    kind: session_event::Kind,
    reason: &str,
    of: EventOf<'_>,
    metadata: &HashMap<String, String>,
) -> Uplink {
    Uplink {
        kind: Some(uplink::Kind::Event(SessionEvent {
            kind: kind as i32,
            reason: reason.to_string(),
            session_id: of.session_id.to_string(),
            metadata: metadata.clone(),
            quality: None,
            at_unix_micros: of.at,
            ..SessionEvent::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::frame::MAX_OPUS_PACKET;
    use super::*;
    use voxgate_proto::bridge::{data_message, downlink, AudioFrame, DataMessage, Downlink};

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
        mpsc::Sender<QueuedDownlink>,
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
        downlink: mpsc::Receiver<QueuedDownlink>,
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
        b.downlink.send_progress(&mut b.out);
        assert_eq!(b.counters().uplink_dropped, 35);
        // What must not be lost still gets in: an event, the caller's text, a clear's answer.
        b.on_channel_open(now);
        b.on_channel_data("chat", false, b"stop talking");
        down_tx
            .try_send(
                Downlink {
                    kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
                }
                .into(),
            )
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
            down.try_send(second().into()).unwrap();
            while b.poll_downlink().is_some() {}
        }
        for _ in 0..7 {
            down.try_send(second().into()).unwrap();
        }
        assert!(b.poll_downlink().is_none());
        assert_eq!(down.capacity(), 1, "the channel is full of audio");
        // The edge announces the clear before it waits for room; the bridge drops the audio
        // ahead of it, which makes that room, and takes the clear.
        clears.announce();
        while b.poll_downlink().is_some() {}
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
            }
            .into(),
        )
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
        down.try_send(second().into()).unwrap();
        while b.poll_downlink().is_some() {}
        let t = b.next_tick().unwrap();
        assert!(b.tick(t).is_some());
    }

    #[test]
    fn scratch_buffers_are_allocated_on_first_use_at_the_owners_frame_size() {
        let now = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        // A session no backend owns carries no codec buffers (memory per idle session).
        assert_eq!(b.uplink.decode_buf.capacity(), 0);
        assert_eq!(b.downlink.encode_buf.capacity(), 0);
        assert_eq!(b.downlink.frame_buf.capacity(), 0);
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
            b.uplink.decode_buf.len(),
            320,
            "one 20 ms frame at 16 kHz, not 120 ms at 48"
        );
        // 50 ms of backend audio: two whole frames and a tail padded with silence.
        let pcm: Vec<u8> = (0..800).flat_map(|_| 1000i16.to_le_bytes()).collect();
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                    pcm: pcm.into(),
                    item_id: String::new(),
                })),
            }
            .into(),
        )
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
        assert_eq!(b.downlink.frame_buf.len(), 320);
        assert_eq!(b.downlink.encode_buf.len(), MAX_OPUS_PACKET);
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
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                    pcm: pcm.into(),
                    item_id: "item-1".into(),
                })),
            }
            .into(),
        )
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
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
            }
            .into(),
        )
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
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                    pcm: pcm.into(),
                    item_id: "item".into(),
                })),
            }
            .into(),
        )
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

    fn subscriber(tx: mpsc::Sender<Uplink>, downlink: bool) -> TapSubscriber {
        TapSubscriber { tx, downlink }
    }

    fn chunk(samples: usize, value: i16, item: &str) -> Downlink {
        let pcm: Vec<u8> = (0..samples).flat_map(|_| value.to_le_bytes()).collect();
        Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: pcm.into(),
                item_id: item.into(),
            })),
        }
    }

    #[test]
    fn a_reply_onset_counts_from_when_its_audio_was_queued_not_from_the_tick_that_drained_it() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (ep, _up, down) = owner(16_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        b.on_connected(t0);
        // The caller paused: the watch arms; the downlink stays quiet for 200 ms.
        let armed = b.next_tick().unwrap();
        b.watch_for_reply(armed, true);
        let mut t = armed;
        while t < armed + Duration::from_millis(200) {
            while b.poll_downlink().is_some() {}
            assert!(b.tick(t).is_none());
            t = b.next_tick().unwrap();
        }
        // The reply entered the queue 13 ms before the tick that drains and sends it.
        let queued_at = t - Duration::from_millis(13);
        let reply = QueuedDownlink {
            queued_at,
            msg: chunk(1_600, 3_000, "reply"),
        };
        down.try_send(reply).unwrap();
        while b.poll_downlink().is_some() {}
        assert!(b.tick(t).is_some());
        let onset = b.take_reply_onset().expect("the reply's first loud frame");
        assert_eq!(
            onset.queued_at, queued_at,
            "the queue's stamp, not the drain"
        );
        assert_eq!(onset.sent_at, t);
        assert!(b.take_reply_onset().is_none(), "one onset per turn");
    }

    #[test]
    fn a_downlink_tap_hears_each_frame_sent_with_its_time_and_the_clear_and_others_do_not() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (ep, mut up, down) = owner(16_000);
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        b.on_connected(t0);
        // A recorder (downlink) and a listener (uplink only), both after the connect.
        let (rec_tx, mut rec) = mpsc::channel(64);
        let (lis_tx, mut lis) = mpsc::channel(64);
        b.add_tap(subscriber(rec_tx, true)).unwrap();
        b.add_tap(subscriber(lis_tx, false)).unwrap();
        // 50 ms of the backend's audio (two frames and a padded tail), then silence, then a
        // clear of a second item while it plays.
        down.try_send(chunk(800, 1000, "a").into()).unwrap();
        let mut sent = Vec::new();
        for _ in 0..6 {
            let t = b.next_tick().unwrap();
            while b.poll_downlink().is_some() {}
            if let Some((_, ts)) = b.tick(t) {
                sent.push((t, ts));
            }
        }
        down.try_send(chunk(16_000, -500, "b").into()).unwrap();
        for _ in 0..2 {
            let t = b.next_tick().unwrap();
            while b.poll_downlink().is_some() {}
            sent.extend(b.tick(t).map(|(_, ts)| (t, ts)));
        }
        down.try_send(
            Downlink {
                kind: Some(downlink::Kind::Clear(voxgate_proto::bridge::Clear {})),
            }
            .into(),
        )
        .unwrap();
        let t = b.next_tick().unwrap();
        while b.poll_downlink().is_some() {}
        assert!(b.tick(t).is_none());
        assert_eq!(sent.len(), 5, "three frames of a, two of b");

        let got: Vec<Uplink> = std::iter::from_fn(|| rec.try_recv().ok()).collect();
        let connected_at = match &got[0].kind {
            Some(uplink::Kind::Event(e)) => {
                assert_eq!(e.kind(), session_event::Kind::Connected, "told first");
                e.at_unix_micros
            }
            other => panic!("{other:?}"),
        };
        let frames: Vec<&voxgate_proto::bridge::SentAudio> = got
            .iter()
            .filter_map(|m| match &m.kind {
                Some(uplink::Kind::Sent(f)) => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!(frames.len(), 5);
        let clock = b.clock;
        for (f, (t, ts)) in frames.iter().zip(&sent) {
            assert_eq!(f.rtp_timestamp, *ts);
            assert_eq!(f.sent_unix_micros, clock.unix_micros(*t));
            assert_eq!((f.sample_rate_hz, f.pcm.len()), (16_000, 640));
            assert!(f.opus.is_empty());
        }
        // The connect happened at t0, before any tick: its time is its own, not the tap's.
        assert_eq!(connected_at, clock.unix_micros(t0));
        let items: Vec<&str> = frames.iter().map(|f| f.item_id.as_str()).collect();
        assert_eq!(items, ["a", "a", "a", "b", "b"]);
        let first = i16::from_le_bytes([frames[0].pcm[0], frames[0].pcm[1]]);
        let tail = &frames[2].pcm;
        assert_eq!(first, 1000, "the PCM that was encoded");
        assert_eq!(&tail[tail.len() - 2..], &[0, 0], "the padded tail as sent");
        // Silence between a and b: the RTP clock ran on (3 ticks of nothing).
        assert_eq!(frames[3].rtp_timestamp - frames[2].rtp_timestamp, 4 * 960);
        let cleared = got.iter().find_map(|m| match &m.kind {
            Some(uplink::Kind::Cleared(c)) => Some(c.clone()),
            _ => None,
        });
        let cleared = cleared.expect("the recorder hears the clear");
        assert_eq!(
            (cleared.item_id.as_str(), cleared.item_played_ms),
            ("b", 40)
        );
        // The owner heard the same clear; the uplink-only tap none of the downlink.
        assert!(std::iter::from_fn(|| up.try_recv().ok())
            .any(|m| matches!(m.kind, Some(uplink::Kind::Cleared(_)))));
        let heard: Vec<Uplink> = std::iter::from_fn(|| lis.try_recv().ok()).collect();
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert!(matches!(heard[0].kind, Some(uplink::Kind::Event(_))));
        assert_eq!(b.counters().tap_dropped, 0);
    }

    #[test]
    fn a_passthrough_owners_packets_reach_a_downlink_tap_as_sent_and_a_full_tap_costs_frames() {
        let t0 = Instant::now();
        let mut b = AudioBridge::new("s".into(), SETTINGS);
        let (mut ep, _up, down) = owner(48_000);
        ep.mode = AudioMode::OpusPassthrough;
        b.attach_owner(ep, t0, &Default::default()).unwrap();
        b.on_connected(t0);
        let (rec_tx, mut rec) = mpsc::channel(3);
        b.add_tap(subscriber(rec_tx, true)).unwrap();
        let packets = opus_frames(4);
        for p in &packets {
            let msg = voxgate_proto::bridge::OpusPacket {
                data: p.clone().into(),
                ..Default::default()
            };
            down.try_send(
                Downlink {
                    kind: Some(downlink::Kind::Opus(msg)),
                }
                .into(),
            )
            .unwrap();
        }
        for _ in 0..4 {
            let t = b.next_tick().unwrap();
            while b.poll_downlink().is_some() {}
            assert!(b.tick(t).is_some());
        }
        let got: Vec<Uplink> = std::iter::from_fn(|| rec.try_recv().ok()).collect();
        let sent: Vec<_> = got
            .iter()
            .filter_map(|m| match &m.kind {
                Some(uplink::Kind::Sent(f)) => Some(f),
                _ => None,
            })
            .collect();
        // CONNECTED took one of the three slots; two frames fit, two were dropped.
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].opus.as_ref(), packets[0].as_slice());
        assert!(sent[0].pcm.is_empty());
        assert_eq!(sent[0].sample_rate_hz, 48_000);
        assert_eq!(b.counters().tap_dropped, 2);
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
        b.on_channel_open(t0);
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
        b.add_tap(subscriber(tap_tx, false)).unwrap();
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
