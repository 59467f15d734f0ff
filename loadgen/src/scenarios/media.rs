//! Media latency: packet at the transceiver's socket → PCM frame at the backend, measured in
//! the PCM cost runs (it runs nothing of its own). Two views: the backend's receive time
//! (includes the gRPC hop), and the transceiver's own hand-off histogram (the target's
//! definition), scraped from `/metrics` around the window.

use std::fmt::Write as _;

use crate::prom_hist::HandoffLatency;
use crate::report::cells::{at_most, med, num, thousands};
use crate::scenarios::cost::CostPoint;
use crate::session_load::LoadResult;
use crate::stats::median;

/// The runs' in-transceiver hand-off histograms that saw frames.
fn handoffs(runs: &[LoadResult]) -> Vec<&HandoffLatency> {
    runs.iter()
        .filter_map(|x| x.transceiver_handoff.as_ref())
        .filter(|h| h.count > 0)
        .collect()
}

/// The median of `f` over the runs' in-transceiver hand-off histograms (`None` if none).
fn handoff_med(runs: &[LoadResult], f: impl Fn(&HandoffLatency) -> f64) -> Option<f64> {
    median(&handoffs(runs).into_iter().map(f).collect::<Vec<_>>())
}

/// The histogram bucket(s) a hand-off percentile fell in over the runs, in ms: "≤ 0.050"
/// (upper bound), "> 25.000" (the `+Inf` bucket), or a range of bounds when runs differ.
fn handoff_bucket(runs: &[LoadResult], f: impl Fn(&HandoffLatency) -> Option<f64>) -> String {
    let hs = handoffs(runs);
    let bound = |h: &HandoffLatency| f(h).map_or(f64::INFINITY, |b| b / 1e3);
    let lo = hs.iter().map(|h| bound(h)).fold(f64::INFINITY, f64::min);
    let hi = hs
        .iter()
        .map(|h| bound(h))
        .fold(f64::NEG_INFINITY, f64::max);
    let last = hs
        .first()
        .and_then(|h| h.bucket_le_us.last())
        .map_or(f64::NAN, |b| b / 1e3);
    let show = |b: f64| {
        if b.is_finite() {
            format!("≤ {b:.3}")
        } else {
            format!("> {last:.3}")
        }
    };
    match hs.len() {
        0 => "–".into(),
        _ if lo == hi => show(lo),
        _ => format!("{} … {}", show(lo), show(hi)),
    }
}

/// A hand-off percentile estimate in ms; "≥ x" when a run's rank fell in the open-ended
/// `+Inf` bucket (its estimate is then only the last finite bound).
fn handoff_value(
    runs: &[LoadResult],
    est: impl Fn(&HandoffLatency) -> f64,
    bound: impl Fn(&HandoffLatency) -> Option<f64>,
) -> String {
    let v = num(handoff_med(runs, |h| est(h) / 1e3), 3);
    if handoffs(runs).iter().any(|h| bound(h).is_none()) {
        format!("≥ {v}")
    } else {
        v
    }
}

/// The PCM points that have runs.
fn pcm(cost: &[CostPoint]) -> impl Iterator<Item = &CostPoint> {
    cost.iter()
        .filter(|p| p.mode == "pcm" && !p.runs.is_empty())
}

/// The Targets row: hand-off p99 at 500 PCM sessions (the backend-side p99 beside it, or in
/// its place when the run has no histogram).
pub fn targets(md: &mut String, cost: &[CostPoint], loops: usize) {
    let Some(p) = pcm(cost).find(|p| p.sessions == 500) else {
        return;
    };
    let backend_p99 = med(&p.runs, |x| x.media_latency_us.p99 / 1e3);
    let handoff_p99 = handoff_med(&p.runs, |h| h.p99_us / 1e3);
    // Admission control may have held the run below the 500 sessions the target names.
    let carried = med(&p.runs, |x| x.sessions_connected_window_end as f64).unwrap_or(0.0);
    let short = carried < p.sessions as f64;
    match handoff_p99 {
        Some(_) => {
            let verdict = at_most(handoff_p99, 1.0, "ms");
            let _ = writeln!(
                md,
                "| media latency (packet at the transceiver socket → PCM frame handed to the gRPC stream) p99 ≤ 1 ms at 500 \
                 sessions | {} ms in the transceiver (bucket estimate; bucket {} ms){}; backend-side p99, including the gRPC \
                 hop: {} ms | {} |",
                handoff_value(&p.runs, |h| h.p99_us, |h| h.p99_bucket_le_us),
                handoff_bucket(&p.runs, |h| h.p99_bucket_le_us),
                if short {
                    format!(
                        ", at {carried:.0} sessions: one loop's PCM capacity here (the rest were refused with 503)"
                    )
                } else {
                    String::new()
                },
                num(backend_p99, 2),
                if short {
                    format!(
                        "{} at {carried:.0} sessions; 500 PCM sessions need more loops than this run's {}",
                        verdict.replace("**", ""),
                        loops
                    )
                } else {
                    verdict
                }
            );
        }
        None => {
            let _ = writeln!(
                md,
                "| media latency (packet at the transceiver socket → PCM frame handed to the gRPC stream) p99 ≤ 1 ms at 500 \
                 sessions | in-transceiver hand-off not measured in this run; backend-side p99, including the gRPC hop (an \
                 upper bound): {} ms | {} |",
                num(backend_p99, 2),
                match backend_p99 {
                    Some(b) if b <= 1.0 => at_most(backend_p99, 1.0, "ms"),
                    _ => "not measured".into(),
                }
            );
        }
    }
}

/// The "Media latency" section: the backend-side table, then the in-transceiver one.
pub fn section(md: &mut String, cost: &[CostPoint]) {
    let _ = writeln!(md, "## Media latency\n");
    let _ = writeln!(
        md,
        "Packet arrival at the transceiver's socket (`AudioFrame.arrival_unix_micros`, stamped by the transceiver) → the PCM \
         frame received by the backend's gRPC stream (wall clock, same machine), in the PCM cost runs. This includes the \
         gRPC hop and the backend's own scheduling, so it is an upper bound of the hand-off time. *Delay variation* is each \
         sample minus the fastest sample of its own session: the delay a frame picked up above its session's best case, \
         which no per-session clock offset can bias.\n"
    );
    let _ = writeln!(md, "| sessions | frames sampled | p50 ms | p90 ms | p99 ms | max ms | min ms | samples < 0 | delay variation p50 / p99 ms |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for p in pcm(cost) {
        let runs = &p.runs;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} % | {} / {} |",
            p.sessions,
            thousands(med(runs, |x| x.media_latency_us.count as f64)),
            num(med(runs, |x| x.media_latency_us.p50 / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.p90 / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.p99 / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.max / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.min / 1e3), 3),
            num(med(runs, |x| 100.0 * x.media_latency_negative_fraction), 1),
            num(med(runs, |x| x.media_delay_variation_us.p50 / 1e3), 3),
            num(med(runs, |x| x.media_delay_variation_us.p99 / 1e3), 3),
        );
    }
    let _ = writeln!(md, "\n![media latency CDF](media_latency_cdf.svg)\n");
    handoff_table(md, cost);
    md.push('\n');
}

fn handoff_table(md: &mut String, cost: &[CostPoint]) {
    let _ = writeln!(
        md,
        "In-transceiver hand-off, the target's own definition: packet arrival at the transceiver's socket (the kernel's \
         receive stamp, so the time a packet waited in the socket for the loop is in it) → PCM frame \
         handed to the gRPC stream, from the transceiver's `voxgate_bridge_uplink_handoff_seconds` histogram (summed over \
         its media loops), scraped from its `/metrics` at the start and at the end of the window; the table uses the \
         bucket deltas. Percentiles are **bucket estimates**: linear interpolation inside the histogram bucket that holds \
         the rank; the bucket's upper bound is given next to each (the true percentile lies in that bucket, `>` is the \
         open-ended last bucket). The backend-side columns repeat the table above for comparison. *Steal* is the share \
         of the server's core the hypervisor ran something else on while the server wanted it (`/proc/stat`, median of \
         the runs): a wakeup that came late for that reason is in the hand-off too.\n"
    );
    let _ = writeln!(
        md,
        "| sessions | frames observed | mean ms | p50 ms (estimate) | p50 bucket ms | p99 ms (estimate) | p99 bucket ms | steal % | backend-side p50 / p99 ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for p in pcm(cost) {
        let runs = &p.runs;
        let backend = format!(
            "{} / {}",
            num(med(runs, |x| x.media_latency_us.p50 / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.p99 / 1e3), 3)
        );
        if handoffs(runs).is_empty() {
            let _ = writeln!(
                md,
                "| {} | not measured | – | – | – | – | – | – | {backend} |",
                p.sessions
            );
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {backend} |",
            p.sessions,
            thousands(handoff_med(runs, |h| h.count as f64)),
            num(handoff_med(runs, |h| h.mean_us / 1e3), 3),
            handoff_value(runs, |h| h.p50_us, |h| h.p50_bucket_le_us),
            handoff_bucket(runs, |h| h.p50_bucket_le_us),
            handoff_value(runs, |h| h.p99_us, |h| h.p99_bucket_le_us),
            handoff_bucket(runs, |h| h.p99_bucket_le_us),
            num(steal_percent(runs), 1),
        );
    }
}

/// Median over the runs that measured it of the server cores' steal, in %.
fn steal_percent(runs: &[LoadResult]) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|x| x.server_steal_fraction.map(|f| 100.0 * f))
        .collect();
    median(&v)
}

/// Why the media latency target was missed, if it was, at the first PCM point of 500
/// sessions or more (else the first PCM point): Nagle on the gRPC sockets, stamps ahead of
/// the clock. True when it wrote a note.
pub fn why(md: &mut String, cost: &[CostPoint]) -> bool {
    let Some(p) = pcm(cost)
        .find(|p| p.sessions >= 500)
        .or_else(|| pcm(cost).next())
    else {
        return false;
    };
    let p99 = med(&p.runs, |x| x.media_latency_us.p99 / 1e3).unwrap_or(0.0);
    // The target is judged on the in-transceiver hand-off when the run measured it.
    let handoff_p99 = handoff_med(&p.runs, |h| h.p99_us / 1e3);
    if handoff_p99.unwrap_or(p99) <= 1.0 {
        return false;
    }
    let p50 = med(&p.runs, |x| x.media_latency_us.p50 / 1e3).unwrap_or(0.0);
    let max = med(&p.runs, |x| x.media_latency_us.max / 1e3).unwrap_or(0.0);
    let var99 = med(&p.runs, |x| x.media_delay_variation_us.p99 / 1e3).unwrap_or(0.0);
    if let Some(h99) = handoff_p99 {
        let _ = write!(
            md,
            "- **Media latency**: in-transceiver hand-off p99 {h99:.3} ms (bucket estimate, bucket {} ms); \
             backend-side p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ms; delay variation p99 {var99:.1} ms; {} \
             sessions. ",
            handoff_bucket(&p.runs, |h| h.p99_bucket_le_us),
            p.sessions
        );
    } else {
        let _ = write!(
            md,
            "- **Media latency** (p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.1} ms; delay variation p99 {var99:.1} ms; {} \
             sessions). ",
            p.sessions
        );
    }
    nagle_note(md, &p.runs);
    stamp_note(md, &p.runs);
    md.push('\n');
    true
}

/// TCP_NODELAY off on the transceiver's gRPC sockets explains a 0–40 ms spread.
fn nagle_note(md: &mut String, runs: &[LoadResult]) {
    let sockets: Vec<bool> = runs
        .iter()
        .flat_map(|x| x.server_grpc_nodelay.iter().copied())
        .collect();
    let off = sockets.iter().filter(|&&b| !b).count();
    if off > 0 {
        let _ = write!(
            md,
            "The run read the transceiver's accepted gRPC sockets from outside (`pidfd_getfd` + `getsockopt`): \
             TCP_NODELAY was **off on {off} of {}**. With Nagle on, a small HTTP/2 DATA frame waits for the ACK of the \
             previous one, and the backend's kernel delays that ACK up to 40 ms: exactly the 0–40 ms spread seen here. \
             Cause: `transceiver/src/main.rs` serves gRPC with `serve_with_incoming_shutdown(TcpListenerStream)`, for \
             which tonic ignores its `tcp_nodelay` setting (it applies only to listeners tonic binds itself). Fix: \
             `set_nodelay(true)` on each accepted stream. ",
            sockets.len()
        );
    }
}

/// Negative samples: the transceiver's arrival stamps run ahead of the wall clock.
fn stamp_note(md: &mut String, runs: &[LoadResult]) {
    let neg = med(runs, |x| 100.0 * x.media_latency_negative_fraction).unwrap_or(0.0);
    let min = med(runs, |x| x.media_latency_us.min / 1e3).unwrap_or(0.0);
    if neg > 0.0 {
        let _ = write!(
            md,
            "{neg:.1} % of samples are negative (min {min:.2} ms): the transceiver's `arrival_unix_micros` runs ahead \
             of the real wall clock by up to that much. `AudioBridge` converts `Instant`s with a `WallClock` calibrated \
             once per session as (an `Instant` passed in, `SystemTime::now()` read later): any delay between the two \
             becomes a constant per-session error. Fix: read both clocks together at calibration. Until then the \
             absolute numbers carry that error; the delay-variation column does not."
        );
    }
}
