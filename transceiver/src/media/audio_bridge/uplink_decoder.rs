//! Uplink: the caller's Opus packets → 20 ms PCM frames (or Opus passthrough) for the owner and
//! taps, with FEC/PLC filling short gaps and the socket-to-queue hand-off time measured; the
//! caller's data-channel messages beside them; what the caller sent while no backend owned the
//! session held for the next owner (see `held_uplink`).
//!
//! Per packet: one decode into a reusable buffer and one `Bytes` for the frame the backends
//! receive; frames leave through the bridge's [`Outbox`] with `try_send`, never blocking the
//! loop.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use voxgate_proto::bridge::{
    data_message, uplink, AudioFrame, AudioMode, DataMessage, OpusPacket, Uplink,
};

use super::codec::BridgeError;
use super::frame::{frame_samples, scratch, RTP_TICKS_PER_FRAME};
use super::held_uplink::{Held, HeldPacket, HeldUplink};
use super::outbox::{Audience, Outbox};
use super::wall_clock::WallClock;
use crate::metrics::{BridgeCounters, HandoffHistogram};

/// Longest run of lost packets filled with concealment; a longer gap is a discontinuity.
const MAX_CONCEALED_RUN: u64 = 5;

pub struct UplinkDecoder {
    /// PCM rate of the frames (the owner's; 48 kHz until one attaches).
    rate: u32,
    /// The owner takes Opus as it came (no decoding for it).
    passthrough: bool,
    decoder: Option<opus::Decoder>,
    /// One decoded frame at `rate`, allocated on first use (see `frame::scratch`).
    pub(super) decode_buf: Vec<i16>,
    last_rtp_seq: Option<u64>,
    frame_seq: u64,
    /// What the caller sent while no backend owned the session.
    held: HeldUplink,
    /// `uplink_frames`, `uplink_concealed`, `uplink_held`, `uplink_held_dropped`.
    counters: BridgeCounters,
    /// Hand-off latencies since the loop last took them.
    handoff: HandoffHistogram,
    clock: WallClock,
}

impl UplinkDecoder {
    pub fn new(clock: WallClock) -> Self {
        UplinkDecoder {
            rate: 48_000,
            passthrough: false,
            decoder: None,
            decode_buf: Vec::new(),
            last_rtp_seq: None,
            frame_seq: 0,
            held: HeldUplink::default(),
            counters: BridgeCounters::default(),
            handoff: HandoffHistogram::default(),
            clock,
        }
    }

    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// The hand-off latencies observed since the last call.
    pub fn take_handoff(&mut self) -> HandoffHistogram {
        std::mem::take(&mut self.handoff)
    }

    /// A decoder for an owner at `rate` in `mode`, if it needs a new one (a PCM owner at a rate
    /// the current decoder does not make), without changing anything yet.
    pub fn decoder_for(
        &self,
        rate: u32,
        mode: AudioMode,
    ) -> Result<Option<opus::Decoder>, BridgeError> {
        if mode == AudioMode::Pcm && (self.decoder.is_none() || rate != self.rate) {
            return Ok(Some(opus::Decoder::new(rate, opus::Channels::Mono)?));
        }
        Ok(None)
    }

    /// An owner at `rate` in `mode` attached; `decoder` is what [`UplinkDecoder::decoder_for`]
    /// made for it.
    pub fn attach(&mut self, rate: u32, mode: AudioMode, decoder: Option<opus::Decoder>) {
        if decoder.is_some() {
            self.decoder = decoder;
        }
        self.rate = rate;
        self.passthrough = mode == AudioMode::OpusPassthrough;
    }

    /// The owner is gone: until the next one, the caller's media is held.
    pub fn detach(&mut self) {
        self.passthrough = false;
    }

    /// A tap subscribes: taps hear PCM, so there must be a decoder.
    pub fn ensure_decoder(&mut self) -> Result<(), BridgeError> {
        if self.decoder.is_none() {
            self.decoder = Some(opus::Decoder::new(self.rate, opus::Channels::Mono)?);
        }
        Ok(())
    }

    /// A message on the caller's data channel (`label`).
    pub fn on_channel_data(&mut self, label: &str, binary: bool, data: &[u8], out: &mut Outbox) {
        let payload = if binary {
            data_message::Payload::Binary(Bytes::copy_from_slice(data))
        } else {
            data_message::Payload::Text(String::from_utf8_lossy(data).into_owned())
        };
        let message = DataMessage {
            label: label.to_string(),
            payload: Some(payload),
        };
        if !out.has_owner() {
            // Held for the owner to come (see `held_uplink`); taps hear it now.
            if self.held.hold_data(message.clone(), data.len()) {
                self.counters.uplink_held += 1;
            } else {
                self.counters.uplink_held_dropped += 1;
            }
            if !out.has_taps() {
                return;
            }
        }
        let msg = Uplink {
            kind: Some(uplink::Kind::Data(message)),
        };
        out.send(Audience::All, msg);
    }

    /// One received Opus packet (in order, as str0m delivers them). Taken by value: in
    /// passthrough str0m's buffer becomes the message's `Bytes` without a copy.
    pub fn on_audio_packet<D>(
        &mut self,
        arrival: Instant,
        rtp_seq: u64,
        rtp_ts: u32,
        data: D,
        out: &mut Outbox,
    ) where
        D: AsRef<[u8]> + Send + 'static,
    {
        let gap = match self.last_rtp_seq {
            Some(last) if rtp_seq > last + 1 => rtp_seq - last - 1,
            Some(last) if rtp_seq <= last => return, // duplicate or stale
            _ => 0,
        };
        self.last_rtp_seq = Some(rtp_seq);
        if !out.has_owner() {
            // Held for the owner to come (see `held_uplink`). The `Bytes` wraps str0m's
            // buffer without a copy; it is only made while no backend owns the session.
            let data = Bytes::from_owner(data);
            let packet = HeldPacket {
                arrival,
                rtp_seq,
                rtp_ts,
                data: data.clone(),
            };
            self.counters.uplink_held += 1;
            self.counters.uplink_held_dropped += self.held.hold_audio(packet);
            if out.has_taps() {
                let packet = Packet {
                    arrival,
                    gap,
                    rtp_seq,
                    rtp_ts,
                };
                self.deliver(Audience::All, packet, data, out);
            }
            return;
        }
        let packet = Packet {
            arrival,
            gap,
            rtp_seq,
            rtp_ts,
        };
        self.deliver(Audience::All, packet, data, out);
    }

    /// Replays what was held while there was no owner to the owner that just attached, in
    /// arrival order, with each packet's own arrival time. Not counted as hand-off latency:
    /// that measures the live path.
    pub fn replay_held(&mut self, out: &mut Outbox) {
        let mut last_seq = None;
        for item in self.held.take() {
            match item {
                Held::Audio(p) => {
                    // Held packets are consecutive but for the network's own losses (the hold
                    // drops only its oldest), so a gap here is a real one to conceal.
                    let gap = last_seq.map_or(0, |l: u64| p.rtp_seq.saturating_sub(l + 1));
                    last_seq = Some(p.rtp_seq);
                    let packet = Packet {
                        arrival: p.arrival,
                        gap,
                        rtp_seq: p.rtp_seq,
                        rtp_ts: p.rtp_ts,
                    };
                    self.deliver(Audience::OwnerOnly, packet, p.data, out);
                }
                Held::Data(message) => out.send_owner(Uplink {
                    kind: Some(uplink::Kind::Data(message)),
                }),
            }
        }
    }

    /// Hands one packet (after `gap` lost ones) to `audience`: as Opus to a passthrough owner,
    /// else decoded to PCM with the gap concealed. Live packets (`Audience::All`) are timed
    /// from socket arrival for the hand-off histogram.
    fn deliver<D>(&mut self, audience: Audience, p: Packet, data: D, out: &mut Outbox)
    where
        D: AsRef<[u8]> + Send + 'static,
    {
        let arrival_us = self.clock.unix_micros(p.arrival);
        if self.passthrough {
            let msg = Uplink {
                kind: Some(uplink::Kind::Opus(OpusPacket {
                    data: Bytes::from_owner(data),
                    rtp_sequence: p.rtp_seq as u32 & 0xffff,
                    rtp_timestamp: p.rtp_ts,
                    arrival_unix_micros: arrival_us,
                })),
            };
            out.send(audience, msg);
        } else {
            if p.gap > 0 && p.gap <= MAX_CONCEALED_RUN {
                for k in 0..p.gap {
                    let ts = p
                        .rtp_ts
                        .wrapping_sub(((p.gap - k) as u32) * RTP_TICKS_PER_FRAME);
                    // The frame just before this packet can be recovered from its in-band FEC;
                    // earlier ones are synthesized by PLC.
                    let fec = k + 1 == p.gap;
                    let packet = if fec { data.as_ref() } else { &[] };
                    let frame = Decode {
                        data: packet,
                        fec,
                        ts,
                        arrival_us,
                        concealed: true,
                    };
                    self.decode_and_send(audience, frame, out);
                }
            }
            let frame = Decode {
                data: data.as_ref(),
                fec: false,
                ts: p.rtp_ts,
                arrival_us,
                concealed: false,
            };
            self.decode_and_send(audience, frame, out);
        }
        if audience == Audience::All {
            // Socket arrival → frame queued for the backends (the media-latency target).
            self.handoff.observe(p.arrival.elapsed().as_micros() as u64);
        }
    }

    fn decode_and_send(&mut self, audience: Audience, d: Decode<'_>, out: &mut Outbox) {
        let frame = frame_samples(self.rate);
        let Some(decoder) = self.decoder.as_mut() else {
            return;
        };
        let pcm_out = scratch(&mut self.decode_buf, frame);
        let n = match decoder.decode(d.data, pcm_out, d.fec) {
            Ok(n) => n.min(frame),
            Err(_) => {
                // A packet libopus cannot decode is concealed like a lost one.
                match decoder.decode(&[], pcm_out, false) {
                    Ok(n) => n.min(frame),
                    Err(_) => return,
                }
            }
        };
        let concealed = d.concealed || d.data.is_empty();
        let mut pcm = BytesMut::with_capacity(n * 2);
        for s in &pcm_out[..n] {
            pcm.put_i16_le(*s);
        }
        let msg = Uplink {
            kind: Some(uplink::Kind::Audio(AudioFrame {
                sequence: self.frame_seq,
                rtp_timestamp: d.ts,
                arrival_unix_micros: d.arrival_us,
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
        out.send(audience, msg);
    }
}

/// Where a packet sits in the caller's stream.
#[derive(Debug, Clone, Copy)]
struct Packet {
    arrival: Instant,
    /// Packets lost just before it.
    gap: u64,
    rtp_seq: u64,
    rtp_ts: u32,
}

/// One frame to decode: a packet (empty: synthesize by PLC), from its FEC or not.
struct Decode<'a> {
    data: &'a [u8],
    fec: bool,
    ts: u32,
    arrival_us: i64,
    concealed: bool,
}
