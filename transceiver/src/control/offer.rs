//! Validation of a client's SDP offer, before any session state exists.
//!
//! str0m parses the SDP; this module adds the checks a voice gateway needs and turns every
//! failure into a precise, client-facing message (HTTP 400).
//!
//! An offer is held to what voxgate serves before str0m sees a byte of it: exactly one
//! `m=audio` section, at most one `m=application` (the data channel), nothing else. Each
//! section's attribute, `a=candidate` and `a=ssrc` lines, the audio line's payload types, the
//! length of a line and the number of lines are bounded too. Within the body limit, an offer of
//! hundreds of audio sections or a thousand `a=ssrc` lines was otherwise accepted, and str0m
//! built media state for each (megabytes of memory per session, a large answer, and time on
//! the signaling thread). The bounds leave browsers ample room: their audio section has a few
//! dozen attribute lines, a few candidates per network interface and two to four `a=ssrc`
//! lines. One pass over the text, no allocation besides the audio `a=mid`.

use str0m::change::SdpOffer;

/// Most lines an offer may have.
pub const MAX_LINES: usize = 512;
/// Longest line (bytes, without its line ending).
pub const MAX_LINE_BYTES: usize = 4096;
/// Most attribute lines of one section (the session level counts as one), candidates and
/// `a=ssrc` lines apart.
pub const MAX_SECTION_ATTRIBUTES: usize = 128;
/// Most `a=candidate` lines of one section.
pub const MAX_SECTION_CANDIDATES: usize = 64;
/// Most `a=ssrc` lines of one section.
pub const MAX_SECTION_SSRC_LINES: usize = 16;
/// Most payload types the `m=audio` line may list.
pub const MAX_AUDIO_FORMATS: usize = 64;

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
    #[error("offer has {0} audio sections; voxgate serves one")]
    AudioSections(usize),
    #[error("offer has {0} application sections; voxgate serves at most one (the data channel)")]
    ApplicationSections(usize),
    #[error(
        "offer has an m={0} section; voxgate serves one audio section and at most one data \
         channel (m=application)"
    )]
    UnservedSection(String),
    #[error(
        "offer's {section} section has {count} a=ssrc lines; at most {MAX_SECTION_SSRC_LINES}"
    )]
    SsrcLines { section: &'static str, count: usize },
    #[error(
        "offer's {section} section has {count} a=candidate lines; at most \
         {MAX_SECTION_CANDIDATES}"
    )]
    Candidates { section: &'static str, count: usize },
    #[error(
        "offer's {section} section has {count} attribute lines; at most {MAX_SECTION_ATTRIBUTES}"
    )]
    Attributes { section: &'static str, count: usize },
    #[error("offer's m=audio line lists {0} payload types; at most {MAX_AUDIO_FORMATS}")]
    AudioFormats(usize),
    #[error("offer has a line of {0} bytes; at most {MAX_LINE_BYTES}")]
    LineTooLong(usize),
    #[error("offer has {0} lines; at most {MAX_LINES}")]
    Lines(usize),
    #[error("offer's m=audio section does not offer the Opus codec (opus/48000/2)")]
    NoOpus,
    #[error("offer has no ICE credentials (a=ice-ufrag / a=ice-pwd)")]
    NoIceCredentials,
    #[error("offer has no DTLS fingerprint (a=fingerprint)")]
    NoFingerprint,
    #[error("offer's m=audio section has no a=mid (BUNDLE needs one)")]
    NoAudioMid,
}

impl OfferError {
    /// The `reason` label of `voxgate_signaling_rejected_total` for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            OfferError::AudioSections(_)
            | OfferError::ApplicationSections(_)
            | OfferError::UnservedSection(_) => "offer_sections",
            OfferError::SsrcLines { .. } => "offer_ssrcs",
            OfferError::Candidates { .. } => "offer_candidates",
            OfferError::Attributes { .. } => "offer_attributes",
            OfferError::AudioFormats(_) => "offer_formats",
            OfferError::LineTooLong(_) | OfferError::Lines(_) => "offer_lines",
            _ => "offer_invalid",
        }
    }
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

/// Which kind of section a line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Session,
    Audio,
    Application,
    Other,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Section::Session => "session",
            Section::Audio => "audio",
            Section::Application => "application",
            Section::Other => "other",
        }
    }
}

/// One section's counts, and the first section that broke each bound.
#[derive(Debug, Default)]
struct SectionCounts {
    attributes: usize,
    candidates: usize,
    ssrcs: usize,
}

/// The offer's shape, counted in one pass before anything is parsed.
#[derive(Debug)]
struct Shape {
    lines: usize,
    longest: usize,
    audio: usize,
    application: usize,
    /// The first section of a kind voxgate does not serve (its media name, bounded).
    unserved: Option<String>,
    audio_formats: usize,
    /// The first bound a section broke.
    breach: Option<OfferError>,
    current: Section,
    counts: SectionCounts,
}

impl Shape {
    fn scan(text: &str) -> Shape {
        let mut shape = Shape {
            lines: 0,
            longest: 0,
            audio: 0,
            application: 0,
            unserved: None,
            audio_formats: 0,
            breach: None,
            current: Section::Session,
            counts: SectionCounts::default(),
        };
        for line in text.lines() {
            shape.line(line.trim_end());
        }
        shape.close_section();
        shape
    }

    fn line(&mut self, line: &str) {
        self.lines += 1;
        self.longest = self.longest.max(line.len());
        if let Some(m) = line.strip_prefix("m=") {
            self.close_section();
            let kind = m.split(' ').next().unwrap_or("");
            self.current = match kind {
                "audio" => {
                    self.audio += 1;
                    // m=audio <port> <proto> <fmt> ...
                    let fields = m.split(' ').filter(|f| !f.is_empty()).count();
                    self.audio_formats = self.audio_formats.max(fields.saturating_sub(3));
                    Section::Audio
                }
                "application" => {
                    self.application += 1;
                    Section::Application
                }
                other => {
                    if self.unserved.is_none() {
                        self.unserved = Some(media_name(other));
                    }
                    Section::Other
                }
            };
            return;
        }
        if line.starts_with("a=candidate:") {
            self.counts.candidates += 1;
        } else if line.starts_with("a=ssrc:") {
            self.counts.ssrcs += 1;
        } else if line.starts_with("a=") {
            self.counts.attributes += 1;
        }
    }

    /// Folds the section that just ended into the first breach.
    fn close_section(&mut self) {
        let counts = std::mem::take(&mut self.counts);
        if self.breach.is_some() {
            return;
        }
        let section = self.current.name();
        self.breach = if counts.ssrcs > MAX_SECTION_SSRC_LINES {
            Some(OfferError::SsrcLines {
                section,
                count: counts.ssrcs,
            })
        } else if counts.candidates > MAX_SECTION_CANDIDATES {
            Some(OfferError::Candidates {
                section,
                count: counts.candidates,
            })
        } else if counts.attributes > MAX_SECTION_ATTRIBUTES {
            Some(OfferError::Attributes {
                section,
                count: counts.attributes,
            })
        } else {
            None
        };
    }

    /// Refuses an offer without audio, then one of sections voxgate does not serve, then one
    /// past a bound: the sections first, as they say most about what the offer is.
    fn check(self) -> Result<(), OfferError> {
        if self.audio == 0 {
            return Err(OfferError::NoAudio);
        }
        if let Some(kind) = self.unserved {
            return Err(OfferError::UnservedSection(kind));
        }
        if self.audio > 1 {
            return Err(OfferError::AudioSections(self.audio));
        }
        if self.application > 1 {
            return Err(OfferError::ApplicationSections(self.application));
        }
        if let Some(breach) = self.breach {
            return Err(breach);
        }
        if self.audio_formats > MAX_AUDIO_FORMATS {
            return Err(OfferError::AudioFormats(self.audio_formats));
        }
        if self.longest > MAX_LINE_BYTES {
            return Err(OfferError::LineTooLong(self.longest));
        }
        if self.lines > MAX_LINES {
            return Err(OfferError::Lines(self.lines));
        }
        Ok(())
    }
}

/// A media name fit to quote back: at most 16 ASCII letters, digits or dashes.
fn media_name(kind: &str) -> String {
    let name: String = kind
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(16)
        .collect();
    if name.is_empty() {
        "?".to_string()
    } else {
        name
    }
}

/// Line-level checks that str0m's parser does not make (or makes with an unclear message).
fn check_text(text: &str) -> Result<OfferSummary, OfferError> {
    if !text.trim_start().starts_with("v=0") {
        return Err(OfferError::Malformed(
            "SDP must start with \"v=0\"".to_string(),
        ));
    }
    Shape::scan(text).check()?;
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

    /// `OFFER` with `extra` lines added at the end of its audio section.
    fn with_audio_lines(extra: impl Iterator<Item = String>) -> String {
        let mut sdp = OFFER.to_string();
        for l in extra {
            sdp.push_str(&l);
            sdp.push_str("\r\n");
        }
        sdp
    }

    #[test]
    fn more_than_one_audio_section_is_refused_with_their_count() {
        let section = &OFFER[OFFER.find("m=audio").unwrap()..];
        let bomb = format!("{OFFER}{}", section.repeat(529));
        let err = validate_offer(bomb.as_bytes()).unwrap_err();
        assert_eq!(err, OfferError::AudioSections(530));
        assert_eq!(
            err.to_string(),
            "offer has 530 audio sections; voxgate serves one"
        );
        assert_eq!(err.reason(), "offer_sections");
    }

    #[test]
    fn sections_voxgate_does_not_serve_are_refused_by_name() {
        let video = format!("{OFFER}m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\n");
        assert_eq!(
            validate_offer(video.as_bytes()).unwrap_err(),
            OfferError::UnservedSection("video".into())
        );
        let junk = format!("{OFFER}m=\u{202e}evil 9 X\r\n");
        assert_eq!(
            validate_offer(junk.as_bytes()).unwrap_err(),
            OfferError::UnservedSection("?".into())
        );
        let app = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n";
        let two = format!("{OFFER}{app}{app}");
        assert_eq!(
            validate_offer(two.as_bytes()).unwrap_err(),
            OfferError::ApplicationSections(2)
        );
        let one = format!("{OFFER}{app}");
        assert!(validate_offer(one.as_bytes()).is_ok());
    }

    #[test]
    fn each_section_bound_is_named_with_its_count() {
        let ssrcs = with_audio_lines((0..17).map(|i| format!("a=ssrc:{i} cname:x")));
        assert_eq!(
            validate_offer(ssrcs.as_bytes()).unwrap_err(),
            OfferError::SsrcLines {
                section: "audio",
                count: 17
            }
        );
        let cands = with_audio_lines(
            (0..65).map(|i| format!("a=candidate:{i} 1 udp 1 10.0.0.{} 9 typ host", i % 250)),
        );
        let err = validate_offer(cands.as_bytes()).unwrap_err();
        assert_eq!(err.reason(), "offer_candidates");
        assert!(err.to_string().contains("65 a=candidate lines"), "{err}");
        let attrs = with_audio_lines((0..130).map(|i| format!("a=x-{i}")));
        assert!(matches!(
            validate_offer(attrs.as_bytes()).unwrap_err(),
            OfferError::Attributes { section: "audio", count } if count > 128
        ));
        let formats: String = (0..70).map(|i| format!(" {}", 30 + i)).collect();
        let many = OFFER.replace("SAVPF 111", &format!("SAVPF 111{formats}"));
        assert_eq!(
            validate_offer(many.as_bytes()).unwrap_err(),
            OfferError::AudioFormats(71)
        );
    }

    #[test]
    fn long_lines_and_many_lines_are_refused() {
        let long = with_audio_lines(std::iter::once(format!("a=x:{}", "y".repeat(5000))));
        assert_eq!(
            validate_offer(long.as_bytes()).unwrap_err().reason(),
            "offer_lines"
        );
        // Lines that are not attributes (e.g. b=) are held by the total.
        let lines = with_audio_lines((0..600).map(|i| format!("b=AS:{i}")));
        assert_eq!(
            validate_offer(lines.as_bytes()).unwrap_err(),
            OfferError::Lines(615)
        );
    }

    #[test]
    fn a_browser_sized_offer_passes() {
        // A Chromium-like audio section: many codecs and extensions, a dozen candidates.
        let fmts = " 63 9 0 8 13 110 126";
        let mut lines: Vec<String> = (0..12)
            .map(|i| {
                format!(
                    "a=candidate:{i} 1 udp 2122260223 192.168.1.{i} 5{i}000 typ host generation 0"
                )
            })
            .collect();
        lines.extend((1..15).map(|i| format!("a=extmap:{i} urn:ietf:params:rtp-hdrext:x{i}")));
        lines.extend((0..4).map(|i| format!("a=ssrc:1 x{i}:y")));
        lines.extend(
            [63, 9, 0, 8, 13, 110, 126]
                .iter()
                .map(|pt| format!("a=rtpmap:{pt} x/8000")),
        );
        let sdp =
            with_audio_lines(lines.into_iter()).replace("SAVPF 111", &format!("SAVPF 111{fmts}"));
        let app = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:1\r\n\
                   a=sctp-port:5000\r\na=max-message-size:262144\r\n";
        let sdp = format!("{sdp}{app}");
        let (_, s) = validate_offer(sdp.as_bytes()).expect("a browser's offer");
        assert!(s.has_data_channel);
    }
}
