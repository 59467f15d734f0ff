//! Runs the cost points: the codec floor up front, then every mode of the plan at every
//! session count, each point interleaved with its baselines and paired with what is measured
//! beside it.

use voxgate_proto::bridge::AudioMode;

use crate::backend::BackendConfig;
use crate::codec_floor::{self, CodecFloor, CodecFloorArgs, EncoderSettings, BACKEND_RATES};
use crate::relay_load::{FlowResult, FlowTarget};
use crate::scenarios::cost::{
    cost_mode, target3_mode, Beside, CostMode, CostPoint, CAPACITY_ARRIVALS, CAPACITY_RATE,
};
use crate::scenarios::relay;
use crate::session_load::{self, LoadResult};
use crate::suite::args::Profile;
use crate::suite::perf::{self, ServerProfile};
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

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

#[cfg(test)]
mod tests {
    use crate::scenarios::cost::run::interleaved;

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
}
