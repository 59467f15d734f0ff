//! ICE over TCP through the relay against UDP through the same relay binary, measured in the
//! same run at the same offered rate: the relay's CPU per forwarded packet (OS accounting)
//! and its ratio, and per-flow setup (connect + the first STUN round trip for TCP, the
//! first STUN round trip for UDP). Flows carry RTP-sized payloads client → relay → sink; the
//! TCP flows send them as RFC 4571 frames over one connection each ([`crate::relay_load`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::relay_load::{FlowResult, FlowTarget};
use crate::report::cells::{med, num, thousands};
use crate::suite::loads::FLOW_SIZE;
use crate::suite::runner::{Ledger, Runner};

/// Offered datagrams (frames) per second over all flows: a rate both transports carry
/// without loss on the 2-core machine, so CPU per packet compares like with like.
pub const RATE: f64 = 20_000.0;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayTcpSection {
    pub skipped: Option<String>,
    pub flows: usize,
    pub size: usize,
    pub rate: f64,
    pub udp: Vec<FlowResult>,
    pub tcp: Vec<FlowResult>,
}

/// Per repetition: UDP flows through a fresh relay, then TCP flows through another.
pub fn run<R: Ledger>(s: &mut Runner<R>, section: fn(&mut R) -> &mut RelayTcpSection) {
    let key = hex::encode(rand::random::<[u8; 32]>());
    let sec = section(&mut s.results);
    sec.flows = s.plan.relay_flows;
    sec.size = FLOW_SIZE;
    sec.rate = RATE;
    let anywhere = "127.0.0.1:0".parse().expect("literal address");
    for rep in 0..s.plan.reps {
        s.say(&format!(
            "relay over TCP vs UDP at {RATE:.0} pps (rep {})",
            rep + 1
        ));
        for target in [FlowTarget::Relay, FlowTarget::RelayTcp] {
            let r = (|| {
                // Every flow comes from 127.0.0.1: lift the per-IP connection cap (64 by
                // default, for callers behind one NAT) above the flow count.
                let per_ip = (2 * s.plan.relay_flows).max(64).to_string();
                let relay = s.start_relay_with(&key, &["--tcp-max-per-ip", &per_ip])?;
                let (relay, public) = (relay.proc, relay.public);
                // The TCP listener shares the UDP public address by default.
                let r = s.flows(
                    target,
                    Some(public),
                    anywhere,
                    RATE,
                    Some(relay.pid()),
                    Some(&key),
                );
                drop(relay);
                r
            })();
            match r {
                Ok(r) => {
                    let sec = section(&mut s.results);
                    match target {
                        FlowTarget::RelayTcp => sec.tcp.push(r),
                        _ => sec.udp.push(r),
                    }
                }
                Err(e) => {
                    section(&mut s.results).skipped = Some(format!("{e:#}"));
                    s.record_error("relay over TCP", e);
                    return;
                }
            }
        }
    }
}

/// TCP's relay CPU per packet over UDP's.
pub fn cpu_ratio(sec: &RelayTcpSection) -> Option<f64> {
    let udp = med(&sec.udp, |f| f.us_per_packet)?;
    let tcp = med(&sec.tcp, |f| f.us_per_packet)?;
    (udp > 0.0).then(|| tcp / udp)
}

fn row(md: &mut String, name: &str, runs: &[FlowResult]) {
    if runs.is_empty() {
        let _ = writeln!(md, "| {name} | – | – | – | – | – | – |");
        return;
    }
    let _ = writeln!(
        md,
        "| {name} | {} | {} | {} | {} | {} | {} |",
        thousands(med(runs, |f| f.rx_pps)),
        num(
            med(runs, |f| 100.0 * f.lost as f64 / f.sent.max(1) as f64),
            2
        ),
        num(med(runs, |f| f.server_cores), 2),
        num(med(runs, |f| f.us_per_packet), 2),
        num(med(runs, |f| f.setup_ms.p50), 2),
        num(med(runs, |f| f.setup_ms.p90), 2),
    );
}

/// The "Relay over TCP" section.
pub fn section(md: &mut String, sec: &RelayTcpSection) {
    let _ = writeln!(md, "## Relay over TCP (ICE-TCP)\n");
    if let Some(s) = &sec.skipped {
        let _ = writeln!(md, "Not measured: {s}\n");
    } else if sec.udp.is_empty() && sec.tcp.is_empty() {
        let _ = writeln!(md, "Not measured in this run.\n");
        return;
    }
    let _ = writeln!(
        md,
        "{} flows of {}-byte RTP-shaped packets at {} pps in all, through the voxgate relay (`--workers 1`, pinned to \
         core 0) to a sink: once as UDP datagrams to the public port, once as RFC 4571 frames over one TCP connection per \
         flow to the same port (the relay's TCP thread forwards each frame as one datagram with a version 2 header). \
         *Relay CPU µs per packet* = CPU-seconds the kernel charged the relay process / packets delivered. *Setup* = per \
         flow, the first STUN check's round trip through the relay to the sink and back (for TCP, the connect included).\n",
        sec.flows,
        sec.size,
        thousands(Some(sec.rate))
    );
    let _ = writeln!(
        md,
        "| transport | delivered pps | lost % | relay cores | relay CPU µs per packet | setup p50 ms | setup p90 ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    row(md, "UDP", &sec.udp);
    row(md, "TCP (RFC 4571)", &sec.tcp);
    let _ = writeln!(
        md,
        "\nRelay CPU per packet, TCP / UDP: **{} ×**.\n",
        num(cpu_ratio(sec), 2)
    );
}
