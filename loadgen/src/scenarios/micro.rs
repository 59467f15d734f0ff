//! Micro-benchmarks: criterion's estimates for `loadgen/benches/proto_parsers.rs` and
//! `transceiver/benches/session.rs`, which `scripts/bench` runs before the suite; the suite only
//! reads what criterion wrote. The session benchmark also gives the report's "Where a packet's
//! CPU goes" table, set beside the whole process's cost from the same run.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::runs::us_per_packet;
use crate::scenarios::cost::CostPoint;
use crate::suite::perf::ServerProfile;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MicroBench {
    pub name: String,
    pub mean_ns: f64,
    pub median_ns: f64,
}

/// Criterion's estimates (`<dir>/<group>/<bench>/new/estimates.json`).
pub fn read_criterion(dir: &Path) -> Vec<MicroBench> {
    let mut out = Vec::new();
    collect_criterion(dir, 0, &mut out);
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Criterion writes `<id>/new/estimates.json` (and `benchmark.json` with the full id), the id
/// being one folder or a group folder with one folder per benchmark.
fn collect_criterion(dir: &Path, depth: usize, out: &mut Vec<MicroBench>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let est = path.join("new").join("estimates.json");
        match fs::read_to_string(&est) {
            Ok(text) => {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                let name = fs::read_to_string(path.join("new").join("benchmark.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .and_then(|b| b["full_id"].as_str().map(str::to_string))
                    .unwrap_or_else(|| e.file_name().to_string_lossy().into_owned());
                out.push(MicroBench {
                    name,
                    mean_ns: v["mean"]["point_estimate"].as_f64().unwrap_or(0.0),
                    median_ns: v["median"]["point_estimate"].as_f64().unwrap_or(0.0),
                });
            }
            Err(_) if depth < 2 && path.is_dir() && e.file_name() != "report" => {
                collect_criterion(&path, depth + 1, out);
            }
            Err(_) => {}
        }
    }
}

/// The "Micro-benchmarks" section.
pub fn section(md: &mut String, micro: &[MicroBench]) {
    let _ = writeln!(md, "## Micro-benchmarks\n");
    if micro.is_empty() {
        let _ = writeln!(
            md,
            "Not run in this profile (`cargo bench -p voxgate-loadgen --bench proto_parsers`).\n"
        );
        return;
    }
    let _ = writeln!(
        md,
        "criterion, short measurement times (shared machine): `loadgen/benches/proto_parsers.rs` (per call; demux maps hold \
         1,000 sessions) and `transceiver/benches/session.rs` (`uplink/*`, `downlink/*`: per second of audio, 50 packets).\n"
    );
    let _ = writeln!(md, "| benchmark | median ns | mean ns |\n|---|---|---|");
    for b in micro {
        let _ = writeln!(
            md,
            "| `{}` | {:.1} | {:.1} |",
            b.name, b.median_ns, b.mean_ns
        );
    }
    md.push('\n');
}

/// Packets in one iteration of `transceiver/benches/session.rs` (a second of 20 ms audio).
const SESSION_BENCH_PACKETS: f64 = 50.0;
/// The passthrough cost runs' traffic per session-second: 50 uplink packets, and downlink
/// during half of each 2 s duty cycle (25 packets).
const COST_UPLINK_PPS: f64 = 50.0;
const COST_DOWNLINK_PPS: f64 = 25.0;

/// A session benchmark's median per packet (µs), if it ran.
fn session_us(micro: &[MicroBench], id: &str) -> Option<f64> {
    micro
        .iter()
        .find(|b| b.name == id)
        .map(|b| b.median_ns / SESSION_BENCH_PACKETS / 1_000.0)
}

/// The "Where a packet's CPU goes" section: one `Session`'s parts (criterion, no I/O) beside
/// the whole transceiver process's passthrough cost per audio packet (the cost runs).
pub fn packet_cost_section(
    md: &mut String,
    micro: &[MicroBench],
    cost: &[CostPoint],
    profiles: &[ServerProfile],
) {
    let _ = writeln!(md, "## Where a packet's CPU goes\n");
    process_breakdown(md, cost, profiles);
    let rows = [
        (
            "uplink/passthrough",
            "uplink, whole session (passthrough)",
            "SRTP decrypt, str0m RTP, hand-off, the second's timers",
        ),
        (
            "uplink/str0m_only",
            "uplink, str0m and session bookkeeping",
            "the same second with no backend attached",
        ),
        (
            "uplink/bridge_passthrough",
            "uplink, bridge hand-off alone",
            "an Opus packet into the backend's bounded queue",
        ),
        (
            "downlink/idle",
            "timers of an idle second",
            "20 ms bridge ticks with nothing to play, str0m timeouts",
        ),
        (
            "downlink/passthrough",
            "downlink, whole session (passthrough)",
            "tick: pop, RTP write, SRTP encrypt, drain",
        ),
        (
            "downlink/bridge_passthrough",
            "downlink, bridge pop alone",
            "one queued Opus packet",
        ),
        (
            "uplink/pcm",
            "uplink, whole session (PCM)",
            "plus Opus decode",
        ),
        (
            "downlink/pcm",
            "downlink, whole session (PCM)",
            "plus Opus encode",
        ),
    ];
    let (Some(up), Some(down), Some(idle)) = (
        session_us(micro, "uplink/passthrough"),
        session_us(micro, "downlink/passthrough"),
        session_us(micro, "downlink/idle"),
    ) else {
        let _ = writeln!(
            md,
            "Not run in this profile (`scripts/bench-session`, or `scripts/bench` outside `--smoke`).\n"
        );
        return;
    };
    let _ = writeln!(
        md,
        "One real `Session` (str0m, SRTP, the audio bridge and its queues) driven through a recorded second of audio \
         with no sockets and no threads (criterion, `transceiver/benches/session.rs`; medians, per 20 ms packet). \
         No kernel I/O and no gRPC are in these rows: they are what is left of the whole process's figure below.\n"
    );
    let _ = writeln!(md, "| part | what runs | µs per packet |\n|---|---|---|");
    for (id, part, what) in rows {
        if let Some(us) = session_us(micro, id) {
            let _ = writeln!(md, "| {part} | {what} | {us:.2} |");
        }
    }
    // The session's cost per audio packet of the cost runs' traffic: uplink packets at the whole
    // session's cost (timers included), downlink packets at the tick's cost above idle.
    let session_per_packet = (COST_UPLINK_PPS * up + COST_DOWNLINK_PPS * (down - idle).max(0.0))
        / (COST_UPLINK_PPS + COST_DOWNLINK_PPS);
    let whole: Vec<(usize, f64)> = cost
        .iter()
        .filter(|p| p.mode == "passthrough")
        .filter_map(|p| Some((p.sessions, us_per_packet(&p.runs)?)))
        .collect();
    let _ = writeln!(
        md,
        "\nBeside the whole transceiver process in passthrough (the cost runs above: 50 uplink and 25 downlink \
         packets per session-second), the session's share is {session_per_packet:.2} µs per audio packet; the rest is \
         kernel receive and send (`recvmmsg`, `sendmmsg`, `epoll_wait`, wakeups), the loop's demux and batching, and \
         the gRPC hop (protobuf, HTTP/2, the backend's TCP).\n"
    );
    if whole.is_empty() {
        let _ = writeln!(
            md,
            "(The passthrough cost runs did not run in this report.)\n"
        );
        return;
    }
    let _ = writeln!(
        md,
        "| sessions | whole process µs per audio packet | inside the session | outside it (kernel, loop, gRPC) | session share |\n|---|---|---|---|---|"
    );
    for (n, w) in whole {
        let _ = writeln!(
            md,
            "| {n} | {w:.2} | {session_per_packet:.2} | {:.2} | {:.0} % |",
            (w - session_per_packet).max(0.0),
            100.0 * session_per_packet / w
        );
    }
    md.push('\n');
}

/// The whole process, from the perf profiles of the passthrough cost runs: every sample by
/// component, and that share of its run's CPU per audio packet.
fn process_breakdown(md: &mut String, cost: &[CostPoint], profiles: &[ServerProfile]) {
    let profiled: Vec<(&ServerProfile, Option<f64>)> = cost
        .iter()
        .filter(|p| p.mode == "passthrough")
        .filter_map(|p| {
            // Profiles are named after their run: `cost-passthrough-<sessions> (<n> loops)`.
            let name = format!("cost-passthrough-{} ", p.sessions);
            let prof = profiles
                .iter()
                .find(|f| f.scenario.starts_with(&name) && !f.breakdown.is_empty())?;
            Some((prof, us_per_packet(&p.runs)))
        })
        .collect();
    if profiled.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "The whole transceiver process in passthrough, by component: every sample of the perf profile of a cost \
         run, by symbol, and that share of the run's CPU per audio packet.\n"
    );
    for (prof, whole) in profiled {
        let _ = writeln!(
            md,
            "`{}`{}:\n",
            prof.scenario,
            whole.map_or(String::new(), |us| format!(
                ", {us:.2} µs of CPU per audio packet"
            ))
        );
        let _ = writeln!(
            md,
            "| component | share of samples | µs per audio packet |\n|---|---|---|"
        );
        for share in &prof.breakdown {
            let us = whole.map(|w| w * share.percent / 100.0);
            let _ = writeln!(
                md,
                "| {} | {:.1} % | {} |",
                share.component,
                share.percent,
                us.map_or("–".into(), |u| format!("{u:.2}"))
            );
        }
        md.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(name: &str, per_second_ns: f64) -> MicroBench {
        MicroBench {
            name: name.into(),
            mean_ns: per_second_ns,
            median_ns: per_second_ns,
        }
    }

    #[test]
    fn packet_cost_reads_per_packet_figures_and_says_when_not_run() {
        let mut md = String::new();
        packet_cost_section(&mut md, &[], &[], &[]);
        assert!(md.contains("Not run in this profile"), "{md}");

        // 50 packets per iteration: 203,500 ns per second is 4.07 µs per packet.
        let micro = [
            bench("uplink/passthrough", 203_500.0),
            bench("downlink/passthrough", 120_500.0),
            bench("downlink/idle", 34_500.0),
        ];
        let mut md = String::new();
        packet_cost_section(&mut md, &micro, &[], &[]);
        assert!(md.contains("| 4.07 |"), "{md}");
        assert!(md.contains("| 2.41 |"), "{md}");
        // (50 × 4.07 + 25 × (2.41 − 0.69)) / 75 = 3.29 µs per audio packet.
        assert!(md.contains("3.29 µs per audio packet"), "{md}");
        assert!(md.contains("did not run"), "{md}");
    }

    #[test]
    fn the_process_breakdown_turns_each_share_into_micros_per_datagram() {
        use crate::suite::perf::Share;
        let share = |c: &str, p: f64| Share {
            component: c.into(),
            percent: p,
        };
        let prof = ServerProfile {
            scenario: "cost-passthrough-1000 (1 loops)".into(),
            top: vec![],
            breakdown: vec![share("kernel", 40.0), share("str0m", 10.0)],
        };
        // 0.1 CPU-s over 10,000 audio packets: 10 µs each.
        let run = crate::session_load::LoadResult {
            server: Some(crate::session_load::ServerUsage {
                cpu_secs: 0.1,
                ..Default::default()
            }),
            window_audio_sent: 6_000,
            window_audio_received: 4_000,
            ..Default::default()
        };
        let cost = [CostPoint {
            mode: "passthrough".into(),
            sessions: 1000,
            runs: vec![run],
            beside: Vec::new(),
        }];
        let mut md = String::new();
        process_breakdown(&mut md, &cost, &[prof]);
        assert!(md.contains("| kernel | 40.0 % | 4.00 |"), "{md}");
        assert!(md.contains("| str0m | 10.0 % | 1.00 |"), "{md}");
        assert!(md.contains("`cost-passthrough-1000 (1 loops)`, 10.00 µs of CPU per audio packet"));
    }
}
