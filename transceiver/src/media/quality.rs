//! What the caller's network is doing, per session and per direction, from RTCP: round-trip
//! time, interarrival jitter, loss (cumulative and recent) and a MOS estimate.
//!
//! Sans-IO: str0m's statistics events go in ([`QualityTracker::on_ingress`] for the uplink,
//! [`QualityTracker::on_egress`] for the downlink, each with its time), and out come the current
//! values ([`QualityTracker::now`]), a short history sampled every [`SAMPLE_EVERY`], the sample
//! just taken (for the loop's histograms and the backend's `Quality` message) and, at the end,
//! a summary of the call.
//!
//! Where each number comes from (str0m, RTCP):
//! - **RTT**: the client's receiver reports of our downlink (LSR/DLSR, RFC 3550 §6.4.1). An
//!   ICE-lite server sends no consent checks of its own and browsers answer no XR RRTR, so this
//!   is the one RTT there is; the network's round trip is the same for both directions. It
//!   needs downlink audio (sender reports go out only while we send), so it appears once the
//!   agent first speaks and then holds its last value.
//! - **Uplink** (caller → transceiver): the jitter and loss of the receiver reports *we* send
//!   (RFC 3550 interarrival jitter; cumulative loss from vendored str0m patch 2).
//! - **Downlink** (transceiver → caller): the jitter and loss the *client* reports of our media.
//!   Cumulative downlink loss is its cumulative "packets lost" over the packets the report
//!   covers (sent up to its highest sequence number: vendored str0m patch 3). Dividing by the
//!   packets sent by the time the stats were taken instead read 2.4 points low at 10 % loss
//!   15 s into a call (the report is up to 5 s old), measured in tests/browser_quality.rs.
//! - Everything here comes from the caller and is bounded first (`rtcp_bounds`).
//! - **Recent loss**: the "fraction lost" of the last receiver report (its interval, 1–5 s).
//!
//! **MOS**: the E-model of ITU-T G.107 in the simplified form of Cole & Rosenbluth (2001),
//! "Voice over IP performance monitoring", with default values for everything but delay and
//! loss:
//! - `R = 93.2 − Id − Ie_eff`, `MOS = 1 + 0.035 R + 7·10⁻⁶ R (R − 60)(100 − R)` (1 below R 0, 4.5
//!   above R 100): R 93.2 is 4.41; the codec's and the smallest jitter buffer's delay alone
//!   bring a perfect line to 4.39, and a 20 ms round trip with 2 ms of jitter reads 4.38 with
//!   no loss, 4.14 at 2 % and 3.11 at 10 %.
//! - Delay impairment `Id = 0.024 d + 0.11 (d − 177.3) H(d − 177.3)` with `d` the one-way
//!   mouth-to-ear delay the *network and the codec* add: `RTT / 2`, plus 26.5 ms of Opus
//!   (20 ms frame and 6.5 ms look-ahead), plus a jitter buffer estimated as `max(20 ms, 2 ×
//!   jitter)`. What the backend takes to answer is not in it: this scores the line, not the
//!   agent (the per-turn latency is measured separately). Before the first RTT (a call whose
//!   agent has not spoken yet has none: see RTT above) `d` counts no network delay.
//! - Loss impairment `Ie_eff = Ie + (95 − Ie) · Ppl / (Ppl + Bpl)` for random loss (BurstR 1),
//!   `Ppl` the recent loss in percent (the cumulative loss until a second report). G.113
//!   lists no Opus values; we take `Ie = 0` (Opus at voice bitrates is transparent on the
//!   E-model's narrowband scale) and `Bpl = 20`, a little
//!   more robust than G.711 with its Appendix I concealment (25.1 in G.113) and far less than
//!   Opus with in-band FEC, which the browser does not send by default without loss feedback.
//!
//! Cost: str0m produces statistics every [`STATS_INTERVAL`] (5 s) per session (a walk over its
//! two streams); this module's work is a few float operations per event. Nothing per packet.
//! Under callgrind this module, `rtcp_bounds`, the quality histograms and str0m's `stats.rs`
//! together ran 0.05 % of a 5-session window's instructions; paired CPU A/B runs against
//! statistics off have not resolved 1 % on the shared machine (docs/SESSION_COST.md, "Call
//! quality's cost").

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::media::rtcp_bounds::{self, EgressReport, Implausible, IngressReport};

/// How often str0m emits a session's statistics: as often as a sample is taken, so str0m's
/// stats timer wakes a session once per sample and no more.
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);
/// How often a sample joins the history, the histograms and the backend's stream.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept in the history (a minute at [`SAMPLE_EVERY`]).
pub const HISTORY: usize = 12;

/// Opus's RTP clock: jitter arrives in these units.
const RTP_CLOCK_HZ: f64 = 48_000.0;
/// Opus frame (20 ms) plus its encoder look-ahead (6.5 ms), in ms.
const CODEC_DELAY_MS: f64 = 26.5;
/// Smallest jitter buffer a receiver keeps, in ms.
const MIN_JITTER_BUFFER_MS: f64 = 20.0;
/// E-model equipment impairment and packet-loss robustness assumed for Opus (see above).
const OPUS_IE: f64 = 0.0;
const OPUS_BPL: f64 = 20.0;

/// One direction's current values.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct DirectionQuality {
    /// Interarrival jitter (RFC 3550), ms.
    pub jitter_ms: Option<f64>,
    /// Fraction lost in the last receiver report's interval, 0–1.
    pub loss_recent: Option<f64>,
    /// Fraction lost since the call began, 0–1.
    pub loss_total: Option<f64>,
    /// Packets lost since the call began.
    pub packets_lost: u64,
    /// Packets this direction carried (received by us, or sent by us).
    pub packets: u64,
    /// E-model MOS estimate (1–4.5) from this direction's jitter and recent loss and the RTT.
    pub mos: Option<f64>,
}

/// A session's current quality.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct QualityNow {
    /// Round-trip time, ms.
    pub rtt_ms: Option<f64>,
    /// Caller → transceiver.
    pub uplink: DirectionQuality,
    /// Transceiver → caller.
    pub downlink: DirectionQuality,
}

/// One history entry: the values at `at_ms` after the session began.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct QualitySample {
    pub at_ms: u64,
    pub rtt_ms: Option<f64>,
    pub uplink_jitter_ms: Option<f64>,
    pub uplink_loss: Option<f64>,
    pub uplink_mos: Option<f64>,
    pub downlink_jitter_ms: Option<f64>,
    pub downlink_loss: Option<f64>,
    pub downlink_mos: Option<f64>,
}

/// The whole call, for the end-of-call event.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct QualitySummary {
    pub samples: u64,
    pub rtt_ms_mean: Option<f64>,
    pub rtt_ms_max: Option<f64>,
    pub uplink_jitter_ms_max: Option<f64>,
    pub downlink_jitter_ms_max: Option<f64>,
    pub uplink_loss_total: Option<f64>,
    pub downlink_loss_total: Option<f64>,
    /// The mean and the worst of each sample's lower MOS of the two directions.
    pub mos_mean: Option<f64>,
    pub mos_min: Option<f64>,
}

/// What `GET /v1/sessions/{id}` shows: the current values and the last samples, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct QualitySnapshot {
    #[serde(flatten)]
    pub now: QualityNow,
    pub history: Vec<QualitySample>,
}

impl QualitySample {
    /// The backend's `Quality` message: this sample's time with the current values.
    pub fn to_proto(&self, now: &QualityNow) -> voxgate_proto::bridge::Quality {
        let direction = |d: &DirectionQuality| voxgate_proto::bridge::DirectionQuality {
            jitter_ms: d.jitter_ms,
            loss_recent: d.loss_recent,
            loss_total: d.loss_total,
            packets_lost: d.packets_lost,
            packets: d.packets,
            mos: d.mos,
        };
        voxgate_proto::bridge::Quality {
            at_ms: self.at_ms,
            rtt_ms: now.rtt_ms,
            uplink: Some(direction(&now.uplink)),
            downlink: Some(direction(&now.downlink)),
        }
    }
}

impl QualitySummary {
    /// The call's quality as a whole, for the backend's ENDED event.
    pub fn to_proto(&self) -> voxgate_proto::bridge::QualitySummary {
        voxgate_proto::bridge::QualitySummary {
            samples: self.samples,
            rtt_ms_mean: self.rtt_ms_mean,
            rtt_ms_max: self.rtt_ms_max,
            uplink_jitter_ms_max: self.uplink_jitter_ms_max,
            downlink_jitter_ms_max: self.downlink_jitter_ms_max,
            uplink_loss_total: self.uplink_loss_total,
            downlink_loss_total: self.downlink_loss_total,
            mos_mean: self.mos_mean,
            mos_min: self.mos_min,
        }
    }
}

/// Per-session quality state (see the module docs).
#[derive(Debug)]
pub struct QualityTracker {
    started: Instant,
    now: QualityNow,
    history: [QualitySample; HISTORY],
    /// Entries of `history` in use; the next goes at `next % HISTORY`.
    filled: usize,
    next: usize,
    next_sample_at: Instant,
    /// When a sample fell due, until it is taken.
    due: Option<Instant>,
    summary: Accumulated,
    /// Implausible values the client's reports carried, until the loop takes them.
    implausible: Implausible,
}

#[derive(Debug, Default)]
struct Accumulated {
    samples: u64,
    rtt_sum: f64,
    rtt_n: u64,
    rtt_max: Option<f64>,
    up_jitter_max: Option<f64>,
    down_jitter_max: Option<f64>,
    mos_sum: f64,
    mos_n: u64,
    mos_min: Option<f64>,
}

impl QualityTracker {
    pub fn new(started: Instant) -> Self {
        QualityTracker {
            started,
            now: QualityNow::default(),
            history: [QualitySample::default(); HISTORY],
            filled: 0,
            next: 0,
            next_sample_at: started + SAMPLE_EVERY,
            due: None,
            summary: Accumulated::default(),
            implausible: Implausible::default(),
        }
    }

    /// str0m's uplink statistics of `at`, bounded (see `rtcp_bounds`).
    pub fn on_ingress_stats(&mut self, at: Instant, st: &str0m::stats::MediaIngressStats) {
        let r = rtcp_bounds::ingress(st, &mut self.implausible);
        self.on_ingress(at, r);
    }

    /// str0m's downlink statistics of `at`, bounded (see `rtcp_bounds`).
    pub fn on_egress_stats(&mut self, at: Instant, st: &str0m::stats::MediaEgressStats) {
        let r = rtcp_bounds::egress(st, &mut self.implausible);
        self.on_egress(at, r);
    }

    /// The implausible values counted since the last call.
    pub fn take_implausible(&mut self) -> Implausible {
        std::mem::take(&mut self.implausible)
    }

    pub fn now(&self) -> QualityNow {
        self.now
    }

    /// The uplink's report of `at`.
    pub fn on_ingress(&mut self, at: Instant, r: IngressReport) {
        let up = &mut self.now.uplink;
        up.packets = r.packets;
        up.packets_lost = r.packets_lost;
        // str0m reports jitter 0 and no loss before its first receiver report.
        if r.loss.is_some() || r.packets_lost > 0 {
            up.jitter_ms = r.jitter.map(rtp_to_ms).or(up.jitter_ms);
            up.loss_total = Some(loss_fraction(r.packets_lost, r.packets + r.packets_lost));
        }
        if let Some(l) = r.loss {
            up.loss_recent = Some(f64::from(l));
        }
        self.rescore();
        self.maybe_sample(at);
    }

    /// The downlink's report of `at`.
    pub fn on_egress(&mut self, at: Instant, r: EgressReport) {
        if let Some(rtt) = r.rtt {
            self.now.rtt_ms = Some(rtt.as_secs_f64() * 1e3);
        }
        let down = &mut self.now.downlink;
        down.packets = r.packets;
        if let Some(remote) = r.remote {
            down.jitter_ms = remote.jitter.map(rtp_to_ms).or(down.jitter_ms);
            down.packets_lost = remote.lost;
            down.loss_total = Some(loss_fraction(remote.lost, remote.expected));
        }
        if let Some(l) = r.loss {
            down.loss_recent = Some(f64::from(l));
        }
        self.rescore();
        self.maybe_sample(at);
    }

    /// The sample due since the last call, if any: taken now, from the current values.
    pub fn take_sample(&mut self) -> Option<QualitySample> {
        let at = self.due.take()?;
        Some(self.sample(at))
    }

    pub fn snapshot(&self) -> QualitySnapshot {
        let start = if self.filled < HISTORY { 0 } else { self.next };
        let history = (0..self.filled)
            .map(|i| self.history[(start + i) % HISTORY])
            .collect();
        QualitySnapshot {
            now: self.now,
            history,
        }
    }

    pub fn summary(&self) -> QualitySummary {
        let a = &self.summary;
        QualitySummary {
            samples: a.samples,
            rtt_ms_mean: (a.rtt_n > 0).then(|| a.rtt_sum / a.rtt_n as f64),
            rtt_ms_max: a.rtt_max,
            uplink_jitter_ms_max: a.up_jitter_max,
            downlink_jitter_ms_max: a.down_jitter_max,
            uplink_loss_total: self.now.uplink.loss_total,
            downlink_loss_total: self.now.downlink.loss_total,
            mos_mean: (a.mos_n > 0).then(|| a.mos_sum / a.mos_n as f64),
            mos_min: a.mos_min,
        }
    }

    fn rescore(&mut self) {
        let rtt = self.now.rtt_ms;
        for d in [&mut self.now.uplink, &mut self.now.downlink] {
            // Until an RTT is known (it needs downlink audio: the client's receiver reports
            // time our sender reports), the score counts no network delay.
            // Before a second report gives a recent fraction, the cumulative one stands in.
            let loss = d.loss_recent.or(d.loss_total).unwrap_or(0.0);
            d.mos = d
                .jitter_ms
                .map(|jitter| mos(rtt.unwrap_or(0.0), jitter, loss));
        }
    }

    /// Marks a sample due; [`QualityTracker::take_sample`] takes it, once the events of one
    /// stats round (uplink and downlink come together) are all in.
    fn maybe_sample(&mut self, at: Instant) {
        if at < self.next_sample_at {
            return;
        }
        // Stay on the grid, but never owe more than one sample after a pause.
        self.next_sample_at = (self.next_sample_at + SAMPLE_EVERY).max(at + SAMPLE_EVERY / 2);
        self.due = Some(at);
    }

    fn sample(&mut self, at: Instant) -> QualitySample {
        let n = self.now;
        let sample = QualitySample {
            at_ms: at.saturating_duration_since(self.started).as_millis() as u64,
            rtt_ms: n.rtt_ms,
            uplink_jitter_ms: n.uplink.jitter_ms,
            uplink_loss: n.uplink.loss_recent,
            uplink_mos: n.uplink.mos,
            downlink_jitter_ms: n.downlink.jitter_ms,
            downlink_loss: n.downlink.loss_recent,
            downlink_mos: n.downlink.mos,
        };
        self.history[self.next % HISTORY] = sample;
        self.next = (self.next + 1) % HISTORY;
        self.filled = (self.filled + 1).min(HISTORY);
        let a = &mut self.summary;
        a.samples += 1;
        if let Some(r) = n.rtt_ms {
            a.rtt_sum += r;
            a.rtt_n += 1;
            a.rtt_max = Some(a.rtt_max.map_or(r, |m| m.max(r)));
        }
        max_into(&mut a.up_jitter_max, n.uplink.jitter_ms);
        max_into(&mut a.down_jitter_max, n.downlink.jitter_ms);
        let worst = match (n.uplink.mos, n.downlink.mos) {
            (Some(u), Some(d)) => Some(u.min(d)),
            (u, d) => u.or(d),
        };
        if let Some(m) = worst {
            a.mos_sum += m;
            a.mos_n += 1;
            a.mos_min = Some(a.mos_min.map_or(m, |x| x.min(m)));
        }
        sample
    }
}

fn max_into(slot: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *slot = Some(slot.map_or(v, |m| m.max(v)));
    }
}

fn rtp_to_ms(jitter: u32) -> f64 {
    f64::from(jitter) / RTP_CLOCK_HZ * 1e3
}

fn loss_fraction(lost: u64, expected: u64) -> f64 {
    if expected == 0 {
        0.0
    } else {
        (lost as f64 / expected as f64).min(1.0)
    }
}

/// The E-model's MOS for a round trip, a jitter (both ms) and a loss fraction (see the module
/// docs for the model and its constants).
pub fn mos(rtt_ms: f64, jitter_ms: f64, loss: f64) -> f64 {
    let jitter_buffer = (2.0 * jitter_ms).max(MIN_JITTER_BUFFER_MS);
    let d = rtt_ms / 2.0 + CODEC_DELAY_MS + jitter_buffer;
    let id = 0.024 * d + if d > 177.3 { 0.11 * (d - 177.3) } else { 0.0 };
    let ppl = (loss * 100.0).clamp(0.0, 100.0);
    let ie_eff = OPUS_IE + (95.0 - OPUS_IE) * ppl / (ppl + OPUS_BPL);
    r_to_mos(93.2 - id - ie_eff)
}

fn r_to_mos(r: f64) -> f64 {
    if r <= 0.0 {
        1.0
    } else if r >= 100.0 {
        4.5
    } else {
        1.0 + 0.035 * r + 7e-6 * r * (r - 60.0) * (100.0 - r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::rtcp_bounds::RemoteReport;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn remote(jitter: u32, lost: u64, expected: u64) -> RemoteReport {
        RemoteReport {
            jitter: Some(jitter),
            lost,
            expected,
        }
    }

    #[test]
    fn a_clean_line_scores_about_4_4_and_mos_falls_with_loss_delay_and_jitter() {
        let clean = mos(20.0, 2.0, 0.0);
        assert!((4.3..=4.45).contains(&clean), "{clean}");
        let lossy2 = mos(20.0, 2.0, 0.02);
        let lossy10 = mos(20.0, 2.0, 0.10);
        let far = mos(400.0, 2.0, 0.0);
        let jittery = mos(20.0, 60.0, 0.0);
        assert!(
            clean > lossy2 && lossy2 > lossy10,
            "{clean} {lossy2} {lossy10}"
        );
        assert!(clean > far && clean > jittery, "{far} {jittery}");
        // 10 % random loss on a voice line is "poor" in every published reading of G.107.
        assert!(lossy10 < 3.2, "{lossy10}");
        assert_eq!(r_to_mos(-5.0), 1.0);
        assert_eq!(r_to_mos(120.0), 4.5);
    }

    #[test]
    fn reports_become_per_direction_values() {
        let t0 = Instant::now();
        let mut q = QualityTracker::new(t0);
        assert_eq!(
            q.now().uplink.jitter_ms,
            None,
            "nothing before the first report"
        );
        q.on_ingress(
            t0 + ms(1000),
            IngressReport {
                jitter: Some(480),
                loss: Some(0.05),
                packets: 95,
                packets_lost: 5,
            },
        );
        q.on_egress(
            t0 + ms(1000),
            EgressReport {
                rtt: Some(ms(80)),
                loss: Some(0.0),
                packets: 100,
                remote: Some(remote(96, 2, 100)),
            },
        );
        let n = q.now();
        assert_eq!(n.rtt_ms, Some(80.0));
        assert_eq!(n.uplink.jitter_ms, Some(10.0));
        assert_eq!(n.uplink.loss_total, Some(0.05));
        assert!((n.uplink.loss_recent.unwrap() - 0.05).abs() < 1e-6);
        assert_eq!(n.downlink.jitter_ms, Some(2.0));
        assert_eq!(n.downlink.loss_total, Some(0.02));
        let (up, down) = (n.uplink.mos.unwrap(), n.downlink.mos.unwrap());
        assert!(up < down, "the lossy uplink scores lower: {up} {down}");
    }

    #[test]
    fn samples_every_five_seconds_into_a_bounded_history_and_a_summary() {
        let t0 = Instant::now();
        let mut q = QualityTracker::new(t0);
        let mut taken = 0;
        for s in 1..=120u64 {
            q.on_egress(
                t0 + ms(s * 1000),
                EgressReport {
                    rtt: Some(ms(40 + s % 7)),
                    loss: Some(0.0),
                    packets: s * 50,
                    remote: Some(remote(48, 0, s * 50)),
                },
            );
            taken += usize::from(q.take_sample().is_some());
        }
        assert_eq!(taken, 24, "one sample per 5 s of 120 s");
        let snap = q.snapshot();
        assert_eq!(snap.history.len(), HISTORY);
        let at: Vec<u64> = snap.history.iter().map(|s| s.at_ms).collect();
        assert!(
            at.windows(2).all(|w| w[1] == w[0] + 5000),
            "oldest first: {at:?}"
        );
        assert_eq!(*at.last().unwrap(), 120_000);
        let sum = q.summary();
        assert_eq!(sum.samples, 24);
        assert!(sum.rtt_ms_max.unwrap() <= 46.0 && sum.rtt_ms_mean.unwrap() > 40.0);
        assert!(sum.mos_min.unwrap() > 4.0, "{sum:?}");
    }

    #[test]
    fn a_pause_owes_one_sample_not_a_burst() {
        let t0 = Instant::now();
        let mut q = QualityTracker::new(t0);
        let r = EgressReport {
            rtt: Some(ms(10)),
            loss: None,
            packets: 1,
            remote: None,
        };
        q.on_egress(t0 + ms(60_000), r);
        assert!(q.take_sample().is_some());
        q.on_egress(t0 + ms(61_000), r);
        assert!(q.take_sample().is_none(), "the next sample waits");
    }
}
