//! Keeps the `session` benchmark honest: its rig (`benches/support/session_rig.rs`) must still
//! connect a real session in memory, record a real second of SRTP audio, and move every
//! packet of it through the session to the backend, and backend audio back out as SRTP.
//! Timing is the benchmark's business; this checks only what happens.

#[path = "../benches/support/session_rig.rs"]
mod session_rig;

use session_rig::{
    client_offer, opus_second, pcm_second, server_cert, Call, PACKETS_PER_SECOND, SERVER,
};
use voxgate_proto::bridge::AudioMode;
use voxgate_transceiver::media::session::{SessionId, SessionState};

#[test]
fn the_setup_bench_accepts_a_real_offer_into_a_new_session() {
    let cert = server_cert();
    let offer = client_offer();
    let (session, answer) = session_rig::accept(
        &cert,
        SessionId::random(),
        std::time::Instant::now(),
        offer.as_bytes(),
    );
    assert_eq!(session.state(), SessionState::Connecting);
    assert!(answer.contains("a=ice-lite"), "{answer}");
    assert!(answer.contains(&SERVER.port().to_string()), "{answer}");
}

#[test]
fn a_recorded_second_of_uplink_reaches_the_backend_as_fifty_frames() {
    let cert = server_cert();
    for mode in [AudioMode::OpusPassthrough, AudioMode::Pcm] {
        let mut call = Call::connect(&cert, Some(mode));
        assert_eq!(call.session.state(), SessionState::Connected, "{mode:?}");
        assert!(call.client.is_connected(), "{mode:?}");

        let second = call.record_uplink_second();
        assert_eq!(second.srtp_packets(), PACKETS_PER_SECOND, "{mode:?}");
        let before = call.session.counters().audio_packets_in;
        call.feed_uplink(&second);
        let backend = call.backend.as_mut().expect("an owner");
        assert_eq!(backend.take_audio(), PACKETS_PER_SECOND, "{mode:?}");
        assert_eq!(
            call.session.counters().audio_packets_in - before,
            PACKETS_PER_SECOND as u64,
            "{mode:?}"
        );
    }
}

#[test]
fn a_second_of_backend_audio_leaves_as_fifty_srtp_packets() {
    let cert = server_cert();
    for mode in [AudioMode::OpusPassthrough, AudioMode::Pcm] {
        let mut call = Call::connect(&cert, Some(mode));
        let backend = call.backend.as_ref().expect("an owner");
        match mode {
            AudioMode::Pcm => backend.send_pcm(&pcm_second()),
            _ => backend.send_opus(&opus_second()),
        }
        let end = call.now + std::time::Duration::from_secs(1);
        assert_eq!(call.run_until(end), PACKETS_PER_SECOND, "{mode:?}");
    }
}

/// An audio-only call negotiates the mid and the audio level, and none of the bandwidth
/// estimation extensions the client offers (transport-wide-cc would cost 20 feedback packets
/// a second per session).
#[test]
fn the_answer_keeps_mid_and_audio_level_and_drops_bandwidth_estimation_extensions() {
    let cert = server_cert();
    let call = Call::connect(&cert, Some(AudioMode::OpusPassthrough));
    assert!(
        call.offer.contains("transport-wide-cc"),
        "the client offers TWCC, so the check below means something:\n{}",
        call.offer
    );
    let extmaps: Vec<&str> = call
        .answer
        .lines()
        .filter(|l| l.starts_with("a=extmap:"))
        .collect();
    assert!(
        extmaps.iter().any(|l| l.contains("sdes:mid")),
        "{extmaps:?}"
    );
    assert!(
        extmaps.iter().any(|l| l.contains("ssrc-audio-level")),
        "{extmaps:?}"
    );
    assert!(
        !extmaps
            .iter()
            .any(|l| l.contains("transport-wide-cc") || l.contains("abs-send-time")),
        "{extmaps:?}"
    );
}
