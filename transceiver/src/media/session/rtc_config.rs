//! How str0m is configured for a session: an ICE-lite `Rtc` with the minted credentials,
//! the process's DTLS configuration, Opus only, audio-only header extensions, RTCP reports every
//! second, and the session's advertised candidates.

use std::time::{Duration, Instant};

use str0m::config::DtlsCert;
use str0m::net::TcpType;
use str0m::rtp::Extension;
use str0m::{Candidate, IceCreds, Rtc, RtcConfig};

use crate::media::session::path::Candidates;
use crate::media::session::state::SessionError;

/// A new `Rtc` with the session's ICE credentials and DTLS certificate, its local
/// `candidates` added.
pub fn new_rtc(
    now: Instant,
    creds: IceCreds,
    cert: DtlsCert,
    candidates: &Candidates,
) -> Result<Rtc, SessionError> {
    let mut rtc = RtcConfig::new()
        .set_ice_lite(true)
        .set_local_ice_credentials(creds)
        .set_dtls_cert(cert)
        // One DTLS configuration per process, not one per session (see `voxgate_dtls`:
        // building one was most of an accept's CPU).
        .set_crypto_provider(voxgate_dtls::crypto_provider())
        .clear_codecs()
        .enable_opus(true, false)
        // RTT, jitter and loss per direction for `media::quality`: str0m walks the session's
        // two streams every 5 s (nothing per packet).
        .set_stats_interval(Some(crate::media::quality::STATS_INTERVAL))
        // RTCP sender and receiver reports every second (str0m's default for audio is 5 s): the
        // transceiver sends no RTP while the backend is silent, and the browser client's
        // liveness watchdog (clients/web/src/liveness.ts) takes 1.2 s without a packet as a sign
        // the transceiver is gone, so a healthy session must send at least one a second. The
        // RTT and loss behind `media::quality` are then at most a second old at each sample.
        // Cost: one compound SRTCP packet (SR + RR, ~100 bytes) a second instead of every 5 s,
        // beside 50 audio packets a second each way; the browser's own RTCP is its own.
        .set_rtcp_report_interval_audio(Duration::from_secs(1))
        // Hold at most 3 packets (60 ms) behind a gap: a lost packet becomes a concealed
        // frame quickly instead of delaying the uplink by str0m's default 15 packets.
        .set_reordering_size_audio(3)
        // Audio-only header extensions: the mid (BUNDLE) and the caller's audio level.
        // str0m's standard map also offers transport-wide-cc and abs-send-time, which
        // serve bandwidth estimation, and a voice call's bitrate is the caller's Opus
        // encoder's to pick. With transport-cc negotiated, str0m files every received
        // packet in its TWCC register and sends a feedback packet every 50 ms: 20 extra
        // datagrams and timer wakeups a second per session, on top of 50 audio packets in.
        .clear_extension_map()
        .set_extension(1, Extension::AudioLevel)
        .set_extension(4, Extension::RtpMid)
        .build(now);
    for addr in &candidates.udp {
        let c = Candidate::host(*addr, "udp")
            .map_err(|e| SessionError::Candidate(*addr, e.to_string()))?;
        rtc.add_local_candidate(c);
    }
    // Passive TCP host candidates: the client connects to us (RFC 6544). Their default
    // priority (type preference 90 vs 126 for UDP hosts, as in libwebrtc) is lower than any
    // UDP host candidate's, so a client that reaches both nominates UDP.
    for addr in &candidates.tcp {
        let c = Candidate::builder()
            .tcp()
            .host(*addr)
            .tcptype(TcpType::Passive)
            .build()
            .map_err(|e| SessionError::Candidate(*addr, e.to_string()))?;
        rtc.add_local_candidate(c);
    }
    Ok(rtc)
}
