//! Relay throughput and one-way latency: the voxgate relay against the bare batched
//! forwarder (its ceiling), coturn and the direct path, with RTP-shaped UDP flows
//! ([`crate::relay_load`]).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::relay_load::{self, FlowResult, FlowTarget, FlowsArgs};
use crate::report::cells::{at_least, at_most, med, num, thousands};
use crate::stats::median;
use crate::suite::args::Profile;
use crate::suite::loads::FLOW_SIZE;
use crate::suite::runner::{Ledger, Runner};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RelaySection {
    pub skipped: Option<String>,
    pub flows: usize,
    pub size: usize,
    pub relay_max: Vec<FlowResult>,
    pub forwarder_max: Vec<FlowResult>,
    pub coturn_max: Vec<FlowResult>,
    /// The common rate of the latency runs: half the relay's measured maximum.
    pub latency_rate: f64,
    pub direct_lat: Vec<FlowResult>,
    pub forwarder_lat: Vec<FlowResult>,
    pub relay_lat: Vec<FlowResult>,
    pub coturn_lat: Vec<FlowResult>,
    pub coturn_skipped: Option<String>,
    /// The bare forwarder paced like the passthrough cost runs: one flow per session at a
    /// session's audio packet rate, for the sessions target 1 names (context for its ratio,
    /// which is against the forwarder flat out).
    pub forwarder_paced: Vec<PacedForwarder>,
}

/// The forwarder at `sessions` flows of [`SESSION_PPS`] each.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PacedForwarder {
    pub sessions: usize,
    pub runs: Vec<FlowResult>,
}

/// Audio packets per second of one passthrough cost session, as the report counts them: 50
/// uplink, and 25 downlink (its backend plays 1 s of every 2 s).
pub const SESSION_PPS: f64 = 75.0;

/// The sessions target 1 is measured at (the smoke profile's own cost sessions instead).
const TARGET_SESSIONS: [usize; 2] = [100, 1_000];

/// The passthrough session counts target 1 reads: [`TARGET_SESSIONS`], or in the smoke
/// profile its own cost sessions, so the smoke run goes through the same code.
pub fn target_sessions<R: Ledger>(s: &Runner<R>) -> Vec<usize> {
    if s.args.profile == Profile::Smoke {
        s.plan.cost_sessions.clone()
    } else {
        TARGET_SESSIONS.to_vec()
    }
}

/// Flat-out throughput of each middle process, then one-way latency at half the relay's
/// maximum, the same rate for every path.
pub fn run<R: Ledger>(s: &mut Runner<R>, section: fn(&mut R) -> &mut RelaySection) {
    let key = hex::encode(rand::random::<[u8; 32]>());
    section(&mut s.results).flows = s.plan.relay_flows;
    section(&mut s.results).size = FLOW_SIZE;
    let loadgen = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            s.record_error("relay", e.into());
            return;
        }
    };
    for rep in 0..s.plan.reps {
        s.say(&format!(
            "relay: flat-out throughput, relay vs bare forwarder (rep {})",
            rep + 1
        ));
        repetition(s, section, FLAT_OUT, 0.0, &key, &loadgen);
    }
    let max: Vec<f64> = section(&mut s.results)
        .relay_max
        .iter()
        .map(|r| r.rx_pps)
        .collect();
    let rate = (median(&max).unwrap_or(10_000.0) * 0.5).clamp(1_000.0, 200_000.0);
    section(&mut s.results).latency_rate = rate;
    // Results written before the plan had the field read 0: the plan's repetitions then.
    let latency_reps = match s.plan.relay_latency_reps {
        0 => s.plan.reps,
        n => n,
    };
    for rep in 0..latency_reps {
        s.say(&format!(
            "relay: one-way latency at {rate:.0} pps (half the relay's maximum) (rep {})",
            rep + 1
        ));
        // Every other repetition runs the relay before the forwarder, so a drift of the
        // machine's state during the run weighs on both alike in the paired ratios.
        let legs = if rep % 2 == 0 {
            LATENCY
        } else {
            LATENCY_RELAY_FIRST
        };
        repetition(s, section, legs, rate, &key, &loadgen);
    }
    forwarder_paced(s, section, &loadgen);
}

/// The forwarder at the packet rate of the passthrough cost runs target 1 compares it with.
fn forwarder_paced<R: Ledger>(
    s: &mut Runner<R>,
    section: fn(&mut R) -> &mut RelaySection,
    loadgen: &Path,
) {
    for n in target_sessions(s) {
        let rate = n as f64 * SESSION_PPS;
        let what = format!("relay: bare forwarder paced like {n} sessions ({rate:.0} pps)");
        let runs = s.repeat(&what, "forwarder paced", |s, _| {
            let (fwd, listen, sink) = s.start_forwarder(loadgen)?;
            relay_load::run(&FlowsArgs {
                target: FlowTarget::Forwarder,
                to: Some(listen),
                sink,
                fleet_key: None,
                fleet_key_id: 1,
                flows: n,
                rate,
                secs: s.plan.relay_secs,
                size: FLOW_SIZE,
                server_pid: Some(fwd.pid()),
                cpu: Some(1),
                out: None,
            })
        });
        section(&mut s.results)
            .forwarder_paced
            .push(PacedForwarder { sessions: n, runs });
    }
}

/// Which profiles and plans measure a leg.
#[derive(Clone, Copy)]
enum When {
    Always,
    /// Only with the plan's latency baselines (direct path, forwarder).
    Baselines,
    /// Not in the smoke profile (coturn is an extra package).
    NotSmoke,
}

/// One middle hop measured in a repetition: the runs it adds to, what a failure is called,
/// and (for the hops a report must explain the absence of) where the failure is kept.
struct Leg {
    target: FlowTarget,
    what: &'static str,
    when: When,
    runs: fn(&mut RelaySection) -> &mut Vec<FlowResult>,
    failure: Option<fn(&mut RelaySection) -> &mut Option<String>>,
}

impl Leg {
    const fn new(
        target: FlowTarget,
        what: &'static str,
        when: When,
        runs: fn(&mut RelaySection) -> &mut Vec<FlowResult>,
    ) -> Leg {
        Leg {
            target,
            what,
            when,
            runs,
            failure: None,
        }
    }

    const fn failure_in(mut self, failure: fn(&mut RelaySection) -> &mut Option<String>) -> Leg {
        self.failure = Some(failure);
        self
    }
}

/// A flat-out repetition, in order.
const FLAT_OUT: &[Leg] = &[
    Leg::new(FlowTarget::Relay, "relay max", When::Always, |rl| {
        &mut rl.relay_max
    })
    .failure_in(|rl| &mut rl.skipped),
    Leg::new(FlowTarget::Forwarder, "forwarder max", When::Always, |rl| {
        &mut rl.forwarder_max
    }),
    Leg::new(FlowTarget::Coturn, "coturn max", When::NotSmoke, |rl| {
        &mut rl.coturn_max
    })
    .failure_in(|rl| &mut rl.coturn_skipped),
];

/// A latency repetition's legs.
const DIRECT_LAT: Leg = Leg::new(
    FlowTarget::Direct,
    "direct latency",
    When::Baselines,
    |rl| &mut rl.direct_lat,
);
const FORWARDER_LAT: Leg = Leg::new(
    FlowTarget::Forwarder,
    "forwarder latency",
    When::Baselines,
    |rl| &mut rl.forwarder_lat,
);
const RELAY_LAT: Leg = Leg::new(FlowTarget::Relay, "relay latency", When::Always, |rl| {
    &mut rl.relay_lat
});
const COTURN_LAT: Leg = Leg::new(FlowTarget::Coturn, "coturn latency", When::NotSmoke, |rl| {
    &mut rl.coturn_lat
});

/// A latency repetition, in order.
const LATENCY: &[Leg] = &[DIRECT_LAT, FORWARDER_LAT, RELAY_LAT, COTURN_LAT];
/// The same with the relay before the forwarder.
const LATENCY_RELAY_FIRST: &[Leg] = &[DIRECT_LAT, RELAY_LAT, FORWARDER_LAT, COTURN_LAT];

/// One repetition: every leg this profile and plan measure, at `rate` (0: flat out).
fn repetition<R: Ledger>(
    s: &mut Runner<R>,
    section: fn(&mut R) -> &mut RelaySection,
    legs: &[Leg],
    rate: f64,
    key: &str,
    loadgen: &Path,
) {
    for leg in legs {
        let measured = match leg.when {
            When::Always => true,
            When::Baselines => s.plan.relay_latency_baselines,
            When::NotSmoke => s.args.profile != Profile::Smoke,
        };
        if measured {
            measure(s, section, leg, rate, key, loadgen);
        }
    }
}

/// Runs `leg` at `rate` and records its result or its failure.
fn measure<R: Ledger>(
    s: &mut Runner<R>,
    section: fn(&mut R) -> &mut RelaySection,
    leg: &Leg,
    rate: f64,
    key: &str,
    loadgen: &Path,
) {
    match through(s, leg.target, rate, key, loadgen) {
        Ok(r) => (leg.runs)(section(&mut s.results)).push(r),
        Err(e) => {
            if let Some(failure) = leg.failure {
                *failure(section(&mut s.results)) = Some(format!("{e:#}"));
            }
            s.record_error(leg.what, e);
        }
    }
}

/// One flow run at `rate` through a fresh middle process of `target` (none for the direct
/// path), stopped when the run is over. `key` is the fleet key (read by the relay legs only).
pub fn through<R: Ledger>(
    s: &mut Runner<R>,
    target: FlowTarget,
    rate: f64,
    key: &str,
    loadgen: &Path,
) -> anyhow::Result<FlowResult> {
    let anywhere = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    match target {
        FlowTarget::Relay | FlowTarget::RelayTcp => {
            let (relay, public) = s.start_relay(key)?;
            s.flows(
                target,
                Some(public),
                anywhere,
                rate,
                Some(relay.pid()),
                Some(key),
            )
        }
        FlowTarget::Forwarder => {
            let (fwd, listen, sink) = s.start_forwarder(loadgen)?;
            s.flows(target, Some(listen), sink, rate, Some(fwd.pid()), None)
        }
        FlowTarget::Coturn => {
            let (turn, listen) = s.start_coturn()?;
            s.flows(target, Some(listen), anywhere, rate, Some(turn.pid()), None)
        }
        FlowTarget::Direct => s.flows(target, None, anywhere, rate, None, None),
    }
}

// ---- report --------------------------------------------------------------------------------

/// The relay's and the forwarder's pps per core, and their ratio.
fn relay_ratios(rl: &RelaySection) -> (Option<f64>, Option<f64>, Option<f64>) {
    let relay = med(&rl.relay_max, |f| f.pps_per_core);
    let fwd = med(&rl.forwarder_max, |f| f.pps_per_core);
    let ratio = match (relay, fwd) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    (relay, fwd, ratio)
}

/// Target 6's figure: the relay's added one-way latency p50 over the forwarder's, as the median
/// of the repetitions' own ratios, each pairing legs run back to back, so that the machine's
/// drift between repetitions cancels (one repetition's ratio spreads widely with the relay
/// unchanged: docs/SESSION_COST.md, "Target 6 on paired repetitions"). Results whose legs
/// cannot be paired fall back to the ratio of the legs' medians.
pub fn added_latency_ratio(rl: &RelaySection) -> Option<f64> {
    median(&added_latency_per_rep(rl)).or_else(|| added_latency(rl).2)
}

/// The added-latency ratio ([`added_latency_ratio`]) and the cell that shows it: each
/// repetition's ratio, and the legs' medians with their ratio beside them.
pub fn added_latency_cell(rl: &RelaySection) -> (Option<f64>, String) {
    let (added_relay, added_fwd, of_medians) = added_latency(rl);
    let verdict = added_latency_ratio(rl);
    let reps = added_latency_per_rep(rl);
    let how = if reps.len() > 1 {
        let list: Vec<String> = reps.iter().map(|v| format!("{v:.2}")).collect();
        format!(
            "the median of {} repetitions' ratios {}; the legs' medians {} µs vs {} µs, {} ×",
            reps.len(),
            list.join(", "),
            num(added_relay, 1),
            num(added_fwd, 1),
            num(of_medians, 2)
        )
    } else {
        format!("{} µs vs {} µs", num(added_relay, 1), num(added_fwd, 1))
    };
    (verdict, format!("{} × ({how})", num(verdict, 2)))
}

/// Added one-way latency p50 of the relay and of the forwarder over the direct path.
pub fn added_latency(rl: &RelaySection) -> (Option<f64>, Option<f64>, Option<f64>) {
    let direct = med(&rl.direct_lat, |f| f.latency_us.p50);
    let relay = med(&rl.relay_lat, |f| f.latency_us.p50);
    let fwd = med(&rl.forwarder_lat, |f| f.latency_us.p50);
    match (direct, relay, fwd) {
        (Some(d), Some(r), Some(f)) => {
            let (ar, af) = (r - d, f - d);
            (Some(ar), Some(af), (af > 0.0).then(|| ar / af))
        }
        _ => (None, None, None),
    }
}

/// The added-latency ratio of each repetition (relay over forwarder, both over the direct path
/// of the same repetition): the spread one run's median sits in. Empty when a leg is missing
/// from a repetition, so the legs cannot be paired.
pub fn added_latency_per_rep(rl: &RelaySection) -> Vec<f64> {
    let n = rl.direct_lat.len();
    if rl.relay_lat.len() != n || rl.forwarder_lat.len() != n {
        return Vec::new();
    }
    (0..n)
        .filter_map(|i| {
            let direct = rl.direct_lat[i].latency_us.p50;
            let relay = rl.relay_lat[i].latency_us.p50 - direct;
            let fwd = rl.forwarder_lat[i].latency_us.p50 - direct;
            (fwd > 0.0).then(|| relay / fwd)
        })
        .collect()
}

/// Rows of the Targets table: throughput against the ceiling, added latency against the
/// forwarder's.
pub fn targets(md: &mut String, rl: &RelaySection) {
    let (relay_ppc, fwd_ppc, relay_ratio) = relay_ratios(rl);
    let _ = writeln!(
        md,
        "| relay ≥ 0.9 × ceiling (pps per core vs the bare batched forwarder) | {} × ({} vs {} pps per core) | {} |",
        num(relay_ratio, 2),
        thousands(relay_ppc),
        thousands(fwd_ppc),
        at_least(relay_ratio, 0.9)
    );
    let (added_ratio, cell) = added_latency_cell(rl);
    let _ = writeln!(
        md,
        "| relay added one-way latency p50 ≤ 1.2 × the forwarder's (at {} pps) | {cell} | {} |",
        thousands(Some(rl.latency_rate)),
        at_most(added_ratio, 1.2, "×")
    );
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

/// The "Relay throughput" section: the flat-out table and the latency table.
pub fn section(md: &mut String, rl: &RelaySection) {
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

/// Why the relay missed its targets, if it did; true when it wrote a note.
pub fn why(md: &mut String, rl: &RelaySection) -> bool {
    let mut any = false;
    let (_, _, ratio) = relay_ratios(rl);
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
    let added = added_latency_ratio(rl);
    if added.is_some_and(|x| x > 1.2) {
        any = true;
        let _ = writeln!(
            md,
            "- **Relay added latency** at {:.2} × the forwarder's: both are a few tens of µs on loopback. The relay does about \
             0.5 µs more per packet than the forwarder (the relay-framing check, the flow lookup, the header it writes, the copy \
             into the send batch), and a packet waits for that on every packet ahead of it in its batch; one repetition's ratio \
             spreads 0.9-1.5 × on the shared 2-core machine with the relay unchanged (docs/SESSION_COST.md).",
            added.unwrap_or(0.0)
        );
    }
    any
}
