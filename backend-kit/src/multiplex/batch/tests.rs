use prost::Message;
use tokio_stream::StreamExt;
use voxgate_proto::bridge::{data_message, downlink, AudioChunk, DataMessage, Downlink};

use super::*;
use crate::message_size::channel_entry_len;

fn audio(channel: u64, bytes: usize) -> ChannelDownlink {
    let chunk = AudioChunk {
        pcm: vec![0u8; bytes].into(),
        item_id: String::new(),
    };
    on_channel(channel, downlink::Kind::Audio(chunk))
}

fn text(channel: u64, chars: usize) -> ChannelDownlink {
    let data = DataMessage {
        label: "oai-events".into(),
        payload: Some(data_message::Payload::Text("\\u0001".repeat(chars / 6))),
    };
    on_channel(channel, downlink::Kind::Data(data))
}

fn on_channel(channel: u64, kind: downlink::Kind) -> ChannelDownlink {
    ChannelDownlink {
        channel,
        downlink: Some(Downlink { kind: Some(kind) }),
        release: false,
    }
}

fn checked(m: ChannelDownlink) -> ChannelOut {
    ChannelOut::checked(m).expect("within the limit")
}

/// Every batch the stream makes from `items`, queued at once.
async fn batches_of(items: Vec<ChannelOut>, limits: BatchLimits) -> Vec<MultiplexDownlink> {
    let (tx, rx) = mpsc::channel(items.len().max(1));
    for item in items {
        tx.send(item).await.unwrap();
    }
    drop(tx);
    Batches::new(rx, limits, Arc::default()).collect().await
}

#[test]
fn the_builder_takes_messages_up_to_the_byte_limit_and_counts_their_real_size() {
    let limits = BatchLimits {
        bytes: 30_000,
        messages: 100,
    };
    let mut b = BatchBuilder::new(limits);
    let (first, second, third) = (audio(1, 9_600), text(2, 12_000), audio(3, 9_600));
    let lens = [&first, &second, &third].map(channel_entry_len);
    b.push(first, lens[0]).unwrap();
    b.push(second, lens[1]).unwrap();
    assert_eq!(b.bytes(), lens[0] + lens[1]);
    let third = b.push(third, lens[2]).unwrap_err();
    assert_eq!(third.channel, 3, "the third is given back");
    let batch = b.take().unwrap();
    assert_eq!(batch.encoded_len(), lens[0] + lens[1]);
    assert!(b.is_empty() && b.bytes() == 0 && b.take().is_none());
}

#[test]
fn the_builder_is_full_at_its_message_count() {
    let mut b = BatchBuilder::new(BatchLimits {
        bytes: 1 << 20,
        messages: 2,
    });
    for channel in 0..2 {
        let m = audio(channel, 10);
        let len = channel_entry_len(&m);
        b.push(m, len).unwrap();
    }
    assert!(b.is_full());
    assert!(b.push(audio(9, 10), 14).is_err());
}

#[tokio::test]
async fn a_burst_of_audio_leaves_in_batches_the_transceiver_takes_and_in_order() {
    // 124 calls' 100 ms chunks of 48 kHz PCM at once: 1.2 MB.
    let items = (0..124).map(|k| checked(audio(k, 9_600))).collect();
    let batches = batches_of(items, BatchLimits::default()).await;
    assert!(batches.len() >= 5, "{} batches", batches.len());
    let mut seen = Vec::new();
    for b in &batches {
        assert!(b.encoded_len() <= MAX_MESSAGE_BYTES, "{}", b.encoded_len());
        seen.extend(b.messages.iter().map(|m| m.channel));
    }
    assert_eq!(seen, (0..124).collect::<Vec<_>>());
}

#[tokio::test]
async fn large_data_messages_among_audio_never_make_a_batch_over_the_limit() {
    // What ended a whole stream once: data counted as a few bytes beside audio. Here two
    // echoes of ~200 KB each, JSON-escaped, between chunks of audio.
    let mut items = Vec::new();
    for k in 0..40 {
        items.push(checked(audio(k, 9_600)));
        if k % 20 == 5 {
            items.push(checked(text(k, 200_000)));
        }
    }
    let batches = batches_of(items, BatchLimits::default()).await;
    let total: usize = batches.iter().map(|b| b.messages.len()).sum();
    assert_eq!(total, 42, "nothing lost");
    for b in &batches {
        assert!(b.encoded_len() <= MAX_MESSAGE_BYTES, "{}", b.encoded_len());
    }
}

#[tokio::test]
async fn an_unchecked_message_travels_alone_whatever_its_size() {
    let huge = audio(1, 300 * 1024);
    let items = vec![
        checked(audio(5, 100)),
        ChannelOut::Unchecked(huge),
        checked(audio(6, 100)),
    ];
    let batches = batches_of(items, BatchLimits::default()).await;
    let channels: Vec<Vec<u64>> = batches
        .iter()
        .map(|b| b.messages.iter().map(|m| m.channel).collect())
        .collect();
    assert_eq!(channels, vec![vec![5], vec![1], vec![6]]);
}

#[tokio::test]
async fn a_message_no_batch_can_hold_is_dropped_and_counted_not_sent_forever() {
    let limits = BatchLimits {
        bytes: 1_000,
        messages: 10,
    };
    let big = audio(1, 5_000);
    let len = channel_entry_len(&big);
    let items = vec![
        ChannelOut::Checked { message: big, len },
        checked(audio(2, 10)),
    ];
    let (tx, rx) = mpsc::channel(4);
    for item in items {
        tx.send(item).await.unwrap();
    }
    drop(tx);
    let dropped = Arc::new(AtomicU64::new(0));
    let batches: Vec<_> = Batches::new(rx, limits, dropped.clone()).collect().await;
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].messages[0].channel, 2);
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
}
