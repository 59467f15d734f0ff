use voxgate_proto::bridge::{uplink, AudioFrame, ChannelClosed, Uplink};

use super::*;

fn frame(channel: u64, sequence: u64) -> ChannelUplink {
    ChannelUplink {
        channel,
        uplink: Some(Uplink {
            kind: Some(uplink::Kind::Audio(AudioFrame {
                sequence,
                ..Default::default()
            })),
        }),
        closed: None,
    }
}

fn closed(channel: u64, code: Code) -> ChannelUplink {
    ChannelUplink {
        channel,
        uplink: None,
        closed: Some(ChannelClosed {
            code: code as i32,
            message: "why".into(),
        }),
    }
}

#[test]
fn each_channel_s_messages_reach_its_own_route() {
    let mut table = ChannelTable::default();
    table.insert(1, "one");
    table.insert(2, "two");
    let (route, events) = table.route(frame(2, 7)).unwrap();
    assert!(matches!(route, Route::Open(r) if *r == "two"));
    let events: Vec<_> = events.collect();
    assert!(matches!(
        &events[..],
        [CallEvent::Uplink(Uplink { kind: Some(uplink::Kind::Audio(f)) })] if f.sequence == 7
    ));
    assert_eq!(table.len(), 2);
}

#[test]
fn a_channel_the_table_does_not_hold_is_dropped() {
    let mut table: ChannelTable<&str> = ChannelTable::default();
    table.insert(1, "one");
    assert!(table.route(frame(9, 0)).is_none());
    assert!(table.route(closed(9, Code::Ok)).is_none());
    assert_eq!(table.len(), 1);
}

#[test]
fn closed_is_the_channel_s_last_event_and_takes_its_route_out() {
    let mut table = ChannelTable::default();
    table.insert(3, "three");
    let (route, events) = table.route(closed(3, Code::FailedPrecondition)).unwrap();
    assert!(matches!(route, Route::Last("three")));
    let events: Vec<_> = events.collect();
    assert!(matches!(
        &events[..],
        [CallEvent::Closed(s)] if s.code() == Code::FailedPrecondition && s.message() == "why"
    ));
    assert!(table.is_empty());
    assert!(table.route(frame(3, 1)).is_none(), "nothing after closed");
}

#[test]
fn a_message_with_uplink_and_closed_yields_both_in_order() {
    let mut table = ChannelTable::default();
    table.insert(4, ());
    let mut m = frame(4, 1);
    m.closed = closed(4, Code::Ok).closed;
    let (route, events) = table.route(m).unwrap();
    assert!(matches!(route, Route::Last(())));
    let events: Vec<_> = events.collect();
    assert!(
        matches!(&events[..], [CallEvent::Uplink(_), CallEvent::Closed(s)] if s.code() == Code::Ok)
    );
}

#[test]
fn drain_hands_back_every_open_route() {
    let mut table = ChannelTable::default();
    table.insert(1, 10);
    table.insert(2, 20);
    let mut routes = table.drain();
    routes.sort();
    assert_eq!(routes, vec![10, 20]);
    assert!(table.is_empty());
}
