//! How large a backend's messages may be, and why a message over the limit costs only its own
//! call.
//!
//! Two limits, because a `Multiplex` stream carries many calls:
//! - [`MAX_BATCH_BYTES`], the service's gRPC decoding limit: the most one gRPC message (a
//!   `MultiplexDownlink` batch, or any other request message) may have. tonic ends the stream
//!   that carried a larger one (RESOURCE_EXHAUSTED), with every channel on it: a batch that
//!   large is a broken backend, not a large answer.
//! - [`MAX_MESSAGE_BYTES`], the most one backend message (a `Downlink`: the message of a
//!   `Session` stream, the `downlink` of a `ChannelDownlink`) may have, checked after decoding
//!   ([`check_downlink`]). One over it is dropped for its call alone and counted
//!   (`reason="too_large"`); the stream and every other call on it go on. A data message that
//!   JSON escaping grew past it (a caller's text of control characters, echoed) used to end the
//!   whole `Multiplex` stream it rode, and with it every call the backend served there.
//!
//! Memory: nothing past the checks holds a message over [`MAX_MESSAGE_BYTES`], so a session's
//! downlink queue holds at most its depth (`DOWNLINK_QUEUE` plus the control reserve) times
//! that. On a `Multiplex` stream, what waits beside the sessions' queues is bounded by bytes
//! per stream (`multiplex`: messages waiting for their channel's attach, audio waiting for room
//! in its session's queue). The batch being decoded adds at most [`MAX_BATCH_BYTES`] per
//! stream, and only until its messages are handed out.
//!
//! The uplink's batches ([`MAX_UPLINK_BATCH_BYTES`]) stay well below the 4 MiB every gRPC
//! client takes by default, whatever the callers send: one caller's data-channel messages (up
//! to 256 KiB each) must not make a batch that the backend's client refuses, which would end
//! its stream with every call on it.

use prost::Message;
use voxgate_proto::bridge::{ChannelUplink, Downlink};

/// The most bytes one gRPC message to the transceiver may have (tonic's default): what a
/// `Multiplex` batch may carry.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// The most bytes one backend message (a `Downlink`) may have; a message of exactly this size
/// is taken. The backend kit and the Python SDK refuse larger ones before sending.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// The most bytes of channel messages the transceiver puts in one `MultiplexUplink` (a larger
/// single message goes alone).
pub const MAX_UPLINK_BATCH_BYTES: usize = 1 << 20;

/// A backend message over [`MAX_MESSAGE_BYTES`]: its encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {0}-byte message is over the {MAX_MESSAGE_BYTES}-byte limit on one backend message")]
pub struct TooLarge(pub usize);

/// Checks one backend message against [`MAX_MESSAGE_BYTES`] (by its encoded size, what it cost
/// on the wire).
pub fn check_downlink(d: &Downlink) -> Result<(), TooLarge> {
    match d.encoded_len() {
        n if n > MAX_MESSAGE_BYTES => Err(TooLarge(n)),
        _ => Ok(()),
    }
}

/// Bytes `m` adds to a `MultiplexUplink`.
pub fn uplink_entry_len(m: &ChannelUplink) -> usize {
    prost::encoding::message::encoded_len(1, m)
}

/// How many of `messages`, from the front, one `MultiplexUplink` carries: as many as fit
/// [`MAX_UPLINK_BATCH_BYTES`], and at least one.
pub fn uplink_batch_len(messages: &[ChannelUplink]) -> usize {
    let mut bytes = 0;
    for (i, m) in messages.iter().enumerate() {
        bytes += uplink_entry_len(m);
        if bytes > MAX_UPLINK_BATCH_BYTES {
            return i.max(1);
        }
    }
    messages.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxgate_proto::bridge::{data_message, downlink, uplink, DataMessage, Uplink};

    fn data_downlink(text_bytes: usize) -> Downlink {
        Downlink {
            kind: Some(downlink::Kind::Data(DataMessage {
                label: "oai-events".into(),
                payload: Some(data_message::Payload::Text("\\".repeat(text_bytes))),
            })),
        }
    }

    fn data_uplink(channel: u64, text_bytes: usize) -> ChannelUplink {
        ChannelUplink {
            channel,
            uplink: Some(Uplink {
                kind: Some(uplink::Kind::Data(DataMessage {
                    label: "oai-events".into(),
                    payload: Some(data_message::Payload::Text("x".repeat(text_bytes))),
                })),
            }),
            closed: None,
        }
    }

    #[test]
    fn a_message_is_weighed_by_its_encoded_size_and_one_at_the_limit_is_taken() {
        // The framing at this size (its lengths' varints are as long either side of the limit).
        let framing = data_downlink(MAX_MESSAGE_BYTES).encoded_len() - MAX_MESSAGE_BYTES;
        let exact = data_downlink(MAX_MESSAGE_BYTES - framing);
        assert_eq!(exact.encoded_len(), MAX_MESSAGE_BYTES);
        assert_eq!(check_downlink(&exact), Ok(()));
        let over = data_downlink(MAX_MESSAGE_BYTES - framing + 1);
        assert_eq!(check_downlink(&over), Err(TooLarge(MAX_MESSAGE_BYTES + 1)));
        // What the echo bot of issue 37 sent: 360,051 bytes.
        let echoed = data_downlink(360_000);
        assert!(matches!(check_downlink(&echoed), Err(TooLarge(n)) if n > 360_000));
    }

    #[test]
    fn uplink_batches_stop_at_their_byte_bound_and_a_large_message_goes_alone() {
        // Five caller data messages of 256 KiB (str0m's largest): with their framing, three
        // fit a batch and the fourth starts the next.
        let big: Vec<ChannelUplink> = (0..5).map(|c| data_uplink(c, 256 * 1024)).collect();
        assert_eq!(uplink_batch_len(&big), 3);
        let batch: usize = big[..3].iter().map(uplink_entry_len).sum();
        assert!(batch <= MAX_UPLINK_BATCH_BYTES, "{batch}");
        // Small frames: the whole take.
        let small: Vec<ChannelUplink> = (0..256).map(|c| data_uplink(c, 1920)).collect();
        assert_eq!(uplink_batch_len(&small), 256);
        // One message over the bound still leaves, alone.
        let huge = vec![data_uplink(1, 2 << 20), data_uplink(2, 10)];
        assert_eq!(uplink_batch_len(&huge), 1);
        assert_eq!(uplink_batch_len(&[]), 0);
    }
}
