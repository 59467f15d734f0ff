//! Uplink: the caller's Opus packets → 20 ms PCM frames (or Opus passthrough) for the owner and
//! taps, with FEC/PLC filling short gaps and the socket-to-queue hand-off time measured.
//!
//! Per packet: one decode into the bridge's reusable buffer and one `Bytes` for the frame the
//! backends receive; frames leave with `try_send`, never blocking the loop.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use voxgate_proto::bridge::{
    data_message, uplink, AudioFrame, AudioMode, DataMessage, OpusPacket, Uplink,
};

use super::held_uplink::{Held, HeldPacket};
use super::{AudioBridge, RTP_TICKS_PER_FRAME};

/// Longest run of lost packets filled with concealment; a longer gap is a discontinuity.
const MAX_CONCEALED_RUN: u64 = 5;

/// Who hears an uplink message: everyone live, or only a new owner catching up on what was
/// held for it (taps heard those live already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Audience {
    All,
    OwnerOnly,
}

impl AudioBridge {
    pub fn on_channel_data(&mut self, label: &str, binary: bool, data: &[u8]) {
        let payload = if binary {
            data_message::Payload::Binary(Bytes::copy_from_slice(data))
        } else {
            data_message::Payload::Text(String::from_utf8_lossy(data).into_owned())
        };
        let message = DataMessage {
            label: label.to_string(),
            payload: Some(payload),
        };
        if self.owner.is_none() {
            // Held for the owner to come (see `held_uplink`); taps hear it now.
            if self.held.hold_data(message.clone(), data.len()) {
                self.counters.uplink_held += 1;
            } else {
                self.counters.uplink_held_dropped += 1;
            }
            if self.taps.is_empty() {
                return;
            }
        }
        let msg = Uplink {
            kind: Some(uplink::Kind::Data(message)),
        };
        self.send(Audience::All, msg);
    }

    /// One received Opus packet (in order, as str0m delivers them). Taken by value: in
    /// passthrough str0m's buffer becomes the message's `Bytes` without a copy.
    pub fn on_audio_packet<D>(&mut self, arrival: Instant, rtp_seq: u64, rtp_ts: u32, data: D)
    where
        D: AsRef<[u8]> + Send + 'static,
    {
        let gap = match self.last_rtp_seq {
            Some(last) if rtp_seq > last + 1 => rtp_seq - last - 1,
            Some(last) if rtp_seq <= last => return, // duplicate or stale
            _ => 0,
        };
        self.last_rtp_seq = Some(rtp_seq);
        if self.owner.is_none() {
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
            if !self.taps.is_empty() {
                self.deliver_packet(Audience::All, arrival, gap, rtp_seq, rtp_ts, data);
            }
            return;
        }
        self.deliver_packet(Audience::All, arrival, gap, rtp_seq, rtp_ts, data);
    }

    /// Replays what was held while there was no owner to the owner that just attached, in
    /// arrival order, with each packet's own arrival time. Not counted as hand-off latency:
    /// that measures the live path.
    pub(super) fn replay_held(&mut self) {
        let mut last_seq = None;
        for item in self.held.take() {
            match item {
                Held::Audio(p) => {
                    // Held packets are consecutive but for the network's own losses (the hold
                    // drops only its oldest), so a gap here is a real one to conceal.
                    let gap = last_seq.map_or(0, |l: u64| p.rtp_seq.saturating_sub(l + 1));
                    last_seq = Some(p.rtp_seq);
                    self.deliver_packet(
                        Audience::OwnerOnly,
                        p.arrival,
                        gap,
                        p.rtp_seq,
                        p.rtp_ts,
                        p.data,
                    );
                }
                Held::Data(message) => self.send_owner(Uplink {
                    kind: Some(uplink::Kind::Data(message)),
                }),
            }
        }
    }

    /// Hands one packet (after `gap` lost ones) to `audience`: as Opus to a passthrough owner,
    /// else decoded to PCM with the gap concealed. Live packets (`Audience::All`) are timed
    /// from socket arrival for the hand-off histogram.
    fn deliver_packet<D>(
        &mut self,
        audience: Audience,
        arrival: Instant,
        gap: u64,
        rtp_seq: u64,
        rtp_ts: u32,
        data: D,
    ) where
        D: AsRef<[u8]> + Send + 'static,
    {
        let arrival_us = self.clock.unix_micros(arrival);
        let passthrough = self
            .owner
            .as_ref()
            .is_some_and(|o| o.mode == AudioMode::OpusPassthrough);
        if passthrough {
            let msg = Uplink {
                kind: Some(uplink::Kind::Opus(OpusPacket {
                    data: Bytes::from_owner(data),
                    rtp_sequence: rtp_seq as u32 & 0xffff,
                    rtp_timestamp: rtp_ts,
                    arrival_unix_micros: arrival_us,
                })),
            };
            self.send(audience, msg);
        } else {
            if gap > 0 && gap <= MAX_CONCEALED_RUN {
                for k in 0..gap {
                    let ts = rtp_ts.wrapping_sub(((gap - k) as u32) * RTP_TICKS_PER_FRAME);
                    // The frame just before this packet can be recovered from its in-band FEC;
                    // earlier ones are synthesized by PLC.
                    let fec = k + 1 == gap;
                    let packet = if fec { data.as_ref() } else { &[] };
                    self.decode_and_send(audience, packet, fec, ts, arrival_us, true);
                }
            }
            self.decode_and_send(audience, data.as_ref(), false, rtp_ts, arrival_us, false);
        }
        if audience == Audience::All {
            // Socket arrival → frame queued for the backends (the media-latency target).
            self.handoff.observe(arrival.elapsed().as_micros() as u64);
        }
    }

    fn decode_and_send(
        &mut self,
        audience: Audience,
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
        let out = Self::scratch(&mut self.decode_buf, frame);
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
        self.send(audience, msg);
    }
}
