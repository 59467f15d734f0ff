use voxgate_proto::bridge::{data_message, AudioChunk, Clear, DataMessage};

use super::*;

fn text(n: usize) -> downlink::Kind {
    downlink::Kind::Data(DataMessage {
        label: "oai-events".into(),
        payload: Some(data_message::Payload::Text("\\u0001".repeat(n / 6))),
    })
}

fn channel_sender(queue: usize) -> (CallSender, mpsc::Receiver<ChannelOut>) {
    let (tx, rx) = mpsc::channel(queue);
    (CallSender::channel(tx, 7, Arc::default()), rx)
}

#[tokio::test]
async fn a_message_over_the_limit_is_refused_counted_and_never_queued() {
    let (call, mut rx) = channel_sender(8);
    let err = call.send(text(360_000)).await.unwrap_err();
    assert!(
        matches!(err, SendError::TooLarge(TooLarge { bytes, limit }) if bytes > 360_000 - 6 && limit == MAX_MESSAGE_BYTES),
        "{err}"
    );
    assert!(matches!(
        call.try_send(text(300_000)),
        Err(SendError::TooLarge(_))
    ));
    assert_eq!(call.refused(), 2);
    // The call goes on: the next message is queued, on the call's channel, weighed.
    call.send(downlink::Kind::Clear(Clear {})).await.unwrap();
    match rx.try_recv().unwrap() {
        ChannelOut::Checked { message, len } => {
            assert_eq!(message.channel, 7);
            assert_eq!(len, channel_entry_len(&message));
        }
        other => panic!("{other:?}"),
    }
    assert!(rx.try_recv().is_err(), "nothing else was queued");
}

#[tokio::test]
async fn a_session_stream_refuses_the_same_message_and_release_ends_its_stream() {
    let (tx, mut rx) = mpsc::channel(8);
    let call = CallSender::session(tx, Arc::default());
    assert!(matches!(
        call.send(text(360_000)).await,
        Err(SendError::TooLarge(_))
    ));
    let pcm = vec![0u8; 9_600].into();
    let audio = downlink::Kind::Audio(AudioChunk {
        pcm,
        item_id: String::new(),
    });
    call.send(audio).await.unwrap();
    call.release().await;
    assert!(matches!(rx.try_recv(), Ok(SessionOut::Message(_))));
    assert!(matches!(rx.try_recv(), Ok(SessionOut::Release)));
    assert_eq!(call.refused(), 1);
}

#[tokio::test]
async fn a_release_on_a_channel_is_a_release_message_and_a_full_queue_says_so() {
    let (call, mut rx) = channel_sender(1);
    call.release_now();
    match rx.try_recv().unwrap() {
        ChannelOut::Checked { message, .. } => {
            assert!(message.release && message.downlink.is_none() && message.channel == 7);
        }
        other => panic!("{other:?}"),
    }
    call.try_send(downlink::Kind::Clear(Clear {})).unwrap();
    assert!(matches!(
        call.try_send(downlink::Kind::Clear(Clear {})),
        Err(SendError::Full)
    ));
    drop(rx);
    assert!(matches!(
        call.send(downlink::Kind::Clear(Clear {})).await,
        Err(SendError::Closed)
    ));
}
