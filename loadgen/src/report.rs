//! Turns a suite's results JSON into `docs/BENCHMARKS.md` and its SVG plots.
//!
//! Every number printed comes from the JSON (medians over the repetitions of a scenario);
//! targets are the issue's, written here once, and each row says whether the run met it and,
//! if not, by how much. Where a target is missed the "Why" notes quote the run's own evidence
//! (perf profiles of the transceiver, latency shapes, loss and saturation counters).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

use crate::prom_hist::HandoffLatency;
use crate::relay_load::FlowResult;
use crate::session_load::LoadResult;
use crate::stats::median;
use crate::suite::{CostPoint, SuiteResults};
use crate::svg::{Chart, Series};

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// The suite's results JSON.
    #[arg(long)]
    pub results: PathBuf,
    /// Folder to write BENCHMARKS.md and the SVGs into.
    #[arg(long)]
    pub docs: PathBuf,
}

pub fn run(a: &ReportArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.results)
        .with_context(|| format!("reading {}", a.results.display()))?;
    let r: SuiteResults = serde_json::from_str(&text).context("parsing the results")?;
    std::fs::create_dir_all(&a.docs)?;
    for (name, svg) in charts(&r) {
        std::fs::write(a.docs.join(name), svg)?;
    }
    let md = markdown(&r);
    let out = a.docs.join("BENCHMARKS.md");
    std::fs::write(&out, md).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("report: wrote {}", out.display());
    Ok(())
}

/// The median of `f` over `runs`.
fn med<T>(runs: &[T], f: impl Fn(&T) -> f64) -> Option<f64> {
    median(&runs.iter().map(f).collect::<Vec<_>>())
}

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

fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

fn thousands(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let s = format!("{:.0}", v);
            let neg = s.starts_with('-');
            let digits: Vec<char> = s.trim_start_matches('-').chars().collect();
            let groups: Vec<String> = digits
                .rchunks(3)
                .rev()
                .map(|g| g.iter().collect())
                .collect();
            let out = groups.join(",");
            if neg {
                format!("-{out}")
            } else {
                out
            }
        }
        _ => "–".into(),
    }
}

/// "met" or "missed by …", for a measured value that must stay at or below `limit`.
fn at_most(measured: Option<f64>, limit: f64, unit: &str) -> String {
    match measured {
        None => "not measured".into(),
        Some(m) if m <= limit => format!("**met** ({:.0} % of the limit)", 100.0 * m / limit),
        Some(m) => format!(
            "**missed** by {:.3} {unit} ({:.2}× the limit)",
            m - limit,
            m / limit
        ),
    }
}

/// For a measured value that must be at least `limit`.
fn at_least(measured: Option<f64>, limit: f64) -> String {
    match measured {
        None => "not measured".into(),
        Some(m) if m >= limit => "**met**".into(),
        Some(m) => format!(
            "**missed** by {:.3} ({:.0} % of the target)",
            limit - m,
            100.0 * m / limit
        ),
    }
}

fn cost_point<'a>(r: &'a SuiteResults, mode: &str, n: usize) -> Option<&'a CostPoint> {
    r.cost
        .iter()
        .find(|p| p.mode == mode && p.sessions == n && !p.runs.is_empty())
}

/// Server CPU over the libopus cost of the frames it actually handled in the window: every
/// uplink packet the clients sent decoded, every downlink packet they received encoded.
fn work_floor_ratio(
    runs: &[LoadResult],
    floor: Option<&crate::codec_floor::CodecFloor>,
) -> Option<f64> {
    let f = floor?;
    let ratios: Vec<f64> = runs
        .iter()
        .filter_map(|r| {
            let cpu = r.server.as_ref()?.cpu_secs;
            let work = (r.window_audio_sent as f64 * f.decode_us_per_frame
                + r.window_audio_received as f64 * f.encode_us_per_frame)
                / 1e6;
            (work > 0.0).then_some(cpu / work)
        })
        .collect();
    median(&ratios)
}

/// Why a run measured less than its nominal load, if it did.
fn shortfall(r: &LoadResult, sessions: usize) -> String {
    let mut notes = Vec::new();
    if r.ramp_truncated {
        notes.push(format!(
            "server stopped admitting in time: {} of {} sessions signaled",
            r.sessions_signaled, sessions
        ));
    }
    let saturated = r
        .first_signaling_error
        .as_deref()
        .is_some_and(|e| e.contains("saturated"));
    if r.signaling_errors > 0 && saturated {
        notes.push(format!(
            "capacity reached: the transceiver admitted {} of {} and refused {} with 503 (media \
             loop past --max-loop-busy); measured at the admitted load",
            r.sessions_signaled, sessions, r.signaling_errors
        ));
    } else if r.signaling_errors > 0 {
        notes.push(format!(
            "{} signaling errors, first: {}",
            r.signaling_errors,
            r.first_signaling_error.as_deref().unwrap_or("?").trim()
        ));
    }
    let up = r.sessions_connected_window_end.max(1) as f64;
    let uplink = r.window_audio_sent as f64 / r.window_secs.max(1e-9);
    if uplink < 0.95 * 50.0 * up {
        notes.push(format!(
            "load generator saturated: it sent {:.0} % of the nominal uplink ({} frames skipped)",
            100.0 * uplink / (50.0 * up),
            r.loadgen_frames_skipped
        ));
    }
    notes.join("; ")
}

fn cpu_per_session(runs: &[LoadResult]) -> Option<f64> {
    median(
        &runs
            .iter()
            .filter_map(|r| r.server.as_ref().map(|s| s.cpu_per_session_sec))
            .collect::<Vec<_>>(),
    )
}

fn us_per_packet(runs: &[LoadResult]) -> Option<f64> {
    median(
        &runs
            .iter()
            .filter_map(|r| r.server.as_ref().map(|s| s.us_per_packet))
            .collect::<Vec<_>>(),
    )
}

fn server<T>(runs: &[LoadResult], f: impl Fn(&crate::session_load::ServerUsage) -> T) -> Option<f64>
where
    T: Into<f64>,
{
    median(
        &runs
            .iter()
            .filter_map(|r| r.server.as_ref().map(|s| f(s).into()))
            .collect::<Vec<_>>(),
    )
}

/// Symbol-name fragments of libopus (linked statically into the transceiver).
const LIBOPUS_SYMBOLS: &[&str] = &[
    "opus",
    "silk",
    "celt",
    "clt_",
    "quant",
    "pulses",
    "deemphasis",
    "exp_rotation",
    "compute_theta",
    "ec_dec",
    "ec_enc",
    "pitch",
    "mdct",
    "kf_bfly",
];
/// Symbol-name fragments of SRTP and DTLS cryptography (aws-lc).
const CRYPTO_SYMBOLS: &[&str] = &[
    "aes", "gcm", "aead", "sha", "hmac", "aws_lc", "p384", "montj", "ecdsa",
];

/// The share of a perf profile's samples in symbols/DSOs matching any of `needles`.
fn profile_share(top: &[String], needles: &[&str]) -> f64 {
    top.iter()
        .filter(|l| {
            let low = l.to_lowercase();
            needles.iter().any(|n| low.contains(n))
        })
        .filter_map(|l| {
            l.split('%')
                .next()
                .and_then(|p| p.trim().parse::<f64>().ok())
        })
        .fold(0.0, |a, b| a + b)
}

fn relay_ratios(r: &SuiteResults) -> (Option<f64>, Option<f64>, Option<f64>) {
    let relay = med(&r.relay.relay_max, |f| f.pps_per_core);
    let fwd = med(&r.relay.forwarder_max, |f| f.pps_per_core);
    let ratio = match (relay, fwd) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    (relay, fwd, ratio)
}

/// Added one-way latency p50 of the relay and of the forwarder over the direct path.
fn added_latency(r: &SuiteResults) -> (Option<f64>, Option<f64>, Option<f64>) {
    let direct = med(&r.relay.direct_lat, |f| f.latency_us.p50);
    let relay = med(&r.relay.relay_lat, |f| f.latency_us.p50);
    let fwd = med(&r.relay.forwarder_lat, |f| f.latency_us.p50);
    match (direct, relay, fwd) {
        (Some(d), Some(r), Some(f)) => {
            let (ar, af) = (r - d, f - d);
            (Some(ar), Some(af), (af > 0.0).then(|| ar / af))
        }
        _ => (None, None, None),
    }
}

fn flow_row(md: &mut String, name: &str, runs: &[FlowResult]) {
    if runs.is_empty() {
        let _ = writeln!(md, "| {name} | – | – | – | – | – | – |");
        return;
    }
    let _ = writeln!(
        md,
        "| {name} | {} | {} | {} | {} | {} | {} |",
        thousands(med(runs, |f| f.tx_pps)),
        thousands(med(runs, |f| f.rx_pps)),
        num(
            med(runs, |f| 100.0 * f.lost as f64 / f.sent.max(1) as f64),
            1
        ),
        num(med(runs, |f| f.server_cores), 2),
        thousands(med(runs, |f| f.pps_per_core)),
        num(med(runs, |f| f.us_per_packet), 2),
    );
}

fn lat_row(md: &mut String, name: &str, runs: &[FlowResult], direct_p50: Option<f64>) {
    if runs.is_empty() {
        let _ = writeln!(md, "| {name} | – | – | – | – | – | – |");
        return;
    }
    let p50 = med(runs, |f| f.latency_us.p50);
    let added = match (p50, direct_p50) {
        (Some(a), Some(d)) => Some(a - d),
        _ => None,
    };
    let _ = writeln!(
        md,
        "| {name} | {} | {} | {} | {} | {} | {} |",
        num(p50, 0),
        num(med(runs, |f| f.latency_us.p90), 0),
        num(med(runs, |f| f.latency_us.p99), 0),
        num(added, 0),
        num(med(runs, |f| f.us_per_packet), 2),
        num(
            med(runs, |f| 100.0 * f.lost as f64 / f.sent.max(1) as f64),
            2
        ),
    );
}

fn markdown(r: &SuiteResults) -> String {
    let mut md = String::new();
    let m = &r.machine;
    let _ = writeln!(md, "# voxgate benchmarks\n");
    let _ = writeln!(
        md,
        "Generated by `loadgen report` from the results of one `scripts/bench` run: every number below was measured in that run \
         (medians over {} repetition(s) per scenario; baselines measured in the same run). Do not edit by hand; rerun the command.\n",
        r.plan.as_ref().map_or(1, |p| p.reps)
    );
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(
        md,
        "| command | `{}` (profile `{}`) |",
        r.command, r.profile
    );
    let _ = writeln!(md, "| commit | `{}` |", r.commit);
    let _ = writeln!(
        md,
        "| machine | {} × {}, {:.0} GiB RAM, Linux {}, {} |",
        m.cores, m.cpu_model, m.mem_gib, m.kernel, m.os
    );
    let _ = writeln!(
        md,
        "| load average at start | {:.2} (the machine is shared: other builds and tests run beside the benchmark) |",
        m.load_at_start
    );
    let _ = writeln!(md, "| run time | {:.0} s |", r.duration_secs);
    let placement = match &r.cpu_split {
        Some(split) => format!(
            "every thread of each server under test (transceiver, relay, Janus, coturn, forwarder) on core {} (`taskset`), the load generator's on core {}, so neither takes CPU from the other",
            split.server, split.generator
        ),
        None => "servers and load generator share every core".to_string(),
    };
    let _ = writeln!(
        md,
        "| transceiver | `--loops {}`, Opus downlink 32 kbit/s, complexity 5; a fresh process per scenario |",
        r.loops
    );
    let _ = writeln!(md, "| cores | {placement} |");
    let _ = writeln!(
        md,
        "| clients | testkit str0m clients (ICE, DTLS-SRTP, real Opus at 50 packets/s, pre-encoded tone), Poisson arrivals, seeded |\n"
    );
    if !r.errors.is_empty() {
        let _ = writeln!(md, "**Scenarios that failed in this run:**\n");
        for e in &r.errors {
            let _ = writeln!(md, "- {}", e.replace('\n', " "));
        }
        md.push('\n');
    }

    // ---- targets ------------------------------------------------------------------------
    let _ = writeln!(md, "## Targets\n");
    let _ = writeln!(
        md,
        "| target (issue 5) | measured | verdict |\n|---|---|---|"
    );
    let (relay_ppc, fwd_ppc, relay_ratio) = relay_ratios(r);
    let _ = writeln!(
        md,
        "| relay ≥ 0.9 × ceiling (pps per core vs the bare batched forwarder) | {} × ({} vs {} pps per core) | {} |",
        num(relay_ratio, 2),
        thousands(relay_ppc),
        thousands(fwd_ppc),
        at_least(relay_ratio, 0.9)
    );
    let (added_relay, added_fwd, added_ratio) = added_latency(r);
    let _ = writeln!(
        md,
        "| relay added one-way latency p50 ≤ 1.2 × the forwarder's (at {} pps) | {} × ({} µs vs {} µs) | {} |",
        thousands(Some(r.relay.latency_rate)),
        num(added_ratio, 2),
        num(added_relay, 1),
        num(added_fwd, 1),
        at_most(added_ratio, 1.2, "×")
    );
    let floor = r.codec_floor.as_ref().map(|f| f.cpu_per_session_sec);
    for p in r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm" && !p.runs.is_empty())
    {
        let ratio = work_floor_ratio(&p.runs, r.codec_floor.as_ref());
        let note = shortfall(&p.runs[0], p.sessions);
        let _ = writeln!(
            md,
            "| PCM-mode CPU ≤ 1.3 × codec floor, {} sessions | {} × the libopus cost of the frames handled ({} CPU-ms per session-second; nominal floor {}){} | {} |",
            p.sessions,
            num(ratio, 2),
            num(cpu_per_session(&p.runs).map(|v| v * 1e3), 3),
            num(floor.map(|v| v * 1e3), 3),
            if note.is_empty() { String::new() } else { format!("; {note}") },
            at_most(ratio, 1.3, "×")
        );
    }
    for p in r
        .cost
        .iter()
        .filter(|p| p.mode == "passthrough" && !p.runs.is_empty())
    {
        let us = us_per_packet(&p.runs);
        let note = shortfall(&p.runs[0], p.sessions);
        let _ = writeln!(
            md,
            "| passthrough ≤ 5 µs transceiver CPU per packet, {} sessions | {} µs{} | {} |",
            p.sessions,
            num(us, 2),
            if note.is_empty() {
                String::new()
            } else {
                format!(" ({note})")
            },
            at_most(us, 5.0, "µs")
        );
    }
    for s in &r.setup {
        let p50 = med(&s.runs, |x| x.setup.dtls_connected.p50);
        let p99 = med(&s.runs, |x| x.setup.dtls_connected.p99);
        let _ = writeln!(
            md,
            "| setup (POST → DTLS connected) p50 ≤ 10 ms at {}/s | {} ms | {} |",
            s.rate,
            num(p50, 2),
            at_most(p50, 10.0, "ms")
        );
        let _ = writeln!(
            md,
            "| setup (POST → DTLS connected) p99 ≤ 30 ms at {}/s | {} ms | {} |",
            s.rate,
            num(p99, 2),
            at_most(p99, 30.0, "ms")
        );
    }
    if let Some(p) = cost_point(r, "pcm", 500) {
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
                            r.loops
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
    if !r.memory.is_empty() {
        let kib = server(&r.memory, |s| s.rss_per_session_kib);
        let _ = writeln!(
            md,
            "| ≤ 100 KiB RSS per connected idle session at {} sessions | {} KiB | {} |",
            r.memory[0].sessions_requested,
            num(kib, 1),
            at_most(kib, 100.0, "KiB")
        );
    }
    md.push('\n');

    relay_section(&mut md, r);
    cost_section(&mut md, r);
    setup_section(&mut md, r);
    media_section(&mut md, r);
    memory_section(&mut md, r);
    peers_section(&mut md, r);
    via_relay_section(&mut md, r);
    micro_section(&mut md, r);
    why_section(&mut md, r);
    md
}

fn relay_section(md: &mut String, r: &SuiteResults) {
    let rl = &r.relay;
    let _ = writeln!(md, "## Relay throughput\n");
    if let Some(s) = &rl.skipped {
        let _ = writeln!(md, "Relay not measured: {s}\n");
    }
    let _ = writeln!(
        md,
        "{} flows of {}-byte RTP-shaped datagrams, each flow its own client socket, sent flat out by one generator thread \
         (core 1) through the middle process (pinned to core 0) to a sink. The relay runs `--workers 1`; each relay flow \
         starts with a STUN check whose USERNAME carries a routing hint naming the sink, answered through the relay. The \
         **bare forwarder** (`loadgen forwarder`) has the relay's batched I/O (edge-triggered epoll, `recvmmsg`/`sendmmsg` \
         of 32, preallocated buffers) and nothing else. **coturn** relays the same datagrams as TURN ChannelData (one \
         allocation + ChannelBind per flow, `--no-auth`, one relay thread). *pps per core* = datagrams delivered per CPU-second \
         the kernel charged the middle process, so the generator's and the sink's CPU never count, and a process that did \
         not get a whole core is not penalised. The issue quotes ≈ 455k pps per core for a bare C forwarder on this machine.\n",
        rl.flows, rl.size
    );
    let _ = writeln!(md, "| flat out | offered pps | delivered pps | lost % | cores used | pps per core | CPU µs per packet |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    flow_row(md, "voxgate relay", &rl.relay_max);
    flow_row(md, "bare forwarder (ceiling)", &rl.forwarder_max);
    flow_row(md, "coturn (TURN ChannelData)", &rl.coturn_max);
    if let Some(s) = &rl.coturn_skipped {
        let _ = writeln!(md, "\ncoturn not measured: {s}");
    }
    let _ = writeln!(
        md,
        "\nOne-way latency, sender's `sendmmsg` → sink socket (kernel receive timestamp, `SO_TIMESTAMPNS`), at {} pps \
         (half the relay's measured maximum), same rate for every path:\n",
        thousands(Some(rl.latency_rate))
    );
    let direct = med(&rl.direct_lat, |f| f.latency_us.p50);
    let _ = writeln!(md, "| at {} pps | p50 µs | p90 µs | p99 µs | added p50 µs (vs direct) | CPU µs per packet | lost % |", thousands(Some(rl.latency_rate)));
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    lat_row(md, "direct (no middle hop)", &rl.direct_lat, direct);
    lat_row(md, "bare forwarder", &rl.forwarder_lat, direct);
    lat_row(md, "voxgate relay", &rl.relay_lat, direct);
    lat_row(md, "coturn", &rl.coturn_lat, direct);
    let _ = writeln!(md, "\n![relay latency CDF](relay_latency_cdf.svg)\n");
}

fn cost_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Transceiver cost per session\n");
    if let Some(f) = &r.codec_floor {
        let _ = writeln!(
            md,
            "Codec floor (same run, same machine, libopus alone on the same frames): decode {:.1} µs and encode {:.1} µs per 20 ms \
             frame at {} Hz (complexity {}, {} bit/s, in-band FEC) ⇒ **{:.3} CPU-ms per PCM session-second** with a {:.0} % downlink \
             duty cycle ({:.3} with a full-time downlink).\n",
            f.decode_us_per_frame,
            f.encode_us_per_frame,
            f.sample_rate,
            f.complexity,
            f.bitrate,
            f.cpu_per_session_sec * 1e3,
            f.duty * 100.0,
            f.cpu_per_session_sec_full_duplex * 1e3
        );
    }
    let _ = writeln!(
        md,
        "Each session sends 50 Opus packets/s up; the built-in backend plays 1 s of audio every 2 s (PCM: 48 kHz PCM chunks, \
         transcoded by the transceiver; passthrough: pre-encoded Opus packets). Arrivals at {}/s; measured over a {} s window \
         once all sessions are up. CPU is the transceiver process's utime+stime from `/proc/<pid>/stat` (all its threads: media \
         loop, gRPC, signaling) over the window. *µs per packet* divides by every datagram the clients sent or received in \
         the window.\n",
        r.plan.as_ref().map_or(0.0, |p| p.cost_rate),
        r.plan.as_ref().map_or(0.0, |p| p.hold_secs)
    );
    let _ = writeln!(md, "| mode | sessions | connected | transceiver cores | CPU-ms per session-s | × codec floor of the frames handled | CPU µs per packet | uplink pps sent (nominal) | downlink pps received (nominal) | uplink loss % | downlink loss % | sessions with loss | notes |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for p in &r.cost {
        if p.runs.is_empty() {
            let _ = writeln!(
                md,
                "| {} | {} | failed | | | | | | | | | | |",
                p.mode, p.sessions
            );
            continue;
        }
        let runs = &p.runs;
        let cps = cpu_per_session(runs);
        let ratio = if p.mode == "pcm" {
            num(work_floor_ratio(runs, r.codec_floor.as_ref()), 2)
        } else {
            "–".into()
        };
        let up = med(runs, |x| x.sessions_connected_window_end as f64).unwrap_or(0.0);
        let lossy = med(runs, |x| {
            x.loss
                .sessions_with_uplink_loss
                .max(x.loss.sessions_with_downlink_loss) as f64
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {} | {} | {} |",
            p.mode,
            p.sessions,
            num(Some(up), 0),
            num(server(runs, |s| s.cores), 2),
            num(cps.map(|v| v * 1e3), 3),
            ratio,
            num(us_per_packet(runs), 2),
            thousands(med(runs, |x| x.window_audio_sent as f64
                / x.window_secs.max(1e-9))),
            thousands(Some(up * 50.0)),
            thousands(med(runs, |x| x.window_audio_received as f64
                / x.window_secs.max(1e-9))),
            thousands(Some(up * 25.0)),
            num(med(runs, |x| 100.0 * x.loss.uplink_loss_ratio), 3),
            num(med(runs, |x| 100.0 * x.loss.downlink_loss_ratio), 3),
            num(lossy, 0),
            shortfall(&runs[0], p.sessions),
        );
    }
    let _ = writeln!(
        md,
        "\nNominal downlink: the backend plays 1 s of every 2 s, i.e. 25 packets/s per session. A run that receives less \
         was handed the audio but did not play it out at one frame per 20 ms. The floor ratio counts only the frames \
         actually handled in the window (uplink packets sent decoded, downlink packets received encoded).\n"
    );
    let _ = writeln!(md, "![CPU per session](cpu_per_session.svg)\n");
}

fn setup_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Setup latency\n");
    let _ = writeln!(
        md,
        "From the start of the signaling POST (after the client built its offer) to: the `201` answer, ICE connected, DTLS \
         connected (client side, testkit timings), and the first uplink PCM frame received by the backend (the backend's \
         receive time, same process clock). Sessions arrive as a Poisson process; a listening PCM backend attaches each one.\n"
    );
    let _ = writeln!(md, "| arrivals | sessions | answer p50 / p99 ms | ICE p50 / p99 ms | DTLS p50 / p99 ms | first PCM p50 / p99 ms | errors | cores during the ramp: transceiver / load generator |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for s in &r.setup {
        let runs = &s.runs;
        let pair = |f: &dyn Fn(&LoadResult) -> (f64, f64)| {
            format!(
                "{} / {}",
                num(med(runs, |x| f(x).0), 2),
                num(med(runs, |x| f(x).1), 2)
            )
        };
        let _ = writeln!(
            md,
            "| {}/s | {} | {} | {} | {} | {} | {} | {} / {} |",
            s.rate,
            s.sessions,
            pair(&|x| (x.setup.answer.p50, x.setup.answer.p99)),
            pair(&|x| (x.setup.ice_connected.p50, x.setup.ice_connected.p99)),
            pair(&|x| (x.setup.dtls_connected.p50, x.setup.dtls_connected.p99)),
            pair(&|x| (x.setup.first_frame.p50, x.setup.first_frame.p99)),
            num(
                med(runs, |x| (x.signaling_errors + x.sessions_failed) as f64),
                0
            ),
            num(med(runs, |x| x.server_cores_ramp), 2),
            num(med(runs, |x| x.loadgen_cores_ramp), 2),
        );
    }
    let _ = writeln!(md, "\n![setup latency CDF](setup_latency_cdf.svg)\n");
}

fn media_section(md: &mut String, r: &SuiteResults) {
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
    for p in r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm" && !p.runs.is_empty())
    {
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
    let _ = writeln!(
        md,
        "In-transceiver hand-off, the target's own definition: packet arrival at the transceiver's socket → PCM frame \
         handed to the gRPC stream, from the transceiver's `voxgate_bridge_uplink_handoff_seconds` histogram (summed over \
         its media loops), scraped from its `/metrics` at the start and at the end of the window; the table uses the \
         bucket deltas. Percentiles are **bucket estimates**: linear interpolation inside the histogram bucket that holds \
         the rank; the bucket's upper bound is given next to each (the true percentile lies in that bucket, `>` is the \
         open-ended last bucket). The backend-side columns repeat the table above for comparison.\n"
    );
    let _ = writeln!(
        md,
        "| sessions | frames observed | mean ms | p50 ms (estimate) | p50 bucket ms | p99 ms (estimate) | p99 bucket ms | backend-side p50 / p99 ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for p in r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm" && !p.runs.is_empty())
    {
        let runs = &p.runs;
        let backend = format!(
            "{} / {}",
            num(med(runs, |x| x.media_latency_us.p50 / 1e3), 3),
            num(med(runs, |x| x.media_latency_us.p99 / 1e3), 3)
        );
        if handoffs(runs).is_empty() {
            let _ = writeln!(
                md,
                "| {} | not measured | – | – | – | – | – | {backend} |",
                p.sessions
            );
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {backend} |",
            p.sessions,
            thousands(handoff_med(runs, |h| h.count as f64)),
            num(handoff_med(runs, |h| h.mean_us / 1e3), 3),
            handoff_value(runs, |h| h.p50_us, |h| h.p50_bucket_le_us),
            handoff_bucket(runs, |h| h.p50_bucket_le_us),
            handoff_value(runs, |h| h.p99_us, |h| h.p99_bucket_le_us),
            handoff_bucket(runs, |h| h.p99_bucket_le_us),
        );
    }
    md.push('\n');
}

fn memory_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Memory\n");
    if r.memory.is_empty() {
        let _ = writeln!(md, "Not measured in this profile.\n");
        return;
    }
    let _ = writeln!(
        md,
        "Connected sessions with no audio and no backend (ICE consent and RTCP only); transceiver VmRSS from \
         `/proc/<pid>/status` before the first session and with all sessions connected.\n"
    );
    let _ = writeln!(
        md,
        "| sessions | connected | RSS before KiB | RSS with sessions KiB | KiB per session |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    let runs = &r.memory;
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} |\n",
        runs[0].sessions_requested,
        num(med(runs, |x| x.sessions_connected_window_end as f64), 0),
        thousands(server(runs, |s| s.rss_before_kib as f64)),
        thousands(server(runs, |s| s.rss_window_end_kib as f64)),
        num(server(runs, |s| s.rss_per_session_kib), 1),
    );
}

fn peers_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Peers, same run\n");
    let p = &r.peers;
    let _ = writeln!(
        md,
        "### Janus echotest vs voxgate passthrough + echo backend\n"
    );
    if let Some(s) = &p.skipped {
        let _ = writeln!(md, "Not measured: {s}\n");
    } else {
        let _ = writeln!(
            md,
            "{} sessions each, same load generator, same clients. Janus {} (Debian package) with only the HTTP transport and the \
             echotest plugin; ICE limited to one interface. Janus skips loopback interfaces when gathering candidates and \
             refuses to send from an address on another interface to 127.0.0.1, so both servers run inside a network namespace \
             made by `scripts/bench` and are reached over a veth pair (clients on the host side). voxgate: the transceiver in \
             the same namespace, `AUDIO_MODE_OPUS_PASSTHROUGH`, the backend echoing every Opus packet. CPU is each server \
             process's own (the echo backend of voxgate runs in the load generator, so its cost is not counted — Janus's echo is \
             in-process).\n",
            p.sessions, p.janus_version
        );
        let _ = writeln!(md, "| server | connected | cores | CPU-ms per session-s | CPU µs per packet | echoed / sent | setup DTLS p50 ms |");
        let _ = writeln!(md, "|---|---|---|---|---|---|---|");
        for (name, runs) in [
            ("voxgate (passthrough, echo)", &p.voxgate),
            ("Janus echotest", &p.janus),
        ] {
            if runs.is_empty() {
                let _ = writeln!(md, "| {name} | failed | | | | | |");
                continue;
            }
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                num(med(runs, |x| x.sessions_connected_window_end as f64), 0),
                num(server(runs, |s| s.cores), 3),
                num(cpu_per_session(runs).map(|v| v * 1e3), 3),
                num(us_per_packet(runs), 2),
                num(
                    med(runs, |x| x.window_audio_received as f64
                        / x.window_audio_sent.max(1) as f64),
                    3
                ),
                num(med(runs, |x| x.setup.dtls_connected.p50), 2),
            );
        }
        if let (Some(v), Some(j)) = (cpu_per_session(&p.voxgate), cpu_per_session(&p.janus)) {
            if v > 0.0 {
                let _ = writeln!(
                    md,
                    "\nJanus / voxgate CPU per session-second: **{:.2} ×**.\n",
                    j / v
                );
            }
        }
    }
    let _ = writeln!(md, "### coturn vs the voxgate relay\n");
    let relay = med(&r.relay.relay_lat, |f| f.us_per_packet);
    let turn = med(&r.relay.coturn_lat, |f| f.us_per_packet);
    let _ = writeln!(
        md,
        "CPU per relayed datagram at the same packet rate ({} pps): relay {} µs, coturn {} µs{}. Flat out: relay {} µs, coturn {} µs.\n",
        thousands(Some(r.relay.latency_rate)),
        num(relay, 2),
        num(turn, 2),
        match (relay, turn) {
            (Some(a), Some(b)) if a > 0.0 => format!(" (coturn / relay = **{:.2} ×**)", b / a),
            _ => String::new(),
        },
        num(med(&r.relay.relay_max, |f| f.us_per_packet), 2),
        num(med(&r.relay.coturn_max, |f| f.us_per_packet), 2),
    );
}

fn via_relay_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Sessions through the relay\n");
    if let Some(s) = &r.via_relay_skipped {
        let _ = writeln!(md, "Not measured: {s}\n");
    }
    let runs = &r.via_relay;
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "The full path of the architecture: the transceiver advertises the relay (`--advertise`, shared fleet key), every \
         client's ICE, DTLS and SRTP go through the relay (`--workers 1`), passthrough echo backend. Transceiver CPU as above.\n"
    );
    let _ = writeln!(md, "| sessions | connected | DTLS p50 / p99 ms | first frame p50 ms | transceiver CPU µs per packet | echoed / sent | uplink loss % | downlink loss % |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| {} | {} | {} / {} | {} | {} | {} | {} | {} |\n",
        runs[0].sessions_requested,
        num(med(runs, |x| x.sessions_connected_window_end as f64), 0),
        num(med(runs, |x| x.setup.dtls_connected.p50), 2),
        num(med(runs, |x| x.setup.dtls_connected.p99), 2),
        num(med(runs, |x| x.setup.first_frame.p50), 2),
        num(us_per_packet(runs), 2),
        num(
            med(runs, |x| x.window_audio_received as f64
                / x.window_audio_sent.max(1) as f64),
            3
        ),
        num(med(runs, |x| 100.0 * x.loss.uplink_loss_ratio), 3),
        num(med(runs, |x| 100.0 * x.loss.downlink_loss_ratio), 3),
    );
}

fn micro_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Micro-benchmarks\n");
    if r.micro.is_empty() {
        let _ = writeln!(
            md,
            "Not run in this profile (`cargo bench -p voxgate-loadgen --bench proto_parsers`).\n"
        );
        return;
    }
    let _ = writeln!(
        md,
        "criterion, `loadgen/benches/proto_parsers.rs`, short measurement times (shared machine). Demux maps hold 1,000 sessions.\n"
    );
    let _ = writeln!(md, "| benchmark | median ns | mean ns |\n|---|---|---|");
    for b in &r.micro {
        let _ = writeln!(
            md,
            "| `{}` | {:.1} | {:.1} |",
            b.name, b.median_ns, b.mean_ns
        );
    }
    md.push('\n');
}

fn why_section(md: &mut String, r: &SuiteResults) {
    let _ = writeln!(md, "## Why targets are missed (evidence from this run)\n");
    let mut any = false;
    // Media latency.
    if let Some(p) = r
        .cost
        .iter()
        .find(|p| p.mode == "pcm" && p.sessions >= 500 && !p.runs.is_empty())
        .or_else(|| {
            r.cost
                .iter()
                .find(|p| p.mode == "pcm" && !p.runs.is_empty())
        })
    {
        let p50 = med(&p.runs, |x| x.media_latency_us.p50 / 1e3).unwrap_or(0.0);
        let p99 = med(&p.runs, |x| x.media_latency_us.p99 / 1e3).unwrap_or(0.0);
        let max = med(&p.runs, |x| x.media_latency_us.max / 1e3).unwrap_or(0.0);
        let min = med(&p.runs, |x| x.media_latency_us.min / 1e3).unwrap_or(0.0);
        let var99 = med(&p.runs, |x| x.media_delay_variation_us.p99 / 1e3).unwrap_or(0.0);
        let neg = med(&p.runs, |x| 100.0 * x.media_latency_negative_fraction).unwrap_or(0.0);
        let sockets: Vec<bool> = p
            .runs
            .iter()
            .flat_map(|x| x.server_grpc_nodelay.iter().copied())
            .collect();
        let off = sockets.iter().filter(|&&b| !b).count();
        // The target is judged on the in-transceiver hand-off when the run measured it.
        let handoff_p99 = handoff_med(&p.runs, |h| h.p99_us / 1e3);
        if handoff_p99.unwrap_or(p99) > 1.0 {
            any = true;
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
            md.push('\n');
        }
    }
    // PCM cost.
    let floor = r.codec_floor.as_ref().map(|f| f.cpu_per_session_sec);
    let pcm_missed =
        r.cost.iter().filter(|p| p.mode == "pcm").any(
            |p| matches!((cpu_per_session(&p.runs), floor), (Some(c), Some(f)) if c > 1.3 * f),
        );
    let pass_missed = r
        .cost
        .iter()
        .filter(|p| p.mode == "passthrough")
        .any(|p| us_per_packet(&p.runs).is_some_and(|u| u > 5.0));
    for prof in &r.profiles {
        if !(pcm_missed || pass_missed) {
            break;
        }
        any = true;
        let opus = profile_share(&prof.top, LIBOPUS_SYMBOLS);
        let crypto = profile_share(&prof.top, CRYPTO_SYMBOLS);
        let kernel = profile_share(&prof.top, &["[kernel", "kernel."]);
        let _ = writeln!(
            md,
            "- **Transceiver CPU**, perf profile of `{}` during the window (top symbols; by symbol name: libopus {:.0} %, SRTP/DTLS crypto {:.0} %, \
             kernel {:.0} % of the listed samples):\n\n  ```text\n{}\n  ```",
            prof.scenario,
            opus,
            crypto,
            kernel,
            prof.top.iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
        );
    }
    if pass_missed {
        any = true;
        let by_load: Vec<String> = r
            .cost
            .iter()
            .filter(|p| p.mode == "passthrough")
            .filter_map(|p| {
                let n = med(&p.runs, |x| x.sessions_connected_window_end as f64)?;
                Some(format!("{:.1} µs at {n:.0}", us_per_packet(&p.runs)?))
            })
            .collect();
        let _ = writeln!(
            md,
            "- **Passthrough per packet**: {}. At low load each packet arrives alone and pays a whole wakeup: \
             `epoll_wait`, `recvmmsg`, str0m (SRTP, RTP bookkeeping), `sendmmsg`, and a gRPC write on the backend's \
             connection, with the context switches that go with them (the kernel lines of the profiles above). Batches fill \
             only as the load grows, so the cost per packet falls with it; the fixed part is the price of handing each \
             packet on the moment it arrives rather than holding it to batch.",
            by_load.join(", ")
        );
    }
    if pcm_missed {
        let at = |mode: &str| {
            r.cost
                .iter()
                .filter(|p| p.mode == mode)
                .min_by_key(|p| p.sessions)
                .and_then(|p| Some((p.sessions, cpu_per_session(&p.runs)? * 1e3)))
        };
        if let (Some((n, pcm)), Some((_, pass)), Some(f)) = (at("pcm"), at("passthrough"), floor) {
            any = true;
            let _ = writeln!(
                md,
                "- **PCM above the codec floor** at {n} sessions: {pcm:.2} CPU-ms per session-second, of which libopus is \
                 {:.2} (the floor) and the rest, {:.2}, is the packet path that passthrough also pays ({pass:.2} in total \
                 there) plus PCM messages 24× the size of Opus ones (1,920 bytes per 20 ms at 48 kHz) through protobuf, \
                 HTTP/2 and TCP. The floor excludes everything but the codec, so a ratio of 1.3 would need the whole \
                 non-codec path to cost under 30 % of the codec's.",
                f * 1e3,
                pcm - f * 1e3
            );
        }
    }
    if pcm_missed || pass_missed {
        let saturated: Vec<String> = r
            .cost
            .iter()
            .filter(|p| server(&p.runs, |s| s.cores).is_some_and(|c| c > 0.9))
            .map(|p| format!("{} × {}", p.mode, p.sessions))
            .collect();
        if !saturated.is_empty() {
            let _ = writeln!(
                md,
                "- The transceiver used more than 0.9 of a core in: {}. With `--loops {}` its media work has one core; beyond \
                 that, frames queue and are dropped (see the loss columns), so per-session cost there is measured on a \
                 saturated process.",
                saturated.join(", "),
                r.loops
            );
        }
    }
    // Setup latency.
    let slow: Vec<&crate::suite::SetupPoint> = r
        .setup
        .iter()
        .filter(|s| {
            med(&s.runs, |x| x.setup.dtls_connected.p50).is_some_and(|v| v > 10.0)
                || med(&s.runs, |x| x.setup.dtls_connected.p99).is_some_and(|v| v > 30.0)
        })
        .collect();
    for s in slow {
        any = true;
        let base = r.setup.iter().min_by(|a, b| a.rate.total_cmp(&b.rate));
        let _ = writeln!(
            md,
            "- **Setup at {}/s**: POST → 201 alone takes p50 {} ms (p50 {} ms at {}/s); ICE adds {} ms and DTLS {} ms more. \
             The answer is produced by the transceiver's control plane (str0m accepts the offer on tokio's blocking pool, \
             then the session is handed to its loop), so it queues behind whatever else runs: during this ramp the \
             transceiver used {} cores and the load generator (clients building offers, DTLS handshakes, the media of the \
             sessions already up) {} cores{}. ICE and DTLS complete on the single media loop, which at \
             the same time carries the uplink decode of every connected session.{}",
            s.rate,
            num(med(&s.runs, |x| x.setup.answer.p50), 2),
            num(base.and_then(|b| med(&b.runs, |x| x.setup.answer.p50)), 2),
            base.map_or(0.0, |b| b.rate),
            num(med(&s.runs, |x| x.setup.ice_connected.p50 - x.setup.answer.p50), 2),
            num(med(&s.runs, |x| x.setup.dtls_connected.p50 - x.setup.ice_connected.p50), 2),
            num(med(&s.runs, |x| x.server_cores_ramp), 2),
            num(med(&s.runs, |x| x.loadgen_cores_ramp), 2),
            match &r.cpu_split {
                Some(c) => format!(" (each on its own cores: {} and {})", c.server, c.generator),
                None => format!(" of the machine's {}", r.machine.cores),
            },
            match med(&s.runs, |x| x.signaling_errors as f64) {
                Some(e) if e > 0.0 => format!(
                    " {e:.0} of the {} POSTs were refused with 503: the ramp reached the loop's capacity, so the sessions \
                     admitted just before it waited behind a nearly saturated loop (the tail of the distribution).",
                    s.sessions
                ),
                _ => String::new(),
            }
        );
    }
    // PCM downlink shortfall.
    for p in r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm" && !p.runs.is_empty())
    {
        let x = &p.runs[0];
        let up = x.sessions_connected_window_end as f64;
        let got = x.window_audio_received as f64 / x.window_secs.max(1e-9);
        if up > 0.0 && got < 0.9 * 25.0 * up {
            any = true;
            let _ = writeln!(
                md,
                "- **PCM downlink at {} sessions**: clients received {:.0} packets/s of the nominal {:.0} ({:.0} %), with {} \
                 downlink sequence gaps, so the transceiver did not send the rest (nothing was lost on the way). The backend \
                 queued {} chunks of 100 ms in the run. The transceiver used {} cores in the window with its one media loop \
                 pinned to one core that it shares with the rest of the machine: the loop is saturated, its 20 ms downlink \
                 ticks run late, and each late tick still plays one frame, so playout stretches instead of keeping up \
                 (encoding is the dominant codec cost: {:.0} µs per frame against {:.0} µs to decode). Beyond this point a \
                 PCM session costs more than this machine has; more loops (cores) or a cheaper encoder setting is the fix.",
                p.sessions,
                got,
                25.0 * up,
                100.0 * got / (25.0 * up),
                x.loss.downlink_lost,
                x.backend_downlink_sent,
                num(x.server.as_ref().map(|s| s.cores), 2),
                r.codec_floor.as_ref().map_or(0.0, |f| f.encode_us_per_frame),
                r.codec_floor.as_ref().map_or(0.0, |f| f.decode_us_per_frame),
            );
        }
    }
    let (_, _, ratio) = relay_ratios(r);
    if ratio.is_some_and(|x| x < 0.9) {
        any = true;
        let _ = writeln!(
            md,
            "- **Relay throughput** at {:.2} × the ceiling: the relay does per datagram what the bare forwarder does not — a flow \
             table lookup, writing the relay header in front of the payload (a copy into the send buffer, where the forwarder \
             sends from the receive buffer without copying) and per-flow counters.",
            ratio.unwrap_or(0.0)
        );
    }
    let (_, _, added) = added_latency(r);
    if added.is_some_and(|x| x > 1.2) {
        any = true;
        let _ = writeln!(
            md,
            "- **Relay added latency** at {:.2} × the forwarder's: both are a few tens of µs on loopback; the difference is \
             within the batching and wake-up behaviour of the two loops and the noise of a shared 2-core machine.",
            added.unwrap_or(0.0)
        );
    }
    if !any {
        let _ = writeln!(md, "Every measured target was met in this run.");
    }
    md.push('\n');
}

/// The SVG plots, by file name.
fn charts(r: &SuiteResults) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    // CPU per session vs sessions.
    let mut series = Vec::new();
    for mode in ["pcm", "passthrough"] {
        let pts: Vec<(f64, f64)> = r
            .cost
            .iter()
            .filter(|p| p.mode == mode)
            // Plotted at the sessions actually connected (an overloaded run has fewer).
            .filter_map(|p| {
                let up = med(&p.runs, |x| x.sessions_connected_window_end as f64)?;
                cpu_per_session(&p.runs).map(|c| (up, c * 1e3))
            })
            .collect();
        series.push(Series {
            label: format!("transceiver, {mode}"),
            points: pts,
            markers: true,
            dashed: false,
        });
    }
    if let Some(f) = &r.codec_floor {
        let xs: Vec<f64> = r.cost.iter().map(|p| p.sessions as f64).collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        if hi > 0.0 {
            series.push(Series {
                label: "codec floor (libopus only)".into(),
                points: vec![
                    (lo, f.cpu_per_session_sec * 1e3),
                    (hi, f.cpu_per_session_sec * 1e3),
                ],
                markers: false,
                dashed: true,
            });
            series.push(Series {
                label: "target: 1.3 × floor".into(),
                points: vec![
                    (lo, 1.3 * f.cpu_per_session_sec * 1e3),
                    (hi, 1.3 * f.cpu_per_session_sec * 1e3),
                ],
                markers: false,
                dashed: true,
            });
        }
    }
    out.push((
        "cpu_per_session.svg",
        Chart {
            title: "Transceiver CPU per session-second",
            x_label: "concurrent sessions connected in the window",
            y_label: "CPU-ms per session-second",
            log_x: false,
            series,
        }
        .render(),
    ));
    // Setup CDFs.
    let mut series = Vec::new();
    for s in &r.setup {
        if let Some(run) = s.runs.first() {
            for (what, samples) in [
                ("DTLS", &run.setup.samples.dtls_connected),
                ("first PCM", &run.setup.samples.first_frame),
            ] {
                series.push(Series {
                    label: format!("{what}, {}/s", s.rate),
                    points: crate::stats::cdf_points(samples, 300),
                    markers: false,
                    dashed: what == "first PCM",
                });
            }
        }
    }
    out.push((
        "setup_latency_cdf.svg",
        Chart {
            title: "Setup latency CDF (from POST)",
            x_label: "ms (log scale)",
            y_label: "fraction of sessions",
            log_x: true,
            series,
        }
        .render(),
    ));
    // Media latency CDFs.
    let series = r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm")
        .filter_map(|p| {
            p.runs.first().map(|run| Series {
                label: format!("{} sessions", p.sessions),
                points: run
                    .media_latency_cdf
                    .iter()
                    .map(|&(x, y)| (x / 1e3, y))
                    .collect(),
                markers: false,
                dashed: false,
            })
        })
        .collect();
    out.push((
        "media_latency_cdf.svg",
        Chart {
            title: "Media latency CDF: transceiver socket → PCM at the backend",
            x_label: "ms (log scale)",
            y_label: "fraction of frames",
            log_x: true,
            series,
        }
        .render(),
    ));
    // Relay latency CDFs.
    let rl = &r.relay;
    let series = [
        ("direct", &rl.direct_lat),
        ("bare forwarder", &rl.forwarder_lat),
        ("voxgate relay", &rl.relay_lat),
        ("coturn", &rl.coturn_lat),
    ]
    .into_iter()
    .filter_map(|(name, runs)| {
        runs.first().map(|f| Series {
            label: name.to_string(),
            points: f.latency_cdf.clone(),
            markers: false,
            dashed: false,
        })
    })
    .collect();
    out.push((
        "relay_latency_cdf.svg",
        Chart {
            title: "One-way latency through the middle hop (same rate)",
            x_label: "µs (log scale)",
            y_label: "fraction of datagrams",
            log_x: true,
            series,
        }
        .render(),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_say_by_how_much() {
        assert!(at_most(Some(0.5), 1.0, "ms").starts_with("**met**"));
        assert!(at_most(Some(1.5), 1.0, "ms").contains("missed** by 0.500 ms"));
        assert_eq!(at_most(None, 1.0, "ms"), "not measured");
        assert!(at_least(Some(0.8), 0.9).contains("89 %"));
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(Some(1234567.4)), "1,234,567");
        assert_eq!(thousands(Some(999.0)), "999");
        assert_eq!(thousands(None), "–");
    }

    #[test]
    fn an_empty_run_still_renders() {
        let md = markdown(&SuiteResults::default());
        assert!(md.contains("# voxgate benchmarks"));
        assert_eq!(charts(&SuiteResults::default()).len(), 4);
    }

    #[test]
    fn media_target_uses_the_in_transceiver_handoff() {
        let run = |handoff_p99_us: f64| LoadResult {
            sessions_connected_window_end: 500,
            media_latency_us: crate::stats::Summary {
                count: 10,
                p50: 3_000.0,
                p99: 20_000.0,
                ..Default::default()
            },
            transceiver_handoff: Some(HandoffLatency {
                count: 1000,
                p50_us: 30.0,
                p50_bucket_le_us: Some(50.0),
                p99_us: handoff_p99_us,
                p99_bucket_le_us: Some(250.0),
                bucket_le_us: vec![25.0, 50.0, 100.0, 250.0],
                bucket_counts: vec![100, 800, 80, 20, 0],
                mean_us: 40.0,
                loops: 1,
            }),
            ..Default::default()
        };
        let r = SuiteResults {
            cost: vec![CostPoint {
                mode: "pcm".into(),
                sessions: 500,
                runs: vec![run(200.0)],
            }],
            ..Default::default()
        };
        let md = markdown(&r);
        let row = md
            .lines()
            .find(|l| l.starts_with("| media latency"))
            .unwrap();
        assert!(row.contains("0.200 ms in the transceiver"), "{row}");
        assert!(row.contains("bucket ≤ 0.250 ms"), "{row}");
        assert!(row.contains("backend-side p99"), "{row}");
        assert!(row.contains("20.00 ms"), "{row}");
        assert!(row.contains("**met**"), "{row}");
        assert!(md.contains(
            "| 500 | 1,000 | 0.040 | 0.030 | ≤ 0.050 | 0.200 | ≤ 0.250 | 3.000 / 20.000 |"
        ));
        // Admission held the run at 217 sessions: the verdict says so rather than "met at 500".
        let mut held = r.clone();
        held.loops = 1;
        held.cost[0].runs[0].sessions_connected_window_end = 217;
        let md = markdown(&held);
        let row = md
            .lines()
            .find(|l| l.starts_with("| media latency"))
            .unwrap();
        assert!(!row.contains("**met**"), "{row}");
        assert!(
            row.contains("met (20 % of the limit) at 217 sessions"),
            "{row}"
        );
        assert!(row.contains("need more loops than this run's 1"), "{row}");
        // Results from before the histogram existed still load and render.
        let old: SuiteResults =
            serde_json::from_str(r#"{"cost":[{"mode":"pcm","sessions":500,"runs":[{}]}]}"#)
                .unwrap();
        assert!(markdown(&old).contains("not measured in this run"));
    }

    #[test]
    fn profile_shares_add_matching_lines() {
        let top = vec![
            "30.00%  transceiver  libopus.so  [.] silk_encode".to_string(),
            "10.50%  transceiver  [kernel.kallsyms]  [k] udp_sendmsg".to_string(),
        ];
        assert!((profile_share(&top, &["silk"]) - 30.0).abs() < 1e-9);
        assert!((profile_share(&top, &["[kernel"]) - 10.5).abs() < 1e-9);
    }
}
