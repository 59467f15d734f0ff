//! What a client hears: received Opus frames decoded to PCM, with the numbers tests check.
//!
//! Keeps, per session: packet and frame counters, sequence gaps (downlink loss), the arrival
//! instant of each recent packet (for pacing and jitter analysis), and the most recent decoded
//! audio. Gaps of up to [`MAX_CONCEALED_GAP`] packets are filled with libopus concealment so the
//! PCM timeline stays aligned with the sender's and can be correlated against it.

use std::time::Instant;

use crate::opus_codec::OpusFrameDecoder;
use crate::tail_buffer::TailBuffer;

/// Longest gap (in packets) filled with concealed audio; longer gaps are skipped in the PCM.
pub const MAX_CONCEALED_GAP: u64 = 10;

/// Counters of the downlink, as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DownlinkCounters {
    /// RTP packets received (counted from sequence ranges, so a frame split over packets counts
    /// each packet).
    pub packets: u64,
    /// Packets missing from the sequence (gaps between consecutive frames).
    pub packets_lost: u64,
    /// Frames that decoded to PCM.
    pub frames_decoded: u64,
    /// 20 ms frames synthesised by concealment for lost packets.
    pub frames_concealed: u64,
    /// Frames libopus refused.
    pub decode_errors: u64,
    /// Frames arriving with a sequence number at or below one already seen.
    pub late_or_duplicate: u64,
}

/// Decodes and records the downlink audio of one session.
pub struct DownlinkAudio {
    decoder: Option<OpusFrameDecoder>,
    counters: DownlinkCounters,
    last_seq: Option<u64>,
    arrivals: TailBuffer<Instant>,
    pcm: TailBuffer<i16>,
    /// Frames received per Opus TOC configuration (RFC 6716 §3.1: `toc >> 3`; 0–11 SILK only,
    /// 12–15 hybrid, 16–31 CELT only): which encoder mode the sender used.
    opus_configs: [u64; 32],
}

impl DownlinkAudio {
    /// Keeps the last `arrival_cap` arrival instants and the last `pcm_cap` decoded samples.
    /// With `decode` false nothing is decoded (load generation), only counted.
    pub fn new(decode: bool, arrival_cap: usize, pcm_cap: usize) -> Result<Self, opus::Error> {
        Ok(DownlinkAudio {
            decoder: if decode {
                Some(OpusFrameDecoder::new()?)
            } else {
                None
            },
            counters: DownlinkCounters::default(),
            last_seq: None,
            arrivals: TailBuffer::new(arrival_cap),
            pcm: TailBuffer::new(pcm_cap),
            opus_configs: [0; 32],
        })
    }

    /// Records one received frame: `first_seq..=last_seq` are its (extended, 64-bit) RTP
    /// sequence numbers, `arrival` when its last packet came off the network.
    pub fn on_frame(&mut self, arrival: Instant, first_seq: u64, last_seq: u64, payload: &[u8]) {
        let last_seq = last_seq.max(first_seq);
        self.counters.packets += last_seq - first_seq + 1;
        self.arrivals.push(arrival);
        if let Some(toc) = payload.first() {
            self.opus_configs[usize::from(toc >> 3)] += 1;
        }

        let mut gap = 0;
        match self.last_seq {
            Some(prev) if first_seq <= prev => {
                self.counters.late_or_duplicate += 1;
                return;
            }
            Some(prev) => gap = first_seq - prev - 1,
            None => {}
        }
        self.last_seq = Some(last_seq);
        self.counters.packets_lost += gap;

        let Some(decoder) = self.decoder.as_mut() else {
            return;
        };
        if gap > 0 && gap <= MAX_CONCEALED_GAP {
            for _ in 0..gap {
                match decoder.conceal() {
                    Ok(pcm) => {
                        self.pcm.extend_from_slice(pcm);
                        self.counters.frames_concealed += 1;
                    }
                    Err(_) => self.counters.decode_errors += 1,
                }
            }
        }
        match decoder.decode(payload) {
            Ok(pcm) => {
                self.pcm.extend_from_slice(pcm);
                self.counters.frames_decoded += 1;
            }
            Err(_) => self.counters.decode_errors += 1,
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> DownlinkCounters {
        self.counters
    }

    /// Frames received per Opus TOC configuration (index `toc >> 3`).
    pub fn opus_configs(&self) -> [u64; 32] {
        self.opus_configs
    }

    /// Arrival instants of the most recent packets, oldest first.
    pub fn arrival_times(&self) -> &[Instant] {
        self.arrivals.as_slice()
    }

    /// The most recent decoded audio (48 kHz mono), oldest first.
    pub fn pcm(&self) -> &[i16] {
        self.pcm.as_slice()
    }
}

#[cfg(test)]
mod tests;
