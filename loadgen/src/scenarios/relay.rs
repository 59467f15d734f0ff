//! Relay throughput and one-way latency: the voxgate relay against the bare batched
//! forwarder (its ceiling), coturn and the direct path, with RTP-shaped UDP flows
//! ([`crate::relay_load`]).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::relay_load::{FlowResult, FlowTarget};
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
        flat_out(s, section, &key, &loadgen);
    }
    let max: Vec<f64> = section(&mut s.results)
        .relay_max
        .iter()
        .map(|r| r.rx_pps)
        .collect();
    let rate = (median(&max).unwrap_or(10_000.0) * 0.5).clamp(1_000.0, 200_000.0);
    section(&mut s.results).latency_rate = rate;
    for rep in 0..s.plan.reps {
        s.say(&format!(
            "relay: one-way latency at {rate:.0} pps (half the relay's maximum) (rep {})",
            rep + 1
        ));
        latency(s, section, &key, &loadgen, rate);
    }
}

/// One repetition of the flat-out runs: relay, forwarder, coturn.
fn flat_out<R: Ledger>(
    s: &mut Runner<R>,
    section: fn(&mut R) -> &mut RelaySection,
    key: &str,
    loadgen: &std::path::Path,
) {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let r = (|| {
        let (relay, public) = s.start_relay(key)?;
        s.flows(
            FlowTarget::Relay,
            Some(public),
            SocketAddr::new(ip, 0),
            0.0,
            Some(relay.pid()),
            Some(key),
        )
    })();
    match r {
        Ok(r) => section(&mut s.results).relay_max.push(r),
        Err(e) => {
            section(&mut s.results).skipped = Some(format!("{e:#}"));
            s.record_error("relay max", e);
        }
    }
    let r = (|| {
        let (fwd, listen, sink) = s.start_forwarder(loadgen)?;
        let r = s.flows(
            FlowTarget::Forwarder,
            Some(listen),
            sink,
            0.0,
            Some(fwd.pid()),
            None,
        );
        drop(fwd);
        r
    })();
    match r {
        Ok(r) => section(&mut s.results).forwarder_max.push(r),
        Err(e) => s.record_error("forwarder max", e),
    }
    if s.args.profile != Profile::Smoke {
        let r = (|| {
            let (turn, listen) = s.start_coturn()?;
            s.flows(
                FlowTarget::Coturn,
                Some(listen),
                SocketAddr::new(ip, 0),
                0.0,
                Some(turn.pid()),
                None,
            )
        })();
        match r {
            Ok(r) => section(&mut s.results).coturn_max.push(r),
            Err(e) => {
                section(&mut s.results).coturn_skipped = Some(format!("{e:#}"));
                s.record_error("coturn max", e);
            }
        }
    }
}

/// One repetition of the latency runs at `rate`: direct and forwarder (the baselines, when
/// the plan has them), relay, coturn.
fn latency<R: Ledger>(
    s: &mut Runner<R>,
    section: fn(&mut R) -> &mut RelaySection,
    key: &str,
    loadgen: &std::path::Path,
    rate: f64,
) {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if s.plan.relay_latency_baselines {
        match s.flows(
            FlowTarget::Direct,
            None,
            SocketAddr::new(ip, 0),
            rate,
            None,
            None,
        ) {
            Ok(r) => section(&mut s.results).direct_lat.push(r),
            Err(e) => s.record_error("direct latency", e),
        }
        let r = (|| {
            let (fwd, listen, sink) = s.start_forwarder(loadgen)?;
            s.flows(
                FlowTarget::Forwarder,
                Some(listen),
                sink,
                rate,
                Some(fwd.pid()),
                None,
            )
        })();
        match r {
            Ok(r) => section(&mut s.results).forwarder_lat.push(r),
            Err(e) => s.record_error("forwarder latency", e),
        }
    }
    let r = (|| {
        let (relay, public) = s.start_relay(key)?;
        s.flows(
            FlowTarget::Relay,
            Some(public),
            SocketAddr::new(ip, 0),
            rate,
            Some(relay.pid()),
            Some(key),
        )
    })();
    match r {
        Ok(r) => section(&mut s.results).relay_lat.push(r),
        Err(e) => s.record_error("relay latency", e),
    }
    if s.args.profile != Profile::Smoke {
        let r = (|| {
            let (turn, listen) = s.start_coturn()?;
            s.flows(
                FlowTarget::Coturn,
                Some(listen),
                SocketAddr::new(ip, 0),
                rate,
                Some(turn.pid()),
                None,
            )
        })();
        match r {
            Ok(r) => section(&mut s.results).coturn_lat.push(r),
            Err(e) => s.record_error("coturn latency", e),
        }
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

/// Added one-way latency p50 of the relay and of the forwarder over the direct path.
fn added_latency(rl: &RelaySection) -> (Option<f64>, Option<f64>, Option<f64>) {
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
    let (added_relay, added_fwd, added_ratio) = added_latency(rl);
    let _ = writeln!(
        md,
        "| relay added one-way latency p50 ≤ 1.2 × the forwarder's (at {} pps) | {} × ({} µs vs {} µs) | {} |",
        thousands(Some(rl.latency_rate)),
        num(added_ratio, 2),
        num(added_relay, 1),
        num(added_fwd, 1),
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
    let (_, _, added) = added_latency(rl);
    if added.is_some_and(|x| x > 1.2) {
        any = true;
        let _ = writeln!(
            md,
            "- **Relay added latency** at {:.2} × the forwarder's: both are a few tens of µs on loopback; the difference is \
             within the batching and wake-up behaviour of the two loops and the noise of a shared 2-core machine.",
            added.unwrap_or(0.0)
        );
    }
    any
}
