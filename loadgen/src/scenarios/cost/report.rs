//! The cost scenario's part of the report: its Targets rows, the "Transceiver cost per
//! session" section, and the notes on why a CPU target was missed.

use std::fmt::Write as _;

use crate::codec_floor::CodecFloor;
use crate::report::cells::{at_most, med, num, thousands};
use crate::report::runs::{cpu_per_session, server, us_per_packet};
use crate::scenarios::cost::ratios::{floor_for, work_floor_ratio};
use crate::scenarios::cost::{measured, CostPoint, CAPACITY_ARRIVALS, CAPACITY_RATE};
use crate::session_load::LoadResult;
use crate::stats::median;
use crate::suite::perf::{ServerProfile, CRYPTO_SYMBOLS, LIBOPUS_SYMBOLS};
use crate::suite::plan::Plan;

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
        // The first refusal says which limit ended admission.
        let why = if r
            .first_signaling_error
            .as_deref()
            .is_some_and(|e| e.contains("CPU is saturated"))
        {
            "the process past --max-process-cpu"
        } else {
            "media loop past --max-loop-busy"
        };
        notes.push(format!(
            "capacity reached: the transceiver admitted {} of {} and refused {} with 503 \
             ({why}); measured at the admitted load",
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

/// Rows of the Targets table: PCM CPU against the codec floor, passthrough CPU per packet.
pub fn targets(md: &mut String, cost: &[CostPoint], floor: Option<&CodecFloor>) {
    let floor_cps = floor.map(|f| f.cpu_per_session_sec);
    for p in measured(cost, "pcm") {
        let ratio = work_floor_ratio(&p.runs, floor);
        let note = shortfall(&p.runs[0], p.sessions);
        let _ = writeln!(
            md,
            "| PCM-mode CPU ≤ 1.3 × codec floor, {} sessions | {} × the libopus cost of the frames handled ({} CPU-ms per session-second; nominal floor {}){} | {} |",
            p.sessions,
            num(ratio, 2),
            num(cpu_per_session(&p.runs).map(|v| v * 1e3), 3),
            num(floor_cps.map(|v| v * 1e3), 3),
            if note.is_empty() { String::new() } else { format!("; {note}") },
            at_most(ratio, 1.3, "×")
        );
    }
    for p in measured(cost, "passthrough") {
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
}

/// The "Transceiver cost per session" section: the codec floor and one row per point.
pub fn section(md: &mut String, cost: &[CostPoint], floors: &[CodecFloor], plan: Option<&Plan>) {
    let _ = writeln!(md, "## Transceiver cost per session\n");
    for f in floors {
        let _ = writeln!(
            md,
            "Codec floor (same run, same machine, libopus alone on the same frames): decode {:.1} µs and encode {:.1} µs per 20 ms \
             frame at {} Hz ({}, complexity {}, {} bit/s, in-band FEC) ⇒ **{:.3} CPU-ms per PCM session-second** with a {:.0} % downlink \
             duty cycle ({:.3} with a full-time downlink).\n",
            f.decode_us_per_frame,
            f.encode_us_per_frame,
            f.sample_rate,
            f.application.as_arg(),
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
         transcoded by the transceiver; passthrough: pre-encoded Opus packets). Arrivals at {}/s ({}/s for the PCM points of \
         {} arrivals, where capacity is read); measured over a {} s window once all sessions are up. *backend p50 / p99 ms* \
         is how late the backend received the uplink audio (client send to backend receive, one clock): what admitted \
         callers get from a loaded server. CPU is the transceiver process's utime+stime from `/proc/<pid>/stat` (all its threads: media \
         loop, gRPC, signaling) over the window. *µs per packet* divides by every RTP audio packet the clients sent or \
         received in the window (RTCP, feedback and STUN consent are cost, not work); *loop wakeups per packet* divides the \
         media loops' wakeups (`voxgate_loop_wakeups_total`) by the same packets.\n",
        plan.map_or(0.0, |p| p.cost_rate),
        CAPACITY_RATE,
        CAPACITY_ARRIVALS,
        plan.map_or(0.0, |p| p.hold_secs)
    );
    let _ = writeln!(
        md,
        "Modes: *pcm* has the backend attach at 48 kHz, *pcm16k* and *pcm24k* at 16 and 24 kHz (their floor is the one \
         at the same rate); *pcm-lowdelay-c0* runs the transceiver with `--opus-application lowdelay --opus-complexity 0`, \
         the cheapest encoder it ships (a backend may also ask for it per call: `Attach.encoder`; no floor was measured \
         with it); the others run the default encoder. *passthrough-coalesced* is passthrough with the transceiver's \
         read coalescing on (`--read-window-us 1000`, off by default): the loop reads its socket at most once a millisecond. The backend carries all its \
         sessions on one `Multiplex` stream (a channel each), as the Python SDK does; *passthrough-sessions* and \
         *pcm-sessions* give it a `Session` stream per call instead: the baseline of what the multiplexed stream saves.\n"
    );
    let _ = writeln!(md, "| mode | sessions | connected | transceiver cores | CPU-ms per session-s | × codec floor of the frames handled (same rate) | CPU µs per packet | loop wakeups per packet | uplink pps sent (nominal) | downlink pps received (nominal) | uplink loss % | downlink loss % | sessions with loss | backend p50 / p99 ms | notes |");
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in cost {
        point_row(md, p, floor_for(&p.mode, floors));
    }
    let _ = writeln!(
        md,
        "\nNominal downlink: the backend plays 1 s of every 2 s, i.e. 25 packets/s per session. A run that receives less \
         was handed the audio but did not play it out at one frame per 20 ms. The floor ratio counts only the frames \
         actually handled in the window (uplink packets sent decoded, downlink packets received encoded).\n"
    );
    lost_packets_note(md, cost);
    let _ = writeln!(md, "![CPU per session](cpu_per_session.svg)\n");
}

/// For every run that lost audio the load generator did send: how much, and what the
/// transceiver's and the kernel's drop counters said over the same window.
fn lost_packets_note(md: &mut String, cost: &[CostPoint]) {
    let mut lines = Vec::new();
    for p in cost {
        for (i, x) in p.runs.iter().enumerate() {
            let up = x.loss.uplink_lost.saturating_sub(x.loadgen_frames_skipped);
            let down = x.loss.downlink_lost;
            if up == 0 && down == 0 {
                continue;
            }
            let count =
                |v: Option<u64>| v.map_or("not read".to_string(), |v| thousands(Some(v as f64)));
            let drops = x.window_drops.as_ref().map_or_else(
                || "no drop counters were recorded".to_string(),
                |d| {
                    format!(
                        "in the window the transceiver dropped {} uplink messages at a full backend queue, {} datagrams in its loops \
                         and failed {} sends; the kernel counted {} UDP receive-buffer overflows (machine-wide)",
                        count(d.bridge_uplink),
                        count(d.loop_datagrams),
                        count(d.send_errors),
                        count(d.kernel_rcvbuf)
                    )
                },
            );
            lines.push(format!(
                "- {}, {} sessions, run {}: {} uplink and {} downlink packets lost ({} and {} of {} sessions); {drops}.",
                p.mode,
                p.sessions,
                i + 1,
                thousands(Some(up as f64)),
                thousands(Some(down as f64)),
                x.loss.sessions_with_uplink_loss,
                x.loss.sessions_with_downlink_loss,
                x.loss.sessions
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(md, "Runs that lost packets, and where:\n");
    for l in lines {
        let _ = writeln!(md, "{l}");
    }
    md.push('\n');
}

/// The median over runs of a percentile of the backend's uplink latency, in ms (runs without
/// samples left out).
fn backend_latency_ms(runs: &[LoadResult], pick: fn(&crate::stats::Summary) -> f64) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.media_latency_us.count > 0)
        .map(|r| pick(&r.media_latency_us) / 1e3)
        .collect();
    median(&v)
}

/// Media-loop wakeups per audio packet the clients sent or received in the window: below 1, a
/// wakeup carried several packets; above 1, timers woke the loop on their own.
fn wakeups_per_packet(runs: &[LoadResult]) -> Option<f64> {
    let per_run: Vec<f64> = runs
        .iter()
        .filter_map(|x| {
            let packets = x.window_audio_sent + x.window_audio_received;
            Some(x.server_loop_wakeups_window? as f64 / packets.max(1) as f64)
        })
        .collect();
    median(&per_run)
}

fn point_row(md: &mut String, p: &CostPoint, floor: Option<&CodecFloor>) {
    if p.runs.is_empty() {
        let _ = writeln!(
            md,
            "| {} | {} | failed | | | | | | | | | | | | |",
            p.mode, p.sessions
        );
        return;
    }
    let runs = &p.runs;
    let cps = cpu_per_session(runs);
    let ratio = match floor {
        Some(_) => num(work_floor_ratio(runs, floor), 2),
        None => "–".into(),
    };
    let up = med(runs, |x| x.sessions_connected_window_end as f64).unwrap_or(0.0);
    let lossy = med(runs, |x| {
        x.loss
            .sessions_with_uplink_loss
            .max(x.loss.sessions_with_downlink_loss) as f64
    });
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {} | {} | {} / {} | {} |",
        p.mode,
        p.sessions,
        num(Some(up), 0),
        num(server(runs, |s| s.cores), 2),
        num(cps.map(|v| v * 1e3), 3),
        ratio,
        num(us_per_packet(runs), 2),
        num(wakeups_per_packet(runs), 2),
        thousands(med(runs, |x| x.window_audio_sent as f64
            / x.window_secs.max(1e-9))),
        thousands(Some(up * 50.0)),
        thousands(med(runs, |x| x.window_audio_received as f64
            / x.window_secs.max(1e-9))),
        thousands(Some(up * 25.0)),
        num(med(runs, |x| 100.0 * x.loss.uplink_loss_ratio), 3),
        num(med(runs, |x| 100.0 * x.loss.downlink_loss_ratio), 3),
        num(lossy, 0),
        num(backend_latency_ms(runs, |l| l.p50), 1),
        num(backend_latency_ms(runs, |l| l.p99), 1),
        shortfall(&runs[0], p.sessions),
    );
}

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

/// What the cost runs need to explain their CPU: the codec floor, the perf profiles taken
/// during them, and the transceiver's loop count.
pub struct CostEvidence<'a> {
    pub floor: Option<&'a CodecFloor>,
    pub profiles: &'a [ServerProfile],
    pub loops: usize,
}

/// Why the CPU targets were missed, if they were: the perf profiles, passthrough's fixed
/// cost per packet, PCM's cost beyond the codec, saturation. True when it wrote a note.
pub fn why(md: &mut String, cost: &[CostPoint], e: &CostEvidence) -> bool {
    let mut any = false;
    let floor = e.floor.map(|f| f.cpu_per_session_sec);
    let pcm_missed = cost
        .iter()
        .filter(|p| p.mode == "pcm")
        .any(|p| matches!((cpu_per_session(&p.runs), floor), (Some(c), Some(f)) if c > 1.3 * f));
    let pass_missed = cost
        .iter()
        .filter(|p| p.mode == "passthrough")
        .any(|p| us_per_packet(&p.runs).is_some_and(|u| u > 5.0));
    for prof in e.profiles {
        if !(pcm_missed || pass_missed) {
            break;
        }
        any = true;
        profile_note(md, prof);
    }
    if pass_missed {
        any = true;
        passthrough_note(md, cost);
    }
    if pcm_missed {
        any |= pcm_floor_note(md, cost, floor);
    }
    if pcm_missed || pass_missed {
        saturation_note(md, cost, e.loops);
    }
    any
}

fn profile_note(md: &mut String, prof: &ServerProfile) {
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

fn passthrough_note(md: &mut String, cost: &[CostPoint]) {
    let by_load: Vec<String> = cost
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

/// PCM's cost split into the floor and the rest, at the smallest point; true when written.
fn pcm_floor_note(md: &mut String, cost: &[CostPoint], floor: Option<f64>) -> bool {
    let at = |mode: &str| {
        cost.iter()
            .filter(|p| p.mode == mode)
            .min_by_key(|p| p.sessions)
            .and_then(|p| Some((p.sessions, cpu_per_session(&p.runs)? * 1e3)))
    };
    let (Some((n, pcm)), Some((_, pass)), Some(f)) = (at("pcm"), at("passthrough"), floor) else {
        return false;
    };
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
    true
}

fn saturation_note(md: &mut String, cost: &[CostPoint], loops: usize) {
    let saturated: Vec<String> = cost
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
            loops
        );
    }
}

/// Why PCM sessions received less downlink than the backend played, if they did.
pub fn why_downlink(md: &mut String, cost: &[CostPoint], floor: Option<&CodecFloor>) -> bool {
    let mut any = false;
    for p in measured(cost, "pcm") {
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
                floor.map_or(0.0, |f| f.encode_us_per_frame),
                floor.map_or(0.0, |f| f.decode_us_per_frame),
            );
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use crate::scenarios::cost::fixtures::point;
    use crate::scenarios::cost::report::{lost_packets_note, profile_share};

    #[test]
    fn profile_shares_add_matching_lines() {
        let top = vec![
            "30.00%  transceiver  libopus.so  [.] silk_encode".to_string(),
            "10.50%  transceiver  [kernel.kallsyms]  [k] udp_sendmsg".to_string(),
        ];
        assert!((profile_share(&top, &["silk"]) - 30.0).abs() < 1e-9);
        assert!((profile_share(&top, &["[kernel"]) - 10.5).abs() < 1e-9);
    }

    #[test]
    fn a_run_that_lost_packets_says_where_they_went() {
        let mut lossy = point("passthrough", 1000, 20.0, 555);
        let run = &mut lossy.runs[0];
        run.loss.sessions = 555;
        run.loss.uplink_lost = 15_828;
        run.loss.sessions_with_uplink_loss = 554;
        run.window_drops = Some(crate::session_load::WindowDrops {
            bridge_uplink: Some(0),
            loop_datagrams: Some(3),
            send_errors: Some(0),
            kernel_rcvbuf: Some(15_800),
        });
        let mut old = point("pcm", 100, 1.0, 100);
        old.runs[0].loss.downlink_lost = 7;
        old.runs[0].loss.sessions = 100;
        old.runs[0].loss.sessions_with_downlink_loss = 1;
        let clean = point("pcm", 250, 1.0, 250);
        let mut md = String::new();
        lost_packets_note(&mut md, &[lossy, old, clean]);
        assert!(md.starts_with("Runs that lost packets, and where:"), "{md}");
        assert!(
            md.contains("- passthrough, 1000 sessions, run 1: 15,828 uplink and 0 downlink packets lost (554 and 0 of 555 sessions)"),
            "{md}"
        );
        assert!(
            md.contains("0 uplink messages at a full backend queue, 3 datagrams in its loops"),
            "{md}"
        );
        assert!(
            md.contains("the kernel counted 15,800 UDP receive-buffer overflows"),
            "{md}"
        );
        assert!(
            md.contains("- pcm, 100 sessions, run 1: 0 uplink and 7 downlink packets lost"),
            "{md}"
        );
        assert!(
            md.contains("of 100 sessions); no drop counters were recorded."),
            "{md}"
        );
        assert!(!md.contains("250 sessions"), "{md}");

        let mut none = String::new();
        lost_packets_note(&mut none, &[point("pcm", 250, 1.0, 250)]);
        assert!(none.is_empty());
    }
}
