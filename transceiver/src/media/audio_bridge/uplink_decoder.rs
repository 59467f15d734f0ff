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

use super::{AudioBridge, RTP_TICKS_PER_FRAME};

/// Longest run of lost packets filled with concealment; a longer gap is a discontinuity.
const MAX_CONCEALED_RUN: u64 = 5;

impl AudioBridge {
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
                    data: Bytes::from_owner(data),
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
                let packet = if fec { data.as_ref() } else { &[] };
                self.decode_and_send(packet, fec, ts, arrival_us, true);
            }
        }
        self.decode_and_send(data.as_ref(), false, rtp_ts, arrival_us, false);
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
}
