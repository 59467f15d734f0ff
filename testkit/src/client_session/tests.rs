use super::*;

fn offer(cfg: &SessionConfig) -> (ClientSession, String) {
    let addr: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    ClientSession::new(cfg, addr, Instant::now()).unwrap()
}

#[test]
fn offer_has_one_sendrecv_opus_line_and_the_data_channel() {
    let (session, sdp) = offer(&SessionConfig::default());
    assert_eq!(sdp.matches("m=audio").count(), 1);
    assert!(sdp.contains("a=sendrecv"));
    assert!(sdp.to_lowercase().contains("opus/48000"));
    assert!(sdp.contains("m=application"));
    assert!(!sdp.contains("a=ice-lite"));
    assert!(sdp.contains("127.0.0.1 40000 typ host"), "{sdp}");
    assert!(!session.is_connected());
    assert!(session.poll_timeout().is_some());
}

#[test]
fn offer_without_data_channel_has_no_application_line() {
    let cfg = SessionConfig {
        data_channel: false,
        ..SessionConfig::default()
    };
    let (_, sdp) = offer(&cfg);
    assert!(!sdp.contains("m=application"));
}

#[test]
fn unspecified_bind_address_is_rejected() {
    let addr: SocketAddr = "0.0.0.0:40000".parse().unwrap();
    let r = ClientSession::new(&SessionConfig::default(), addr, Instant::now());
    assert!(matches!(r, Err(SessionError::Candidate(_))));
}

#[test]
fn garbage_answer_is_a_typed_error_and_keeps_nothing_pending() {
    let (mut session, _) = offer(&SessionConfig::default());
    let r = session.accept_answer(Instant::now(), "not sdp");
    assert!(matches!(r, Err(SessionError::Sdp(_))), "{r:?}");
    let r = session.accept_answer(Instant::now(), "v=0\r\n");
    assert!(matches!(r, Err(SessionError::NoPendingOffer)), "{r:?}");
}

#[test]
fn channel_text_before_open_is_refused() {
    let (mut session, _) = offer(&SessionConfig::default());
    let r = session.send_channel_text(Instant::now(), "hi");
    assert!(matches!(r, Err(SessionError::ChannelNotOpen)));
}

#[test]
fn closing_reports_closed_and_stops_timers() {
    let (mut session, _) = offer(&SessionConfig::default());
    session.close(Instant::now());
    assert!(session.is_closed());
    assert!(session.report().closed);
    assert_eq!(session.poll_timeout(), None);
    let mut saw_closed = false;
    while let Some(e) = session.poll_event() {
        saw_closed |= e == SessionEvent::Closed;
    }
    assert!(saw_closed);
}
