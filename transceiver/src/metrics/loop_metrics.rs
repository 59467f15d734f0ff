//! Per-loop metric families and the handles one loop publishes into.
//!
//! [`LoopFamilies`] holds every family labelled by loop (I/O, drops, the bridge's counts and
//! hand-off latency, ICE-TCP); [`LoopFamilies::for_loop`] resolves one loop's handles once, so
//! the loop never hashes labels, and [`LoopMetrics::publish`] adds the loop's plain
//! [`LoopCounters`] to them.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::bulk_histogram::BulkHistogram;
use crate::metrics::counts::{
    DropReason, HandoffHistogram, LoopCounters, TcpCloseReason, TcpCounters,
};
use crate::metrics::labels::{LoopClassLabel, LoopLabel, LoopReasonLabel, SchedulingClass};
use crate::metrics::quality_histograms::QualityHistograms;

/// Every metric family labelled by media loop.
#[derive(Default)]
pub(super) struct LoopFamilies {
    datagrams_in: Family<LoopLabel, Counter>,
    bytes_in: Family<LoopLabel, Counter>,
    datagrams_out: Family<LoopLabel, Counter>,
    bytes_out: Family<LoopLabel, Counter>,
    send_errors: Family<LoopLabel, Counter>,
    drops: Family<LoopReasonLabel, Counter>,
    sessions_active: Family<LoopLabel, Gauge>,
    loop_busy: Family<LoopLabel, Gauge<f64, AtomicU64>>,
    loop_scheduling: Family<LoopClassLabel, Gauge>,
    wakeups: Family<LoopLabel, Counter>,
    rests: Family<LoopLabel, Counter>,
    read_holds: Family<LoopLabel, Counter>,
    unrouted: Family<LoopLabel, Counter>,
    media_path_moves: Family<LoopLabel, Counter>,
    uplink_frames: Family<LoopLabel, Counter>,
    uplink_concealed: Family<LoopLabel, Counter>,
    uplink_dropped: Family<LoopLabel, Counter>,
    downlink_frames: Family<LoopLabel, Counter>,
    tap_dropped: Family<LoopLabel, Counter>,
    downlink_dropped: Family<LoopReasonLabel, Counter>,
    downlink_full_ticks: Family<LoopLabel, Counter>,
    uplink_held: Family<LoopLabel, Counter>,
    uplink_held_dropped: Family<LoopLabel, Counter>,
    bridge_refused: Family<LoopReasonLabel, Counter>,
    handoff: Family<LoopLabel, BulkHistogram>,
    tcp_accepted: Family<LoopLabel, Counter>,
    tcp_closed: Family<LoopReasonLabel, Counter>,
    tcp_frames_in: Family<LoopLabel, Counter>,
    tcp_frames_out: Family<LoopLabel, Counter>,
    tcp_write_dropped: Family<LoopLabel, Counter>,
    tcp_connections: Family<LoopLabel, Gauge>,
}

impl LoopFamilies {
    /// Loop I/O, drops, sessions, busy ratio, scheduling, wakeups.
    pub(super) fn register_io(&self, registry: &mut Registry) {
        registry.register(
            "datagrams_in",
            "UDP datagrams received by a media loop",
            self.datagrams_in.clone(),
        );
        registry.register(
            "bytes_in",
            "UDP bytes received by a media loop",
            self.bytes_in.clone(),
        );
        registry.register(
            "datagrams_out",
            "UDP datagrams sent by a media loop",
            self.datagrams_out.clone(),
        );
        registry.register(
            "bytes_out",
            "UDP bytes sent by a media loop",
            self.bytes_out.clone(),
        );
        registry.register(
            "send_errors",
            "UDP sends that failed (datagram lost)",
            self.send_errors.clone(),
        );
        registry.register(
            "dropped_datagrams",
            "Datagrams dropped by a media loop before reaching a session, by reason",
            self.drops.clone(),
        );
        registry.register(
            "sessions_active",
            "Sessions owned by a media loop",
            self.sessions_active.clone(),
        );
        registry.register(
            "loop_busy_ratio",
            "Share of wall time a media loop spent working (not waiting in poll), last 0.5 s window",
            self.loop_busy.clone(),
        );
        registry.register(
            "loop_scheduling",
            "1 for the scheduling class a media loop's thread runs at (rt, high, normal; see --loop-priority)",
            self.loop_scheduling.clone(),
        );
        registry.register(
            "loop_wakeups",
            "Times a media loop woke from poll",
            self.wakeups.clone(),
        );
        registry.register(
            "loop_rests",
            "0.2 ms rests a saturated loop took after 2 ms without waiting, so other work on its core never starves (the kernel would take 50 ms at once)",
            self.rests.clone(),
        );
        registry.register(
            "loop_read_holds",
            "Times a media loop under steady traffic slept out its read window (--read-window-us) instead of waking per datagram",
            self.read_holds.clone(),
        );
        registry.register(
            "unrouted_transmits",
            "Datagrams a session produced for an address it has no authenticated path to (not sent)",
            self.unrouted.clone(),
        );
        registry.register(
            "media_path_moves",
            "Reply paths a media loop moved to the trusted relay a session's authenticated media now arrives through (relay failover)",
            self.media_path_moves.clone(),
        );
    }

    /// The audio bridge: uplink and downlink frames, taps, holds, hand-off latency.
    pub(super) fn register_bridge(&self, registry: &mut Registry) {
        registry.register(
            "bridge_uplink_frames",
            "PCM frames handed to backend streams (concealed ones included)",
            self.uplink_frames.clone(),
        );
        registry.register(
            "bridge_uplink_concealed",
            "Uplink frames synthesized by FEC or packet-loss concealment",
            self.uplink_concealed.clone(),
        );
        registry.register(
            "bridge_uplink_dropped",
            "Uplink messages dropped because a backend stream's queue was full",
            self.uplink_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_frames",
            "Opus frames sent to callers from backend audio",
            self.downlink_frames.clone(),
        );
        registry.register(
            "bridge_tap_dropped",
            "Uplink messages dropped because a tap's queue was full",
            self.tap_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_dropped",
            "Backend downlink audio dropped, by reason (oversize Opus packet, wrong audio mode)",
            self.downlink_dropped.clone(),
        );
        registry.register(
            "bridge_downlink_full_ticks",
            "20 ms ticks at which a session's downlink queue held its 30 s bound (the backend is back-pressured)",
            self.downlink_full_ticks.clone(),
        );
        registry.register(
            "bridge_uplink_held",
            "Uplink audio packets and data messages held while no backend owned the session, for the next owner",
            self.uplink_held.clone(),
        );
        registry.register(
            "bridge_uplink_held_dropped",
            "Held uplink items dropped because the hold was full (a second of audio, 32 data messages, 64 KiB)",
            self.uplink_held_dropped.clone(),
        );
        registry.register(
            "bridge_refused",
            "Backend requests a media loop refused, by reason (too_many_taps)",
            self.bridge_refused.clone(),
        );
        registry.register(
            "bridge_uplink_handoff_seconds",
            "Socket arrival of a caller's Opus packet to its PCM frame queued for the backends",
            self.handoff.clone(),
        );
    }

    /// The loops' own ICE-TCP listeners.
    pub(super) fn register_tcp(&self, registry: &mut Registry) {
        registry.register(
            "tcp_accepted",
            "ICE-TCP connections a media loop accepted",
            self.tcp_accepted.clone(),
        );
        registry.register(
            "tcp_closed",
            "ICE-TCP connections a media loop closed or refused, by reason",
            self.tcp_closed.clone(),
        );
        registry.register(
            "tcp_frames_in",
            "RFC 4571 frames received on a media loop's ICE-TCP connections",
            self.tcp_frames_in.clone(),
        );
        registry.register(
            "tcp_frames_out",
            "RFC 4571 frames queued or written on a media loop's ICE-TCP connections",
            self.tcp_frames_out.clone(),
        );
        registry.register(
            "tcp_write_dropped",
            "Frames dropped from full ICE-TCP write queues (a client that stops reading)",
            self.tcp_write_dropped.clone(),
        );
        registry.register(
            "tcp_connections",
            "ICE-TCP connections open on a media loop",
            self.tcp_connections.clone(),
        );
    }

    /// Handles for media loop `index`, resolved once so the loop never hashes labels.
    pub(super) fn for_loop(
        &self,
        index: usize,
        pcm_frames_encoded: &Counter,
        quality: &QualityHistograms,
    ) -> LoopMetrics {
        let l = LoopLabel {
            r#loop: index.to_string(),
        };
        let drops = DropReason::ALL.map(|r| {
            self.drops
                .get_or_create(&LoopReasonLabel {
                    r#loop: index.to_string(),
                    reason: r.as_str().to_string(),
                })
                .clone()
        });
        let with_reason = |family: &Family<LoopReasonLabel, Counter>, reason: &str| {
            family
                .get_or_create(&LoopReasonLabel {
                    r#loop: index.to_string(),
                    reason: reason.to_string(),
                })
                .clone()
        };
        LoopMetrics {
            downlink_oversize: with_reason(&self.downlink_dropped, "oversize"),
            downlink_wrong_mode: with_reason(&self.downlink_dropped, "wrong_mode"),
            downlink_full_ticks: self.downlink_full_ticks.get_or_create(&l).clone(),
            uplink_held: self.uplink_held.get_or_create(&l).clone(),
            uplink_held_dropped: self.uplink_held_dropped.get_or_create(&l).clone(),
            taps_refused: with_reason(&self.bridge_refused, "too_many_taps"),
            unrouted: self.unrouted.get_or_create(&l).clone(),
            media_path_moves: self.media_path_moves.get_or_create(&l).clone(),
            datagrams_in: self.datagrams_in.get_or_create(&l).clone(),
            bytes_in: self.bytes_in.get_or_create(&l).clone(),
            datagrams_out: self.datagrams_out.get_or_create(&l).clone(),
            bytes_out: self.bytes_out.get_or_create(&l).clone(),
            send_errors: self.send_errors.get_or_create(&l).clone(),
            wakeups: self.wakeups.get_or_create(&l).clone(),
            rests: self.rests.get_or_create(&l).clone(),
            read_holds: self.read_holds.get_or_create(&l).clone(),
            sessions_active: self.sessions_active.get_or_create(&l).clone(),
            busy: self.loop_busy.get_or_create(&l).clone(),
            scheduling: SchedulingClass::ALL
                .iter()
                .map(|c| {
                    let label = LoopClassLabel {
                        r#loop: index.to_string(),
                        class: c.as_str().to_string(),
                    };
                    (*c, self.loop_scheduling.get_or_create(&label).clone())
                })
                .collect(),
            drops,
            uplink_frames: self.uplink_frames.get_or_create(&l).clone(),
            uplink_concealed: self.uplink_concealed.get_or_create(&l).clone(),
            uplink_dropped: self.uplink_dropped.get_or_create(&l).clone(),
            downlink_frames: self.downlink_frames.get_or_create(&l).clone(),
            pcm_frames_encoded: pcm_frames_encoded.clone(),
            tap_dropped: self.tap_dropped.get_or_create(&l).clone(),
            handoff: self.handoff.get_or_create(&l).clone(),
            quality: quality.clone(),
            tcp_closed: TcpCloseReason::ALL.map(|r| with_reason(&self.tcp_closed, r.as_str())),
            tcp_accepted: self.tcp_accepted.get_or_create(&l).clone(),
            tcp_frames_in: self.tcp_frames_in.get_or_create(&l).clone(),
            tcp_frames_out: self.tcp_frames_out.get_or_create(&l).clone(),
            tcp_write_dropped: self.tcp_write_dropped.get_or_create(&l).clone(),
            tcp_connections: self.tcp_connections.get_or_create(&l).clone(),
        }
    }
}

/// Adds a pending count to its counter and zeroes it.
fn flush(c: &Counter, v: &mut u64) {
    if *v != 0 {
        c.inc_by(*v);
        *v = 0;
    }
}

/// One media loop's metric handles.
pub struct LoopMetrics {
    datagrams_in: Counter,
    bytes_in: Counter,
    datagrams_out: Counter,
    bytes_out: Counter,
    send_errors: Counter,
    wakeups: Counter,
    rests: Counter,
    read_holds: Counter,
    sessions_active: Gauge,
    busy: Gauge<f64, AtomicU64>,
    scheduling: Vec<(SchedulingClass, Gauge)>,
    drops: [Counter; DropReason::ALL.len()],
    uplink_frames: Counter,
    uplink_concealed: Counter,
    uplink_dropped: Counter,
    downlink_frames: Counter,
    /// The process-wide count (no loop label): admission reads the sum.
    pcm_frames_encoded: Counter,
    tap_dropped: Counter,
    downlink_oversize: Counter,
    downlink_wrong_mode: Counter,
    downlink_full_ticks: Counter,
    uplink_held: Counter,
    uplink_held_dropped: Counter,
    taps_refused: Counter,
    unrouted: Counter,
    media_path_moves: Counter,
    handoff: BulkHistogram,
    /// Process-wide (no loop label): quality is the caller's network, not the loop's.
    quality: QualityHistograms,
    tcp_accepted: Counter,
    tcp_closed: [Counter; TcpCloseReason::ALL.len()],
    tcp_frames_in: Counter,
    tcp_frames_out: Counter,
    tcp_write_dropped: Counter,
    tcp_connections: Gauge,
}

impl LoopMetrics {
    /// The loop's busy ratio of its last window (see `media::busy_meter`).
    pub fn set_busy(&self, ratio: f64) {
        self.busy.set(ratio);
    }

    /// The scheduling class the loop's thread got (see `media::thread_priority`).
    pub fn set_scheduling(&self, got: SchedulingClass) {
        for (class, gauge) in &self.scheduling {
            gauge.set(i64::from(*class == got));
        }
    }

    /// Adds the pending counts to the shared metrics and zeroes them.
    pub fn publish(&self, pending: &mut LoopCounters, sessions_active: usize) {
        flush(&self.datagrams_in, &mut pending.datagrams_in);
        flush(&self.bytes_in, &mut pending.bytes_in);
        flush(&self.datagrams_out, &mut pending.datagrams_out);
        flush(&self.bytes_out, &mut pending.bytes_out);
        flush(&self.send_errors, &mut pending.send_errors);
        flush(&self.wakeups, &mut pending.wakeups);
        flush(&self.rests, &mut pending.rests);
        flush(&self.read_holds, &mut pending.read_holds);
        for (c, v) in self.drops.iter().zip(pending.drops.iter_mut()) {
            flush(c, v);
        }
        let b = &mut pending.bridge;
        flush(&self.uplink_frames, &mut b.uplink_frames);
        flush(&self.uplink_concealed, &mut b.uplink_concealed);
        flush(&self.uplink_dropped, &mut b.uplink_dropped);
        flush(&self.downlink_frames, &mut b.downlink_frames);
        flush(&self.pcm_frames_encoded, &mut b.pcm_frames_encoded);
        flush(&self.tap_dropped, &mut b.tap_dropped);
        flush(&self.downlink_oversize, &mut b.downlink_oversize);
        flush(&self.downlink_wrong_mode, &mut b.downlink_wrong_mode);
        flush(&self.downlink_full_ticks, &mut b.downlink_full_ticks);
        flush(&self.uplink_held, &mut b.uplink_held);
        flush(&self.uplink_held_dropped, &mut b.uplink_held_dropped);
        flush(&self.taps_refused, &mut pending.taps_refused);
        flush(&self.unrouted, &mut pending.unrouted);
        flush(&self.media_path_moves, &mut pending.media_path_moves);
        b.downlink_cleared = 0;
        self.handoff.add(&pending.handoff);
        pending.handoff = HandoffHistogram::default();
        self.quality.publish(&mut pending.quality);
        self.sessions_active.set(sessions_active as i64);
    }

    /// Adds a loop's pending ICE-TCP counts and zeroes them; sets the open-connection gauge.
    pub fn publish_tcp(&self, t: &mut TcpCounters, open: usize) {
        flush(&self.tcp_accepted, &mut t.accepted);
        for (c, v) in self.tcp_closed.iter().zip(t.closed.iter_mut()) {
            flush(c, v);
        }
        flush(&self.tcp_frames_in, &mut t.frames_in);
        flush(&self.tcp_frames_out, &mut t.frames_out);
        flush(&self.tcp_write_dropped, &mut t.write_dropped);
        self.tcp_connections.set(open as i64);
    }
}
