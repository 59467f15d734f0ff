use voxgate_proto::bridge::{AudioFrame, Dispatch, SessionEvent, Uplink};

use super::*;

fn attempt(transport: Transport) -> AttachAttempt {
    let offer = Offer::new(Dispatch {
        session_id: "s1".into(),
        attempt: 3,
        ..Default::default()
    });
    AttachAttempt::new(offer, transport)
}

fn event(kind: session_event::Kind) -> CallEvent {
    CallEvent::Uplink(Uplink {
        kind: Some(uplink::Kind::Event(SessionEvent {
            kind: kind as i32,
            ..Default::default()
        })),
    })
}

fn declined(outcome: Option<AttachOutcome>) -> Reject {
    match outcome {
        Some(AttachOutcome::Failed { decline, .. }) => decline,
        other => panic!("not declined: {other:?}"),
    }
}

#[test]
fn attached_is_the_answer_and_other_messages_are_none() {
    let a = attempt(Transport::Multiplex);
    assert!(matches!(
        a.on_event(&event(session_event::Kind::Attached)),
        Some(AttachOutcome::Attached)
    ));
    assert!(a.on_event(&event(session_event::Kind::Connected)).is_none());
    let frame = CallEvent::Uplink(Uplink {
        kind: Some(uplink::Kind::Audio(AudioFrame::default())),
    });
    assert!(a.on_event(&frame).is_none());
}

#[test]
fn a_refused_attach_declines_its_own_attempt_with_the_code() {
    let a = attempt(Transport::Multiplex);
    let status = Status::failed_precondition("owned by another backend");
    let reject = declined(a.on_event(&CallEvent::Closed(status)));
    assert_eq!(reject.session_id, "s1");
    assert_eq!(reject.attempt, 3);
    assert_eq!(reject.reason, "attach failed: FailedPrecondition");
}

#[test]
fn a_stream_lost_before_the_answer_declines_and_says_which_stream() {
    let reject = declined(attempt(Transport::Multiplex).on_event(&CallEvent::StreamGone(None)));
    assert_eq!(reject.reason, "attach failed: the multiplex stream broke");
    assert_eq!(reject.attempt, 3);
    let gone = CallEvent::StreamGone(Some(Status::unavailable("reset")));
    let reject = declined(attempt(Transport::Session).on_event(&gone));
    assert_eq!(reject.reason, "attach failed: the session stream broke");
}

#[test]
fn a_channel_closed_ok_before_the_answer_needs_no_decline() {
    let a = attempt(Transport::Multiplex);
    assert!(matches!(
        a.on_event(&CallEvent::Closed(Status::ok(""))),
        Some(AttachOutcome::Ended)
    ));
}
