//! The caller's uplink held while no backend owns the session, replayed when one attaches.
//!
//! A caller's media and data channel are up within tens of milliseconds of the answer, and a
//! backend attaches when dispatch reaches it: on a busy machine the caller's first words, or
//! the message its app sends as soon as the channel opens, can arrive first. The same happens
//! between two owners, after one is lost and before the next attaches. Without a hold those
//! were dropped, so a backend missed the start of the utterance and the app's opening message.
//!
//! The hold is bounded on every side: the newest second of audio (older packets make room and
//! are counted), and up to [`HELD_DATA_MESSAGES`] data messages of [`HELD_DATA_BYTES`] in all
//! (later ones are refused and counted: the first messages are usually the app's setup).
//! Sans-IO: the bridge holds, takes and replays; this type only keeps order and bounds.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use voxgate_proto::bridge::DataMessage;

use super::owner_uplink::{UPLINK_CONTROL_RESERVE, UPLINK_QUEUE};

/// Audio packets held: one second of 20 ms packets.
pub const HELD_AUDIO_PACKETS: usize = 50;
/// Data messages held.
pub const HELD_DATA_MESSAGES: usize = 32;
/// Payload bytes of the held data messages, in all.
pub const HELD_DATA_BYTES: usize = 64 * 1024;

// The replay goes into a new owner's empty uplink queue with `try_send`, behind at most three
// events (ATTACHED, CONNECTED, DATA_CHANNEL_OPEN): it must fit whole, with audio kept out of the
// control reserve even when every held message comes before it.
const _: () =
    assert!(3 + HELD_DATA_MESSAGES + HELD_AUDIO_PACKETS + UPLINK_CONTROL_RESERVE <= UPLINK_QUEUE);

/// One Opus packet as it came from the caller.
#[derive(Debug, Clone)]
pub struct HeldPacket {
    pub arrival: Instant,
    pub rtp_seq: u64,
    pub rtp_ts: u32,
    pub data: Bytes,
}

#[derive(Debug, Clone)]
pub enum Held {
    Audio(HeldPacket),
    Data(DataMessage),
}

/// What the caller sent while the session had no owner, in arrival order.
#[derive(Debug, Default)]
pub struct HeldUplink {
    items: VecDeque<Held>,
    audio: usize,
    data: usize,
    data_bytes: usize,
}

impl HeldUplink {
    /// Holds `packet`; when a second of audio is already held, the oldest packet makes room.
    /// Returns how many items were dropped (0 or 1).
    pub fn hold_audio(&mut self, packet: HeldPacket) -> u64 {
        let mut dropped = 0;
        if self.audio == HELD_AUDIO_PACKETS {
            if let Some(i) = self.items.iter().position(|h| matches!(h, Held::Audio(_))) {
                self.items.remove(i);
                self.audio -= 1;
                dropped = 1;
            }
        }
        self.items.push_back(Held::Audio(packet));
        self.audio += 1;
        dropped
    }

    /// Holds `message` (of `len` payload bytes) if there is room. Returns whether it was held.
    pub fn hold_data(&mut self, message: DataMessage, len: usize) -> bool {
        if self.data == HELD_DATA_MESSAGES || self.data_bytes + len > HELD_DATA_BYTES {
            return false;
        }
        self.items.push_back(Held::Data(message));
        self.data += 1;
        self.data_bytes += len;
        true
    }

    /// Everything held, oldest first; the hold is empty afterwards.
    pub fn take(&mut self) -> VecDeque<Held> {
        self.audio = 0;
        self.data = 0;
        self.data_bytes = 0;
        std::mem::take(&mut self.items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxgate_proto::bridge::data_message;

    fn packet(seq: u64) -> HeldPacket {
        HeldPacket {
            arrival: Instant::now(),
            rtp_seq: seq,
            rtp_ts: seq as u32 * 960,
            data: Bytes::from_static(b"opus"),
        }
    }

    fn text(s: &str) -> DataMessage {
        DataMessage {
            label: "chat".into(),
            payload: Some(data_message::Payload::Text(s.into())),
        }
    }

    fn seqs_and_texts(items: &VecDeque<Held>) -> Vec<String> {
        items
            .iter()
            .map(|h| match h {
                Held::Audio(p) => p.rtp_seq.to_string(),
                Held::Data(DataMessage {
                    payload: Some(data_message::Payload::Text(t)),
                    ..
                }) => t.clone(),
                Held::Data(_) => "?".into(),
            })
            .collect()
    }

    #[test]
    fn audio_and_data_come_back_in_arrival_order() {
        let mut h = HeldUplink::default();
        assert_eq!(h.hold_audio(packet(1)), 0);
        assert!(h.hold_data(text("hello"), 5));
        assert_eq!(h.hold_audio(packet(2)), 0);
        let items = h.take();
        assert_eq!(seqs_and_texts(&items), ["1", "hello", "2"]);
        assert!(h.take().is_empty(), "taking empties the hold");
    }

    #[test]
    fn past_a_second_of_audio_the_oldest_packet_makes_room() {
        let mut h = HeldUplink::default();
        assert!(h.hold_data(text("first"), 5));
        let dropped: u64 = (0..HELD_AUDIO_PACKETS as u64 + 10)
            .map(|s| h.hold_audio(packet(s)))
            .sum();
        assert_eq!(dropped, 10);
        let items = h.take();
        assert_eq!(items.len(), HELD_AUDIO_PACKETS + 1);
        let order = seqs_and_texts(&items);
        assert_eq!(order[0], "first", "data is not what makes room for audio");
        assert_eq!(order[1], "10", "the ten oldest packets went");
        assert_eq!(order.last().unwrap(), &(HELD_AUDIO_PACKETS + 9).to_string());
    }

    #[test]
    fn data_past_the_count_or_byte_bound_is_refused_and_the_hold_refills_after_take() {
        let mut h = HeldUplink::default();
        for i in 0..HELD_DATA_MESSAGES {
            assert!(h.hold_data(text(&i.to_string()), 1));
        }
        assert!(!h.hold_data(text("one too many"), 1));
        assert_eq!(h.take().len(), HELD_DATA_MESSAGES);

        assert!(h.hold_data(text("big"), HELD_DATA_BYTES - 10));
        assert!(!h.hold_data(text("over the bytes"), 11));
        assert!(h.hold_data(text("fits"), 10));
        assert_eq!(seqs_and_texts(&h.take()), ["big", "fits"]);
    }
}
