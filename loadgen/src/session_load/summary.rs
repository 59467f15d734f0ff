//! What a finished run measured, from the sessions' reports and the backend's snapshot:
//! setup latency from the start of signaling, media latency and its variation, loss, and the
//! window's deltas (packets, the server's CPU and RSS, our own CPU).

use std::time::Duration;

use voxgate_testkit::SessionReport;

use super::config::LoadConfig;
use super::driver::{Mark, Slot};
use super::result::{LoadResult, ServerUsage, SetupLatency, SetupSamples};
use crate::backend::SessionStats;
use crate::loss::{LossSummary, SessionLoss};
use crate::stats::{cdf_points, Summary};

/// Setup latency, media latency and loss over the sessions.
pub fn sessions(
    result: &mut LoadResult,
    cfg: &LoadConfig,
    slots: &[Slot],
    reports: &[SessionReport],
    snapshot: &std::collections::HashMap<String, SessionStats>,
) {
    // Setup latency, from the start of signaling.
    let ms = |d: Option<Duration>, s: &Slot| {
        d.map(|d| d.saturating_sub(s.offer_time).as_secs_f64() * 1e3)
    };
    let mut samples = SetupSamples::default();
    let mut latency = Vec::new();
    let mut variation = Vec::new();
    let mut losses = Vec::new();
    for (s, r) in slots.iter().zip(reports) {
        samples.answer.extend(ms(r.t_answer, s));
        samples.ice_connected.extend(ms(r.t_ice_connected, s));
        samples.dtls_connected.extend(ms(r.t_dtls_connected, s));
        let b = snapshot.get(&r.session_id);
        if let Some(first) = b.and_then(|b| b.first_frame_at) {
            samples.first_frame.push(
                first
                    .saturating_duration_since(s.post_started)
                    .as_secs_f64()
                    * 1e3,
            );
        }
        if let Some(b) = b {
            latency.extend_from_slice(&b.latency_us);
            if let Some(min) = b.latency_us.iter().copied().reduce(f64::min) {
                variation.extend(b.latency_us.iter().map(|x| x - min));
            }
            result.backend_downlink_sent += b.downlink_sent;
            result.backend_downlink_dropped += b.downlink_dropped;
        }
        if r.t_dtls_connected.is_some() {
            let up = if cfg.backend.is_some() {
                SessionLoss::from_parts(b.map(|b| &b.uplink), r.audio_packets_sent, 0, 0)
            } else {
                SessionLoss::default()
            };
            losses.push(SessionLoss {
                downlink_expected: r.audio_packets_received + r.audio_packets_lost,
                downlink_lost: r.audio_packets_lost,
                ..up
            });
        }
    }
    result.setup = SetupLatency {
        answer: Summary::of(&samples.answer),
        ice_connected: Summary::of(&samples.ice_connected),
        dtls_connected: Summary::of(&samples.dtls_connected),
        first_frame: Summary::of(&samples.first_frame),
        samples,
    };
    result.media_latency_us = Summary::of(&latency);
    result.media_latency_cdf = cdf_points(&latency, 300);
    result.media_latency_negative_fraction = if latency.is_empty() {
        0.0
    } else {
        latency.iter().filter(|&&x| x < 0.0).count() as f64 / latency.len() as f64
    };
    result.media_delay_variation_us = Summary::of(&variation);
    result.loss = LossSummary::of(&losses);
}

/// The window's deltas between its two marks; the server's usage when its pid was given
/// (`rss_before`: its RSS before the first session).
pub fn window(result: &mut LoadResult, cfg: &LoadConfig, a: &Mark, b: &Mark, rss_before: u64) {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    result.window_secs = secs;
    result.sessions_connected_window_start = a.totals.up;
    result.sessions_connected_window_end = b.totals.up;
    result.window_datagrams_sent = b.totals.sent - a.totals.sent;
    result.window_datagrams_received = b.totals.received - a.totals.received;
    result.window_audio_sent = b.totals.audio_sent - a.totals.audio_sent;
    result.window_audio_received = b.totals.audio_received - a.totals.audio_received;
    result.loadgen_frames_skipped = b.totals.skipped;
    result.loadgen_send_errors = b.totals.send_errors;
    result.loadgen_cpu_secs_window = (b.own_cpu.saturating_sub(a.own_cpu)).as_secs_f64();
    if let (Some(pid), Some(c0), Some(c1)) = (cfg.server_pid, a.server_cpu, b.server_cpu) {
        let cpu = c1.saturating_sub(c0).as_secs_f64();
        let sessions = a.totals.up.min(b.totals.up).max(1) as f64;
        let packets = (result.window_datagrams_sent + result.window_datagrams_received).max(1);
        result.server = Some(ServerUsage {
            pid,
            cpu_secs: cpu,
            cpu_per_session_sec: cpu / (sessions * secs),
            us_per_packet: cpu * 1e6 / packets as f64,
            cores: cpu / secs,
            rss_before_kib: rss_before,
            rss_window_start_kib: a.server_rss_kib,
            rss_window_end_kib: b.server_rss_kib,
            rss_per_session_kib: (b.server_rss_kib.saturating_sub(rss_before)) as f64 / sessions,
        });
    }
}
