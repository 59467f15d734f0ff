//! Validation of a client's SDP offer, before any session state exists.
//!
//! str0m parses the SDP; this module adds the checks a voice gateway needs and turns every
//! failure into a precise, client-facing message (HTTP 400).

use str0m::change::SdpOffer;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OfferError {
    #[error("offer is empty")]
    Empty,
    #[error("offer is not valid UTF-8")]
    NotUtf8,
    #[error("malformed SDP: {0}")]
    Malformed(String),
    #[error("offer has no m=audio section")]
    NoAudio,
    #[error("offer's m=audio section does not offer the Opus codec (opus/48000/2)")]
    NoOpus,
    #[error("offer has no ICE credentials (a=ice-ufrag / a=ice-pwd)")]
    NoIceCredentials,
    #[error("offer has no DTLS fingerprint (a=fingerprint)")]
    NoFingerprint,
    #[error("offer's m=audio section has no a=mid (BUNDLE needs one)")]
    NoAudioMid,
}

/// What the checks learned about the offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferSummary {
    pub has_data_channel: bool,
    /// The `a=mid` of the first audio section.
    pub audio_mid: String,
}

/// Parses and checks an SDP offer.
pub fn validate_offer(body: &[u8]) -> Result<(SdpOffer, OfferSummary), OfferError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(OfferError::Empty);
    }
    let text = std::str::from_utf8(body).map_err(|_| OfferError::NotUtf8)?;
    let summary = check_text(text)?;
    let offer =
        SdpOffer::from_sdp_string(text).map_err(|e| OfferError::Malformed(e.to_string()))?;
    Ok((offer, summary))
}

/// Line-level checks that str0m's parser does not make (or makes with an unclear message).
fn check_text(text: &str) -> Result<OfferSummary, OfferError> {
    if !text.trim_start().starts_with("v=0") {
        return Err(OfferError::Malformed(
            "SDP must start with \"v=0\"".to_string(),
        ));
    }
    let mut in_audio = false;
    let mut saw_audio = false;
    let mut audio_has_opus = false;
    let mut has_data_channel = false;
    let mut ufrag = false;
    let mut pwd = false;
    let mut fingerprint = false;
    let mut audio_mid: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(m) = line.strip_prefix("m=") {
            in_audio = m.starts_with("audio ");
            saw_audio |= in_audio;
            has_data_channel |= m.starts_with("application ") && m.contains("DTLS/SCTP");
            continue;
        }
        if in_audio
            && line.starts_with("a=rtpmap:")
            && line.to_ascii_lowercase().contains(" opus/48000")
        {
            audio_has_opus = true;
        }
        if in_audio && audio_mid.is_none() {
            if let Some(mid) = line.strip_prefix("a=mid:") {
                audio_mid = Some(mid.trim().to_string());
            }
        }
        ufrag |= line.starts_with("a=ice-ufrag:");
        pwd |= line.starts_with("a=ice-pwd:");
        fingerprint |= line.starts_with("a=fingerprint:");
    }
    if !saw_audio {
        return Err(OfferError::NoAudio);
    }
    if !audio_has_opus {
        return Err(OfferError::NoOpus);
    }
    if !(ufrag && pwd) {
        return Err(OfferError::NoIceCredentials);
    }
    if !fingerprint {
        return Err(OfferError::NoFingerprint);
    }
    let audio_mid = audio_mid
        .filter(|m| !m.is_empty())
        .ok_or(OfferError::NoAudioMid)?;
    Ok(OfferSummary {
        has_data_channel,
        audio_mid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\n\
o=- 1 2 IN IP4 127.0.0.1\r\n\
s=-\r\n\
t=0 0\r\n\
a=group:BUNDLE 0\r\n\
a=fingerprint:sha-256 6B:8B:5D:EA:59:04:20:23:29:C8:87:1C:CC:87:32:BE:DD:8C:66:A5:8E:50:55:EA:8C:D3:B6:5C:09:5E:D6:BC\r\n\
m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\
c=IN IP4 0.0.0.0\r\n\
a=mid:0\r\n\
a=ice-ufrag:abcd\r\n\
a=ice-pwd:abcdefghijklmnopqrstuvwx\r\n\
a=setup:actpass\r\n\
a=sendrecv\r\n\
a=rtcp-mux\r\n\
a=rtpmap:111 opus/48000/2\r\n";

    #[test]
    fn valid_audio_offer_is_accepted() {
        let (_, s) = validate_offer(OFFER.as_bytes()).expect("valid");
        assert!(!s.has_data_channel);
        assert_eq!(s.audio_mid, "0");
    }

    #[test]
    fn empty_body_is_rejected() {
        assert_eq!(validate_offer(b"  \r\n").unwrap_err(), OfferError::Empty);
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            validate_offer(b"hello world").unwrap_err(),
            OfferError::Malformed(_)
        ));
        assert_eq!(
            validate_offer(&[0xff, 0xfe, 0x00]).unwrap_err(),
            OfferError::NotUtf8
        );
    }

    #[test]
    fn offer_without_audio_is_rejected() {
        let video = OFFER
            .replace(
                "m=audio 9 UDP/TLS/RTP/SAVPF 111",
                "m=video 9 UDP/TLS/RTP/SAVPF 96",
            )
            .replace("a=rtpmap:111 opus/48000/2", "a=rtpmap:96 VP8/90000");
        assert_eq!(
            validate_offer(video.as_bytes()).unwrap_err(),
            OfferError::NoAudio
        );
    }

    #[test]
    fn audio_without_opus_is_rejected() {
        let pcmu = OFFER
            .replace("SAVPF 111", "SAVPF 0")
            .replace("a=rtpmap:111 opus/48000/2", "a=rtpmap:0 PCMU/8000");
        assert_eq!(
            validate_offer(pcmu.as_bytes()).unwrap_err(),
            OfferError::NoOpus
        );
    }

    #[test]
    fn missing_ice_or_fingerprint_is_named() {
        let no_ice = OFFER.replace("a=ice-pwd:abcdefghijklmnopqrstuvwx\r\n", "");
        assert_eq!(
            validate_offer(no_ice.as_bytes()).unwrap_err(),
            OfferError::NoIceCredentials
        );
        let no_fp: String = OFFER
            .lines()
            .filter(|l| !l.starts_with("a=fingerprint"))
            .map(|l| format!("{l}\r\n"))
            .collect();
        assert_eq!(
            validate_offer(no_fp.as_bytes()).unwrap_err(),
            OfferError::NoFingerprint
        );
    }
}
