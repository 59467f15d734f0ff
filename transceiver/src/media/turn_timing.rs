//! Mouth-to-ear latency per turn: from the caller's end of speech to the first audio of the
//! reply heard at the caller's ear, split into where the time went.
//!
//! Sans-IO. Three inputs, each with its time:
//! - every uplink packet's audio level (the RFC 6464 header extension the browser sends,
//!   [`TurnTimer::on_uplink_level`]): the caller's speech spurts and their end;
//! - the reply's onset the downlink pacer found ([`TurnTimer::on_reply_onset`]: the first loud
//!   frame sent after the end of speech and after [`super::audio_bridge::QUIET_BEFORE_ONSET`]
//!   of downlink quiet; when the backend queued it, when it went out, its RTP timestamp);
//! - the client's report of the same turn ([`TurnTimer::on_client_report`], JSON on the
//!   `voxgate.turns` data channel): what only the browser knows.
//!
//! and one output per turn, a [`TurnSplit`] that sums to the turn's total:
//!
//! | part | source | what |
//! |---|---|---|
//! | `capture_send` | estimated | the remainder: the browser's capture, Opus frame and send, and the estimates' error |
//! | `network_up` | estimated | RTT / 2 |
//! | `transceiver_up` | measured | the last speech packet's arrival at the socket → handed to the backend |
//! | `backend` | measured | → the reply's first loud audio entering its session's downlink queue (gRPC both ways included; stamped at the gRPC edge, `QueuedDownlink`) |
//! | `transceiver_down` | measured | → that audio's packet handed to the socket (the wait for the pacer's 20 ms tick, the queue ahead of it, the encode) |
//! | `network_down` | estimated | RTT / 2 |
//! | `jitter_buffer` | client | the browser's mean jitter-buffer delay since its last report (`getStats`) |
//! | `playout` | client | the browser's playout delay (`media-playout` stats), absent where it has none |
//!
//! The total is the client's own measurement on one clock (its microphone analyser's last
//! loud sample → its remote analyser's first loud sample after quiet, sampled every 10 ms)
//! plus its playout delay. The three measured parts are the transceiver's, on its clock. RTT
//! is the transceiver's (RTCP) where it has one, else the client's ICE round trip.
//!
//! A turn is matched to its report by the reply onset's RTP timestamp (the browser reads
//! `getSynchronizationSources()` when it hears the onset): the report names a packet at most
//! [`MATCH_WINDOW_TICKS`] after the onset. Everything in a report comes from the caller and is
//! bounded ([`ReportDrop`]): an unparsable, implausible, unmatched, repeated or inconsistent
//! (shorter than the transceiver's own span) report is dropped and counted, never passed on.
//!
//! Speech: a packet is loud at [`VOICED_DBOV`] or more; a spurt counts once it has
//! [`MIN_SPURT_PACKETS`] loud packets, and it has ended once [`HANGOVER`] passes with none (the
//! same thresholds as the web client's `turns.ts`). A caller whose packets carry no audio level
//! (the extension not negotiated) has no turns. Cost: one comparison per uplink packet.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::media::audio_bridge::ReplyOnset;
use crate::metrics::TurnCounts;

/// RFC 6464 level (str0m gives −dBov) at or above which a packet is speech.
pub const VOICED_DBOV: i8 = -50;
/// Loud packets (20 ms each) before a spurt counts: a cough or a click is not a turn.
pub const MIN_SPURT_PACKETS: u32 = 5;
/// Quiet after the last loud packet before the caller has stopped speaking.
pub const HANGOVER: Duration = Duration::from_millis(250);
/// How far (48 kHz RTP ticks, 2 s) after a reply's onset the packet a report names may be.
pub const MATCH_WINDOW_TICKS: u32 = 96_000;
/// Turns kept for their reports, and in the session's JSON.
pub const KEPT_TURNS: usize = 4;
/// The longest report read; anything longer is hostile.
pub const MAX_REPORT_BYTES: usize = 512;

/// What the session should do with the downlink pacer after an uplink packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnsetWatch {
    /// The caller may have stopped: look for the reply's onset from now.
    Arm,
    /// The caller speaks again: a reply found so far is not this turn's.
    Disarm,
}

/// Why a client report was dropped (each counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportDrop {
    /// Not JSON of the expected shape, or too long.
    Malformed,
    /// A number out of its plausible range.
    Implausible,
    /// No turn of ours it could be (no onset at or before its RTP timestamp).
    Unmatched,
    /// Its turn was reported already.
    Repeated,
    /// It says the turn took less than the transceiver's own part of it.
    Inconsistent,
}

impl ReportDrop {
    pub const ALL: [ReportDrop; 5] = [
        Self::Malformed,
        Self::Implausible,
        Self::Unmatched,
        Self::Repeated,
        Self::Inconsistent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Implausible => "implausible",
            Self::Unmatched => "unmatched",
            Self::Repeated => "repeated",
            Self::Inconsistent => "inconsistent",
        }
    }
}

/// The client's report of one turn (`turn.report` on the `voxgate.turns` channel).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientReport {
    #[serde(rename = "type")]
    kind: String,
    speech_end_to_heard_ms: f64,
    rtp_timestamp: Option<u32>,
    jitter_buffer_ms: Option<f64>,
    playout_ms: Option<f64>,
    rtt_ms: Option<f64>,
}

/// Plausible ranges of a report's figures, ms.
const MAX_TURN_MS: f64 = 60_000.0;
const MAX_JITTER_BUFFER_MS: f64 = 5_000.0;
const MAX_PLAYOUT_MS: f64 = 2_000.0;
const MAX_RTT_MS: f64 = 10_000.0;

impl ClientReport {
    fn parse(bytes: &[u8]) -> Result<ClientReport, ReportDrop> {
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(ReportDrop::Malformed);
        }
        let r: ClientReport = serde_json::from_slice(bytes).map_err(|_| ReportDrop::Malformed)?;
        if r.kind != "turn.report" {
            return Err(ReportDrop::Malformed);
        }
        let within = |v: f64, max: f64| v.is_finite() && (0.0..=max).contains(&v);
        let optional = |v: Option<f64>, max: f64| v.is_none_or(|v| within(v, max));
        let plausible = within(r.speech_end_to_heard_ms, MAX_TURN_MS)
            && optional(r.jitter_buffer_ms, MAX_JITTER_BUFFER_MS)
            && optional(r.playout_ms, MAX_PLAYOUT_MS)
            && optional(r.rtt_ms, MAX_RTT_MS);
        if plausible {
            Ok(r)
        } else {
            Err(ReportDrop::Implausible)
        }
    }
}

/// Who measured a part of the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartSource {
    Measured,
    Estimated,
    /// Reported by the caller's browser (bounded, not checked).
    Client,
}

/// One turn's mouth-to-ear time and where it went, ms (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnSplit {
    pub turn: u32,
    #[serde(serialize_with = "serialize_ms")]
    pub total_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub capture_send_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub network_up_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub transceiver_up_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub backend_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub transceiver_down_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub network_down_ms: f64,
    #[serde(serialize_with = "serialize_ms")]
    pub jitter_buffer_ms: f64,
    #[serde(serialize_with = "serialize_optional_ms")]
    pub playout_ms: Option<f64>,
    /// Where the RTT both network halves come from: `rtcp` (ours) or `client` (its ICE).
    pub rtt_source: &'static str,
    pub rtp_timestamp: u32,
}

impl TurnSplit {
    /// The parts in the order the time passes, with who measured each.
    pub fn parts(&self) -> Vec<(&'static str, f64, PartSource)> {
        use PartSource::{Client, Estimated, Measured};
        let mut parts = vec![
            ("capture_send", self.capture_send_ms, Estimated),
            ("network_up", self.network_up_ms, Estimated),
            ("transceiver_up", self.transceiver_up_ms, Measured),
            ("backend", self.backend_ms, Measured),
            ("transceiver_down", self.transceiver_down_ms, Measured),
            ("network_down", self.network_down_ms, Estimated),
            ("jitter_buffer", self.jitter_buffer_ms, Client),
        ];
        if let Some(p) = self.playout_ms {
            parts.push(("playout", p, Client));
        }
        parts
    }

    /// The answer to the client, on the `voxgate.turns` channel.
    pub fn to_client_json(&self) -> String {
        let parts: Vec<_> = self
            .parts()
            .into_iter()
            .map(|(name, ms, source)| serde_json::json!({"name": name, "ms": round1(ms), "source": source}))
            .collect();
        serde_json::json!({
            "type": "turn.latency",
            "turn": self.turn,
            "total_ms": round1(self.total_ms),
            "parts": parts,
        })
        .to_string()
    }

    pub fn to_proto(&self) -> voxgate_proto::bridge::TurnLatency {
        voxgate_proto::bridge::TurnLatency {
            turn: self.turn,
            total_ms: self.total_ms,
            capture_send_ms: self.capture_send_ms,
            network_up_ms: self.network_up_ms,
            transceiver_up_ms: self.transceiver_up_ms,
            backend_ms: self.backend_ms,
            transceiver_down_ms: self.transceiver_down_ms,
            network_down_ms: self.network_down_ms,
            jitter_buffer_ms: self.jitter_buffer_ms,
            playout_ms: self.playout_ms,
            rtt_source: self.rtt_source.to_string(),
            rtp_timestamp: self.rtp_timestamp,
        }
    }
}

/// What `GET /v1/sessions/{id}` shows of a session's turns.
#[derive(Debug, Clone, Serialize)]
pub struct TurnsSnapshot {
    /// Turns the transceiver saw end to end (speech, then a reply).
    pub seen: u32,
    /// The caller's reports dropped (see [`ReportDrop`]).
    pub reports_dropped: u64,
    /// The last few reported turns' splits, oldest first.
    pub last: Vec<TurnSplit>,
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// Milliseconds in the session's JSON: to 0.1 ms, as the caller gets them.
fn serialize_ms<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round1(*v))
}

fn serialize_optional_ms<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_some(&round1(*v)),
        None => s.serialize_none(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The caller's last speech packet: when it reached the socket, when the backend got it.
#[derive(Debug, Clone, Copy)]
struct SpeechEnd {
    arrival: Instant,
    handled: Instant,
}

/// A turn the transceiver saw end to end, waiting for the client's report.
#[derive(Debug, Clone, Copy)]
struct Turn {
    number: u32,
    end: SpeechEnd,
    onset: ReplyOnset,
    reported: bool,
}

/// The caller's speech and the turns it made (see the module docs).
#[derive(Debug, Default)]
pub struct TurnTimer {
    /// Loud packets since the last [`HANGOVER`] of quiet (a spurt once [`MIN_SPURT_PACKETS`]).
    spurt: u32,
    last_loud: Option<SpeechEnd>,
    /// The end of the last spurt, from its first quiet packet; `confirmed` once the quiet
    /// lasted [`HANGOVER`].
    end: Option<SpeechEnd>,
    confirmed: bool,
    /// The reply's onset after `end`, from the pacer.
    onset: Option<ReplyOnset>,
    /// The pacer is looking for the onset.
    watching: bool,
    turns: VecDeque<Turn>,
    numbered: u32,
    splits: VecDeque<TurnSplit>,
    /// Totals and dropped reports since the loop last looked.
    counts: TurnCounts,
    counted: bool,
    dropped_total: u64,
}

impl TurnTimer {
    /// An uplink packet's audio level (`None`: the packet carried none), the packet's arrival
    /// at the socket and when it was handed to the backend. Returns what the pacer should do.
    pub fn on_uplink_level(
        &mut self,
        level: Option<i8>,
        arrival: Instant,
        handled: Instant,
    ) -> Option<OnsetWatch> {
        let level = level?;
        if level >= VOICED_DBOV {
            self.spurt = self.spurt.saturating_add(1);
            self.last_loud = Some(SpeechEnd { arrival, handled });
            if self.spurt >= MIN_SPURT_PACKETS && self.end.is_some() {
                // The caller speaks again: the pause was not the end of a turn.
                self.end = None;
                self.confirmed = false;
                self.onset = None;
                if std::mem::take(&mut self.watching) {
                    return Some(OnsetWatch::Disarm);
                }
            }
            return None;
        }
        let last = self.last_loud?;
        let mut watch = None;
        if self.spurt >= MIN_SPURT_PACKETS && self.end.is_none() {
            self.end = Some(last);
            if !std::mem::replace(&mut self.watching, true) {
                watch = Some(OnsetWatch::Arm);
            }
        }
        if self.spurt > 0 && arrival.saturating_duration_since(last.arrival) >= HANGOVER {
            self.confirmed = self.end.is_some();
            self.spurt = 0;
            self.complete();
        }
        watch
    }

    /// The pacer found the reply's onset (and stopped looking).
    pub fn on_reply_onset(&mut self, onset: ReplyOnset) {
        self.watching = false;
        let Some(end) = self.end else {
            return;
        };
        self.onset = Some(onset);
        if onset.sent_at.saturating_duration_since(end.arrival) >= HANGOVER {
            // The caller's pause is long enough by now (it may send nothing while quiet).
            self.confirmed = true;
            self.spurt = 0;
        }
        self.complete();
    }

    fn complete(&mut self) {
        let (Some(end), Some(onset), true) = (self.end, self.onset, self.confirmed) else {
            return;
        };
        self.end = None;
        self.onset = None;
        self.confirmed = false;
        self.numbered += 1;
        if self.turns.len() == KEPT_TURNS {
            self.turns.pop_front();
        }
        self.turns.push_back(Turn {
            number: self.numbered,
            end,
            onset,
            reported: false,
        });
    }

    /// Turns the transceiver saw end to end so far.
    pub fn turns_seen(&self) -> u32 {
        self.numbered
    }

    /// The client's report of a turn: its split (also kept for the session's JSON), or why it
    /// was dropped (counted). `rtcp_rtt_ms` is the session's RTT from RTCP, if known.
    pub fn on_client_report(
        &mut self,
        bytes: &[u8],
        rtcp_rtt_ms: Option<f64>,
    ) -> Result<TurnSplit, ReportDrop> {
        let split = self.split_of(bytes, rtcp_rtt_ms);
        self.counted = true;
        match &split {
            Ok(s) => {
                self.counts.observe_total(s.total_ms / 1e3);
                if self.splits.len() == KEPT_TURNS {
                    self.splits.pop_front();
                }
                self.splits.push_back(s.clone());
            }
            Err(why) => {
                self.counts.dropped[*why as usize] += 1;
                self.dropped_total += 1;
            }
        }
        split
    }

    fn split_of(
        &mut self,
        bytes: &[u8],
        rtcp_rtt_ms: Option<f64>,
    ) -> Result<TurnSplit, ReportDrop> {
        let r = ClientReport::parse(bytes)?;
        let turn = match r.rtp_timestamp {
            Some(ts) => self
                .turns
                .iter_mut()
                .filter(|t| ts.wrapping_sub(t.onset.rtp_timestamp) <= MATCH_WINDOW_TICKS)
                .min_by_key(|t| ts.wrapping_sub(t.onset.rtp_timestamp)),
            None => self.turns.back_mut(),
        }
        .ok_or(ReportDrop::Unmatched)?;
        if std::mem::replace(&mut turn.reported, true) {
            return Err(ReportDrop::Repeated);
        }
        let (end, onset) = (turn.end, turn.onset);
        let span = ms(onset.sent_at.saturating_duration_since(end.arrival));
        if r.speech_end_to_heard_ms < span {
            return Err(ReportDrop::Inconsistent);
        }
        let queued = onset.queued_at.max(end.handled);
        let (rtt, rtt_source) = match (rtcp_rtt_ms, r.rtt_ms) {
            (Some(rtt), _) => (rtt, "rtcp"),
            (None, Some(rtt)) => (rtt, "client"),
            (None, None) => (0.0, "none"),
        };
        let jitter_buffer = r.jitter_buffer_ms.unwrap_or(0.0);
        Ok(TurnSplit {
            turn: turn.number,
            total_ms: r.speech_end_to_heard_ms + r.playout_ms.unwrap_or(0.0),
            capture_send_ms: r.speech_end_to_heard_ms - span - rtt - jitter_buffer,
            network_up_ms: rtt / 2.0,
            transceiver_up_ms: ms(end.handled.saturating_duration_since(end.arrival)),
            backend_ms: ms(queued.saturating_duration_since(end.handled)),
            transceiver_down_ms: ms(onset.sent_at.saturating_duration_since(queued)),
            network_down_ms: rtt / 2.0,
            jitter_buffer_ms: jitter_buffer,
            playout_ms: r.playout_ms,
            rtt_source,
            rtp_timestamp: onset.rtp_timestamp,
        })
    }

    /// The last few turns' splits, oldest first.
    pub fn splits(&self) -> impl Iterator<Item = &TurnSplit> {
        self.splits.iter()
    }

    pub fn snapshot(&self) -> TurnsSnapshot {
        TurnsSnapshot {
            seen: self.numbered,
            reports_dropped: self.dropped_total,
            last: self.splits.iter().cloned().collect(),
        }
    }

    /// Turn totals and dropped reports (by reason, in [`ReportDrop::ALL`]'s order) since the
    /// last call, for the loop's metrics.
    /// `None` when nothing was counted: the loop asks after every pass over the session.
    pub fn take_counts(&mut self) -> Option<TurnCounts> {
        std::mem::take(&mut self.counted).then(|| std::mem::take(&mut self.counts))
    }

    /// Reports dropped so far this session, by reason (for the session's JSON).
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }
}

#[cfg(test)]
mod tests;
