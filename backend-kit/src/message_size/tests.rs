use prost::Message;
use voxgate_proto::bridge::{
    data_message, downlink, ChannelDownlink, DataMessage, Downlink, MultiplexDownlink,
};

use super::*;

fn data(channel: u64, text: String) -> ChannelDownlink {
    ChannelDownlink {
        channel,
        downlink: Some(Downlink {
            kind: Some(downlink::Kind::Data(DataMessage {
                label: "oai-events".into(),
                payload: Some(data_message::Payload::Text(text)),
            })),
        }),
        release: false,
    }
}

#[test]
fn a_batch_weighs_the_sum_of_its_entries() {
    let messages: Vec<_> = [10, 200, 70_000, 0]
        .iter()
        .enumerate()
        .map(|(i, n)| data(i as u64 * 1000, "x".repeat(*n)))
        .collect();
    let sum: usize = messages.iter().map(channel_entry_len).sum();
    assert_eq!(MultiplexDownlink { messages }.encoded_len(), sum);
}

#[test]
fn a_message_is_weighed_by_its_encoding_not_by_its_kind() {
    // The echo of a 60 KB text of control characters, JSON-escaped: about 360 KB.
    let big = data(7, "\\u0001".repeat(60_000));
    let limit = MAX_MESSAGE_BYTES;
    let err = check_channel_downlink(&big, limit).unwrap_err();
    assert!(err.bytes > 360_000, "{err}");
    assert_eq!(err.limit, limit);
    let small = data(7, "hello".into());
    assert_eq!(
        check_channel_downlink(&small, limit),
        Ok(channel_entry_len(&small))
    );
    let session = big.downlink.unwrap();
    assert!(check_session_downlink(&session, limit).is_err());
}

#[test]
fn a_message_of_exactly_the_limit_fits_and_one_byte_more_does_not() {
    // Framing around the text (keys and lengths, 3-byte varints at these sizes).
    let overhead = channel_entry_len(&data(1, "x".repeat(200_000))) - 200_000;
    let exact = data(1, "x".repeat(MAX_MESSAGE_BYTES - overhead));
    assert_eq!(channel_entry_len(&exact), MAX_MESSAGE_BYTES);
    assert!(check_channel_downlink(&exact, MAX_MESSAGE_BYTES).is_ok());
    let over = data(1, "x".repeat(MAX_MESSAGE_BYTES - overhead + 1));
    assert!(check_channel_downlink(&over, MAX_MESSAGE_BYTES).is_err());
}
