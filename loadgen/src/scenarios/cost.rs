//! Transceiver CPU per session against the libopus floor: PCM and passthrough sessions at
//! growing counts, a duty-cycle backend, the server's CPU read from `/proc`; the codec floor
//! measured in process on the same frames.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::backend::BackendConfig;
use crate::codec_floor::{
    self, floor_at, Application, CodecFloor, CodecFloorArgs, EncoderSettings, BACKEND_RATES,
};
use crate::relay_load::{FlowResult, FlowTarget};
use crate::report::cells::{at_most, med, num, thousands};
use crate::report::runs::{cpu_per_session, server, us_per_packet};
use crate::scenarios::relay;
use crate::session_load::{self, LoadResult};
use crate::stats::median;
use crate::suite::args::Profile;
use crate::suite::perf::{self, ServerProfile, CRYPTO_SYMBOLS, LIBOPUS_SYMBOLS};
use crate::suite::plan::Plan;
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

/// One point of the transceiver-cost curve.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CostPoint {
    pub mode: String,
    pub sessions: usize,
    pub runs: Vec<LoadResult>,
    /// The baselines of issue 12's ratio targets, each measured right after the run at the
    /// same index of `runs` (`None` where it failed; empty for a point no target pairs).
    /// Measured half an hour apart, the same baseline moved by a fifth between two full runs
    /// (docs/SESSION_COST.md, "how far the machine moves"); seconds apart, a repetition's
    /// ratio sees the machine as it was for its own run.
    pub beside: Vec<Beside>,
}

/// A baseline measured beside one cost run (see [`CostPoint::beside`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Beside {
    /// Target 1's: the bare forwarder flat out (a passthrough point at a target's sessions).
    pub forwarder: Option<FlowResult>,
    /// Target 3's: the codec floor at the point's rate and encoder (a PCM point).
    pub floor: Option<CodecFloor>,
}

/// A kind of cost run: how the backend attaches and how the transceiver encodes.
#[derive(Debug, Clone, Copy)]
pub struct CostMode {
    /// Its name in the plan, the results and the report.
    pub name: &'static str,
    pub audio: AudioMode,
    /// The backend's PCM rate.
    pub sample_rate: u32,
    /// The transceiver's downlink encoder.
    pub encoder: EncoderSettings,
    /// Further transceiver flags.
    pub flags: &'static [&'static str],
    /// The backend carries its sessions on one `Multiplex` stream (false: a `Session` stream
    /// each).
    pub multiplex: bool,
    /// The mode this one is a baseline of: at the same session count the two run interleaved,
    /// repetition by repetition, so the machine's drift over the run falls on both alike.
    pub baseline_of: Option<&'static str>,
}

/// Every kind of cost run the plan may ask for.
pub const COST_MODES: &[CostMode] = &[
    CostMode {
        name: "pcm",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    CostMode {
        name: "passthrough",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // The rates speech models use.
    CostMode {
        name: "pcm16k",
        audio: AudioMode::Pcm,
        sample_rate: 16_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    CostMode {
        name: "pcm24k",
        audio: AudioMode::Pcm,
        sample_rate: 24_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // The cheapest encoder the transceiver ships: how many PCM sessions one loop then holds.
    CostMode {
        name: "pcm-lowdelay-c0",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings {
            bitrate: 32_000,
            complexity: 0,
            application: Application::Lowdelay,
        },
        flags: &[],
        multiplex: true,
        baseline_of: None,
    },
    // What read coalescing (off by default) would save: the loop reads its socket at most once
    // per millisecond under steady traffic.
    CostMode {
        name: "passthrough-coalesced",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: COALESCED,
        multiplex: true,
        baseline_of: Some("passthrough"),
    },
];

/// Every kind of cost run the plan may ask for, continued: the backend on a `Session` stream per
/// call, the baseline of what `Multiplex` saves.
const SESSION_STREAM_MODES: &[CostMode] = &[
    CostMode {
        name: "passthrough-sessions",
        audio: AudioMode::OpusPassthrough,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: false,
        baseline_of: Some("passthrough"),
    },
    CostMode {
        name: "pcm-sessions",
        audio: AudioMode::Pcm,
        sample_rate: 48_000,
        encoder: EncoderSettings::BENCH,
        flags: &[],
        multiplex: false,
        baseline_of: Some("pcm"),
    },
];

/// The transceiver flags that turn read coalescing on, at the window that saved CPU.
pub const COALESCED: &[&str] = &["--read-window-us", "1000"];

/// The cost mode called `name`.
pub fn cost_mode(name: &str) -> Option<&'static CostMode> {
    COST_MODES
        .iter()
        .chain(SESSION_STREAM_MODES)
        .find(|m| m.name == name)
}

/// Arrivals of the point whose admitted sessions are a loop's PCM capacity.
pub const CAPACITY_ARRIVALS: usize = 500;

/// Arrivals per second of the PCM capacity points. Admission reads CPU over the last second,
/// and a session reaches its full cost only once its backend talks (the duty backend: 1 s of
/// every 2). Ramping 250 PCM sessions onto one core (`--max-process-cpu` 0.85): at 100/s it
/// admitted 187 and its backend got uplink audio p50 428 ms, p99 984 ms late; at 20/s 132
/// (p99 239 ms); at 10/s 110, at 0.83 of the core, p99 14 ms. 10/s lets admission follow.
pub const CAPACITY_RATE: f64 = 10.0;

/// The arrival rate of a cost point: [`CAPACITY_RATE`] for the PCM capacity points.
fn arrival_rate(plan_rate: f64, n: usize, mode: &CostMode) -> f64 {
    if n == CAPACITY_ARRIVALS && mode.audio == AudioMode::Pcm {
        CAPACITY_RATE.min(plan_rate)
    } else {
        plan_rate
    }
}

/// The parts of the results the cost runs write: the curve and the perf profiles.
pub type CostSlots<R> = fn(&mut R) -> (&mut Vec<CostPoint>, &mut Vec<ServerProfile>);

/// The parts of the results the floors go to: the one at 48 kHz, and one per backend rate.
pub type FloorSlots<R> = fn(&mut R) -> (&mut Option<CodecFloor>, &mut Vec<CodecFloor>);

/// The libopus floor at each backend rate, with the encoder the cost runs' transceivers use,
/// in process, before any server starts.
pub fn measure_floor<R: Ledger>(s: &mut Runner<R>, slots: FloorSlots<R>) {
    for rate in BACKEND_RATES {
        s.say(&format!(
            "codec floor at {rate} Hz (libopus decode + encode, in process)"
        ));
        let repeats = if s.args.profile == Profile::Smoke {
            1
        } else {
            5
        };
        match codec_floor::run(&floor_args(s, rate, EncoderSettings::BENCH, repeats)) {
            Ok(f) => {
                let (at_48k, by_rate) = slots(&mut s.results);
                if rate == 48_000 {
                    *at_48k = Some(f.clone());
                }
                by_rate.push(f);
            }
            Err(e) => s.record_error(&format!("codec floor {rate} Hz"), e),
        }
    }
}

/// The floor tool's arguments for `rate` and encoder `e`, on the plan's frames.
fn floor_args<R: Ledger>(
    s: &Runner<R>,
    rate: u32,
    e: EncoderSettings,
    repeats: usize,
) -> CodecFloorArgs {
    CodecFloorArgs {
        bitrate: e.bitrate,
        complexity: e.complexity,
        application: e.application,
        sample_rate: rate,
        duty: 0.5,
        frames: s.plan.codec_frames,
        repeats,
        codecs: 1,
        out: None,
    }
}

/// The baselines a run of `mode` at `n` sessions is paired with, measured now (right after
/// the run): the forwarder flat out for target 1's passthrough points, the codec floor for
/// the PCM points target 3 reads. `None`: the point pairs nothing.
fn measure_beside<R: Ledger>(s: &mut Runner<R>, mode: &CostMode, n: usize) -> Option<Beside> {
    if mode.name == "passthrough" && relay::target_sessions(s).contains(&n) {
        let forwarder = match forwarder_flat_out(s) {
            Ok(f) => Some(f),
            Err(e) => {
                s.record_error(&format!("forwarder beside passthrough {n}"), e);
                None
            }
        };
        return Some(Beside {
            forwarder,
            floor: None,
        });
    }
    if target3_mode(mode) {
        // Three repeats, not the up-front floor's five: the pairing, not the repeats, is what
        // takes the machine's drift out, and each costs about a second at the full plan.
        let repeats = if s.args.profile == Profile::Smoke {
            1
        } else {
            3
        };
        let floor = match codec_floor::run(&floor_args(s, mode.sample_rate, mode.encoder, repeats))
        {
            Ok(f) => Some(f),
            Err(e) => {
                s.record_error(&format!("codec floor beside {}", mode.name), e);
                None
            }
        };
        return Some(Beside {
            forwarder: None,
            floor,
        });
    }
    None
}

/// The bare forwarder flat out, run exactly as the relay scenario's throughput leg runs it.
fn forwarder_flat_out<R: Ledger>(s: &mut Runner<R>) -> anyhow::Result<FlowResult> {
    let loadgen = std::env::current_exe()?;
    relay::through(s, FlowTarget::Forwarder, 0.0, "", &loadgen)
}

/// Whether target 3 reads points of `mode`: PCM with the default encoder (the floor is
/// measured with the same settings).
fn target3_mode(mode: &CostMode) -> bool {
    mode.audio == AudioMode::Pcm && mode.encoder == EncoderSettings::BENCH
}

/// Every mode of the plan at every session count, then the plan's further modes at theirs,
/// each point saved as soon as it is done. A point runs interleaved with its baselines (modes
/// whose `baseline_of` names its mode, at the same session count), repetition by repetition.
pub fn run<R: Ledger>(s: &mut Runner<R>, slots: CostSlots<R>) {
    let largest = s.plan.cost_sessions.iter().copied().max().unwrap_or(0);
    let smallest = s.plan.cost_sessions.iter().copied().min().unwrap_or(0);
    let mut points: Vec<(String, usize, bool)> = Vec::new();
    for mode in ["pcm", "passthrough"] {
        if s.plan.modes.iter().any(|m| m == mode) {
            // The largest point of each curve is profiled, and passthrough's smallest too:
            // there each packet pays a wakeup of its own ("Where a packet's CPU goes").
            let profiled = |n: usize| n == largest || (mode == "passthrough" && n == smallest);
            points.extend(
                s.plan
                    .cost_sessions
                    .iter()
                    .map(|&n| (mode.into(), n, profiled(n))),
            );
        }
    }
    for (mode, sessions) in &s.plan.cost_extra {
        points.extend(sessions.iter().map(|&n| (mode.clone(), n, false)));
    }
    let order: Vec<(String, usize)> = points.iter().map(|(m, n, _)| (m.clone(), *n)).collect();
    for group in interleaved(points) {
        run_group(s, slots, &group);
    }
    // The report lists the points in plan order (curves first), however they ran.
    let rank = |p: &CostPoint| {
        order
            .iter()
            .position(|(m, n)| *m == p.mode && *n == p.sessions)
    };
    slots(&mut s.results).0.sort_by_key(rank);
    s.save();
}

/// Points grouped to run together: each point of a measured mode with the baselines of that
/// mode at its session count (see [`CostMode::baseline_of`]), in plan order. The plan lists
/// baselines after the curves, so a baseline finds its point's group already there; one whose
/// point the plan does not run is a group of its own.
fn interleaved(points: Vec<(String, usize, bool)>) -> Vec<Vec<(String, usize, bool)>> {
    let mut groups: Vec<Vec<(String, usize, bool)>> = Vec::new();
    for p in points {
        let of = cost_mode(&p.0).and_then(|c| c.baseline_of);
        match groups
            .iter_mut()
            .find(|g| of.is_some_and(|of| g[0].0 == of && g[0].1 == p.1))
        {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    groups
}

/// Runs a group's points, each repetition of them in turn, and saves each point. A run that
/// a target pairs with a baseline has it measured right after it ([`measure_beside`]).
fn run_group<R: Ledger>(s: &mut Runner<R>, slots: CostSlots<R>, group: &[(String, usize, bool)]) {
    let mut points: Vec<CostPoint> = group
        .iter()
        .map(|(mode, n, _)| CostPoint {
            mode: mode.clone(),
            sessions: *n,
            ..CostPoint::default()
        })
        .collect();
    for rep in 0..s.plan.reps {
        for (i, (mode_name, n, profiled)) in group.iter().enumerate() {
            let Some(mode) = cost_mode(mode_name) else {
                if rep == 0 {
                    s.record_error(
                        &format!("cost {mode_name}"),
                        anyhow::anyhow!("no such cost mode"),
                    );
                }
                continue;
            };
            s.say(&format!(
                "transceiver cost: {mode_name}, {n} sessions, duty cycle 1 s / 2 s (rep {})",
                rep + 1
            ));
            // Of the first repetition.
            let perf = *profiled && rep == 0 && s.plan.perf_secs > 0.0 && !s.skip("perf");
            match cost_run(s, slots, &format!("cost-{mode_name}-{n}"), *n, mode, perf) {
                Ok(r) => {
                    points[i].runs.push(r);
                    if let Some(b) = measure_beside(s, mode, *n) {
                        points[i].beside.push(b);
                    }
                }
                Err(e) => s.record_error(&format!("cost {mode_name} {n}"), e),
            }
        }
    }
    for point in points {
        if cost_mode(&point.mode).is_some() {
            slots(&mut s.results).0.push(point);
        }
    }
    s.save();
}

fn cost_run<R: Ledger>(
    s: &mut Runner<R>,
    slots: CostSlots<R>,
    name: &str,
    n: usize,
    mode: &CostMode,
    perf: bool,
) -> anyhow::Result<LoadResult> {
    let opts = TransceiverOpts {
        encoder: mode.encoder,
        flags: mode.flags,
        ..TransceiverOpts::default()
    };
    let t = s.start_transceiver(name, &opts)?;
    let mut cfg = s.load_config(&t, n, arrival_rate(s.plan.cost_rate, n, mode));
    cfg.backend = Some(BackendConfig {
        sample_rate: mode.sample_rate,
        multiplex: mode.multiplex,
        ..s.backend(&t, n, mode.audio, Runner::<R>::duty())
    });
    // The in-transceiver hand-off (socket → PCM on the gRPC stream) of the media latency
    // target, and the loops' wakeups, from the transceiver's own metrics.
    cfg.metrics_url = Some(format!("{}/metrics", t.signal));
    let profiler = if perf {
        Some(perf::record_during(
            &s.args.work_dir,
            s.plan.perf_secs,
            &format!("{name} ({} loops)", s.args.loops),
            t.proc.pid(),
            &cfg,
        ))
    } else {
        None
    };
    let r = session_load::run(&cfg);
    if let Some(p) = profiler {
        match p.join() {
            Ok(Some(prof)) => slots(&mut s.results).1.push(prof),
            Ok(None) => {}
            Err(_) => s
                .results
                .errors()
                .push(format!("{name}: perf thread panicked")),
        }
    }
    drop(t);
    r
}

// ---- report --------------------------------------------------------------------------------

/// Server CPU over the libopus cost of the frames it actually handled in the window: every
/// uplink packet the clients sent decoded, every downlink packet they received encoded.
fn work_floor_ratio(runs: &[LoadResult], floor: Option<&CodecFloor>) -> Option<f64> {
    let f = floor?;
    let ratios: Vec<f64> = runs.iter().filter_map(|r| run_floor_ratio(r, f)).collect();
    median(&ratios)
}

/// One run's CPU over the libopus cost of the frames it handled, at floor `f`.
fn run_floor_ratio(r: &LoadResult, f: &CodecFloor) -> Option<f64> {
    let cpu = r.server.as_ref()?.cpu_secs;
    let work = (r.window_audio_sent as f64 * f.decode_us_per_frame
        + r.window_audio_received as f64 * f.encode_us_per_frame)
        / 1e6;
    (work > 0.0).then_some(cpu / work)
}

/// Each run's ratio to the codec floor measured right after it (runs whose floor failed are
/// left out). Empty for a point measured without floors beside it.
pub fn paired_floor_ratios(p: &CostPoint) -> Vec<f64> {
    p.runs
        .iter()
        .zip(&p.beside)
        .filter_map(|(r, b)| run_floor_ratio(r, b.floor.as_ref()?))
        .collect()
}

/// Each run's CPU per packet over that of the forwarder flat out right after it (target 1).
/// Empty for a point measured without the forwarder beside it.
pub fn paired_forwarder_ratios(p: &CostPoint) -> Vec<f64> {
    p.runs
        .iter()
        .zip(&p.beside)
        .filter_map(|(r, b)| {
            let fwd = b.forwarder.as_ref()?.us_per_packet;
            let ours = us_per_packet(std::slice::from_ref(r))?;
            (fwd > 0.0).then_some(ours / fwd)
        })
        .collect()
}

/// The floor a point of `mode` is compared with: the one at its backend rate, measured with
/// its encoder settings. `None` for passthrough and for an encoder the floors were not
/// measured with.
fn floor_for<'a>(mode: &str, floors: &'a [CodecFloor]) -> Option<&'a CodecFloor> {
    let m = cost_mode(mode)?;
    let f = floor_at(floors, m.sample_rate)?;
    let measured_with = EncoderSettings {
        bitrate: f.bitrate,
        complexity: f.complexity,
        application: f.application,
    };
    (m.audio == AudioMode::Pcm && m.encoder == measured_with).then_some(f)
}

/// A PCM point's ratio to the codec floor (target 3).
#[derive(Debug, Clone, PartialEq)]
pub struct FloorRatio {
    /// The median of `reps`.
    pub ratio: f64,
    pub sessions: usize,
    /// Each repetition's ratio.
    pub reps: Vec<f64>,
    /// Whether each repetition was compared with the floor measured right after it (else
    /// with the floor measured before the cost runs).
    pub paired: bool,
}

/// PCM CPU against the codec floor at backend rate `rate` (same rate, same encoder settings):
/// the worst point measured at that rate with the default encoder. Each repetition is
/// compared with the floor measured beside it when the point has them, else with the one of
/// `floors` measured before the cost runs. For the Targets table (issue 12: ≤ 1.3 × at 16 and
/// 24 kHz, ≤ 1.5 × at 48 kHz).
pub fn pcm_floor_ratio(cost: &[CostPoint], floors: &[CodecFloor], rate: u32) -> Option<FloorRatio> {
    cost.iter()
        .filter(|p| !p.runs.is_empty())
        .filter(|p| cost_mode(&p.mode).is_some_and(|m| target3_mode(m) && m.sample_rate == rate))
        .filter_map(|p| {
            let paired = paired_floor_ratios(p);
            let (reps, paired) = if paired.is_empty() {
                let f = floor_for(&p.mode, floors)?;
                let reps: Vec<f64> = p
                    .runs
                    .iter()
                    .filter_map(|r| run_floor_ratio(r, f))
                    .collect();
                (reps, false)
            } else {
                (paired, true)
            };
            Some(FloorRatio {
                ratio: median(&reps)?,
                sessions: p.sessions,
                reps,
                paired,
            })
        })
        .max_by(|a, b| a.ratio.total_cmp(&b.ratio))
}

/// The PCM sessions one loop admitted in mode `mode` (`"pcm"`: the default encoder,
/// `"pcm-lowdelay-c0"`: the cheapest) when [`CAPACITY_ARRIVALS`] sessions arrived: its
/// capacity at `--max-loop-busy` (the median over repetitions). For the Targets table
/// (issue 12: ≥ 1.3 × 238 with the default encoder).
pub fn pcm_capacity(cost: &[CostPoint], mode: &str) -> Option<usize> {
    let p = measured(cost, mode).find(|p| p.sessions == CAPACITY_ARRIVALS)?;
    med(&p.runs, |r| r.sessions_signaled as f64).map(|v| v.round() as usize)
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

/// The points of `mode` that have runs.
fn measured<'a>(cost: &'a [CostPoint], mode: &'a str) -> impl Iterator<Item = &'a CostPoint> {
    cost.iter()
        .filter(move |p| p.mode == mode && !p.runs.is_empty())
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
    use super::*;
    use crate::session_load::ServerUsage;

    fn floor(rate: u32, decode: f64, encode: f64) -> CodecFloor {
        CodecFloor {
            sample_rate: rate,
            bitrate: 32_000,
            complexity: 5,
            decode_us_per_frame: decode,
            encode_us_per_frame: encode,
            ..CodecFloor::default()
        }
    }

    /// A point whose run spent `cpu` seconds on 1,000 uplink and 500 downlink frames, with
    /// `admitted` sessions signaled.
    fn point(mode: &str, sessions: usize, cpu: f64, admitted: usize) -> CostPoint {
        CostPoint {
            mode: mode.into(),
            sessions,
            runs: vec![LoadResult {
                server: Some(ServerUsage {
                    cpu_secs: cpu,
                    ..ServerUsage::default()
                }),
                window_audio_sent: 1000,
                window_audio_received: 500,
                sessions_signaled: admitted,
                ..LoadResult::default()
            }],
            beside: Vec::new(),
        }
    }

    #[test]
    fn floor_ratio_uses_the_floor_at_the_points_rate_and_the_worst_point() {
        // 16 kHz floor: 1,000 × 10 µs + 500 × 20 µs = 0.02 s; 48 kHz: 0.04 s.
        let floors = [floor(16_000, 10.0, 20.0), floor(48_000, 20.0, 40.0)];
        let cost = [
            point("pcm16k", 100, 0.024, 100),
            point("pcm16k", 250, 0.030, 250),
            point("pcm", 100, 0.05, 100),
            // Another encoder: not compared with the default encoder's floor.
            point("pcm-lowdelay-c0", 500, 0.01, 500),
        ];
        let w = pcm_floor_ratio(&cost, &floors, 16_000).unwrap();
        assert!(
            (w.ratio - 1.5).abs() < 1e-9 && w.sessions == 250 && !w.paired,
            "{w:?}"
        );
        let w = pcm_floor_ratio(&cost, &floors, 48_000).unwrap();
        assert!(
            (w.ratio - 1.25).abs() < 1e-9 && w.sessions == 100 && !w.paired,
            "{w:?}"
        );
        assert!(
            pcm_floor_ratio(&cost, &floors, 24_000).is_none(),
            "no points"
        );
        assert!(floor_for("pcm-lowdelay-c0", &floors).is_none());
        assert!(floor_for("passthrough", &floors).is_none());
    }

    /// `point` with three runs of `cpu` seconds each, every one with a floor measured beside
    /// it (decode `decode[i]` µs, encode twice that).
    fn paired_point(mode: &str, cpu: [f64; 3], decode: [f64; 3]) -> CostPoint {
        let one = point(mode, 100, 0.0, 100).runs.remove(0);
        CostPoint {
            mode: mode.into(),
            sessions: 100,
            runs: cpu
                .iter()
                .map(|&c| LoadResult {
                    server: Some(ServerUsage {
                        cpu_secs: c,
                        ..ServerUsage::default()
                    }),
                    ..one.clone()
                })
                .collect(),
            beside: decode
                .iter()
                .map(|&d| Beside {
                    forwarder: None,
                    floor: Some(floor(16_000, d, 2.0 * d)),
                })
                .collect(),
        }
    }

    #[test]
    fn each_repetition_is_compared_with_the_floor_measured_beside_it() {
        // The machine slows down by half between repetitions, runs and floors alike: each
        // repetition's own ratio is 1.2, while its CPU against the up-front floor (10 µs
        // decode, 20 µs encode: 0.02 s of work) reads 1.2, 1.5 and 1.8.
        let cost = [paired_point(
            "pcm16k",
            [0.024, 0.030, 0.036],
            [10.0, 12.5, 15.0],
        )];
        let w = pcm_floor_ratio(&cost, &[floor(16_000, 10.0, 20.0)], 16_000).unwrap();
        assert!(w.paired, "{w:?}");
        assert!((w.ratio - 1.2).abs() < 1e-9, "{w:?}");
        assert!(w.reps.iter().all(|r| (r - 1.2).abs() < 1e-9), "{w:?}");
        // A failed floor leaves its repetition out of the pairing.
        let mut gap = cost.clone();
        gap[0].beside[1].floor = None;
        assert_eq!(paired_floor_ratios(&gap[0]).len(), 2);
        // Without floors beside, the up-front floor.
        let mut none = cost.clone();
        none[0].beside.clear();
        let w = pcm_floor_ratio(&none, &[floor(16_000, 10.0, 20.0)], 16_000).unwrap();
        assert!(!w.paired && (w.ratio - 1.5).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn passthrough_runs_are_compared_with_the_forwarder_run_beside_them() {
        // 1,500 audio packets per run: 0.015 s is 10 µs a packet.
        let mut p = point("passthrough", 100, 0.0, 100);
        let one = p.runs.remove(0);
        for cpu in [0.015, 0.030] {
            p.runs.push(LoadResult {
                server: Some(ServerUsage {
                    cpu_secs: cpu,
                    ..ServerUsage::default()
                }),
                ..one.clone()
            });
        }
        p.beside = [5.0, 10.0]
            .iter()
            .map(|&us| Beside {
                forwarder: Some(FlowResult {
                    us_per_packet: us,
                    ..FlowResult::default()
                }),
                floor: None,
            })
            .collect();
        let r = paired_forwarder_ratios(&p);
        assert!(
            r.len() == 2 && r.iter().all(|x| (x - 2.0).abs() < 1e-9),
            "{r:?}"
        );
        p.beside.clear();
        assert!(paired_forwarder_ratios(&p).is_empty());
    }

    #[test]
    fn capacity_is_the_admitted_sessions_of_the_500_arrival_point() {
        let cost = [
            point("pcm", 250, 0.1, 250),
            point("pcm", CAPACITY_ARRIVALS, 0.1, 238),
            point("pcm-lowdelay-c0", CAPACITY_ARRIVALS, 0.1, 410),
        ];
        assert_eq!(pcm_capacity(&cost, "pcm"), Some(238));
        assert_eq!(pcm_capacity(&cost, "pcm-lowdelay-c0"), Some(410));
        assert_eq!(pcm_capacity(&cost, "pcm16k"), None);
    }

    #[test]
    fn baselines_run_interleaved_with_the_point_they_are_a_baseline_of() {
        let p = |m: &str, n: usize| (m.to_string(), n, false);
        let groups = interleaved(vec![
            p("passthrough", 100),
            p("passthrough", 1000),
            p("pcm16k", 100),
            p("passthrough-coalesced", 100),
            p("passthrough-sessions", 100),
            p("passthrough-sessions", 1000),
            p("pcm-sessions", 500),
        ]);
        let names: Vec<Vec<String>> = groups
            .iter()
            .map(|g| g.iter().map(|(m, n, _)| format!("{m}@{n}")).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec![
                    "passthrough@100",
                    "passthrough-coalesced@100",
                    "passthrough-sessions@100"
                ],
                vec!["passthrough@1000", "passthrough-sessions@1000"],
                vec!["pcm16k@100"],
                vec!["pcm-sessions@500"],
            ]
        );
    }

    #[test]
    fn every_planned_cost_mode_exists() {
        for p in [Profile::Smoke, Profile::Quick, Profile::Full] {
            let plan = Plan::of(p);
            for (mode, _) in &plan.cost_extra {
                assert!(cost_mode(mode).is_some(), "{mode}");
            }
            for mode in &plan.modes {
                assert!(cost_mode(mode).is_some(), "{mode}");
            }
        }
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
