//! Setup latency: sessions arriving as a Poisson process at each planned rate, a listening
//! PCM backend attaching each; signaling POST → answer, ICE, DTLS and the first PCM frame.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::backend::Behaviour;
use crate::report::cells::{at_most, med, num};
use crate::session_load::{self, LoadResult};
use crate::suite::cpu_split::CpuSplit;
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupPoint {
    pub rate: f64,
    pub sessions: usize,
    pub runs: Vec<LoadResult>,
}

/// One point per planned (rate, sessions), a fresh transceiver per repetition.
pub fn run<R: Ledger>(s: &mut Runner<R>, points: fn(&mut R) -> &mut Vec<SetupPoint>) {
    for &(rate, n) in &s.plan.setup_rates.clone() {
        let what = format!("setup latency: {n} sessions at {rate}/s");
        let runs = s.repeat(&what, &format!("setup {rate}/s"), |s, _| {
            let t = s.start_transceiver(&format!("setup-{rate}"), &TransceiverOpts::default())?;
            let mut cfg = s.load_config(&t, n, rate);
            cfg.hold = Duration::from_secs(2);
            cfg.backend = Some(s.backend(&t, n, AudioMode::Pcm, Behaviour::Listen));
            cfg.metrics_url = Some(format!("{}/metrics", t.signal));
            session_load::run(&cfg)
        });
        let point = SetupPoint {
            rate,
            sessions: n,
            runs,
        };
        points(&mut s.results).push(point);
    }
}

// ---- report --------------------------------------------------------------------------------

/// Rows of the Targets table: DTLS connected p50 and p99 at each rate.
pub fn targets(md: &mut String, setup: &[SetupPoint]) {
    for s in setup {
        let p50 = med(&s.runs, |x| x.setup.dtls_connected.p50);
        let p99 = med(&s.runs, |x| x.setup.dtls_connected.p99);
        for (name, measured, limit) in [("p50", p50, 10.0), ("p99", p99, 30.0)] {
            let _ = writeln!(
                md,
                "| setup (POST → DTLS connected) {name} ≤ {limit} ms at {}/s | {} ms | {} |",
                s.rate,
                num(measured, 2),
                at_most(measured, limit, "ms")
            );
        }
    }
}

/// The "Setup latency" section.
pub fn section(md: &mut String, setup: &[SetupPoint]) {
    let _ = writeln!(md, "## Setup latency\n");
    let _ = writeln!(
        md,
        "From the start of the signaling POST (after the client built its offer) to: the `201` answer, ICE connected, DTLS \
         connected (client side, testkit timings), and the first uplink PCM frame received by the backend (the backend's \
         receive time, same process clock). Sessions arrive as a Poisson process; a listening PCM backend attaches each one. \
         \"Server answer\" is the transceiver's own time from the validated offer to the answer \
         (`voxgate_offer_seconds{{stage=\"answer\"}}`, bucket estimates): the rest of POST → answer is the client's and the \
         network's.\n"
    );
    let _ = writeln!(md, "| arrivals | sessions | answer p50 / p99 ms | server answer p50 / p99 ms | ICE p50 / p99 ms | DTLS p50 / p99 ms | first PCM p50 / p99 ms | errors | cores during the ramp: transceiver / load generator |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for s in setup {
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
            "| {}/s | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            s.rate,
            s.sessions,
            pair(&|x| (x.setup.answer.p50, x.setup.answer.p99)),
            server_answer(runs),
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

/// The server's answer time p50 / p99 (ms, medians over the runs that scraped it).
fn server_answer(runs: &[LoadResult]) -> String {
    let measured: Vec<&crate::prom_hist::HandoffLatency> = runs
        .iter()
        .filter_map(|r| r.server_offer_answer.as_ref())
        .collect();
    format!(
        "{} / {}",
        num(med(&measured, |h| h.p50_us / 1000.0), 2),
        num(med(&measured, |h| h.p99_us / 1000.0), 2)
    )
}

/// Why setup was slow at a rate, if it was: where the time went and what else ran on the
/// cores meanwhile (`split` is the run's CPU split, `cores` the machine's). True when it
/// wrote a note.
pub fn why(md: &mut String, setup: &[SetupPoint], split: Option<&CpuSplit>, cores: usize) -> bool {
    let slow: Vec<&SetupPoint> = setup
        .iter()
        .filter(|s| {
            med(&s.runs, |x| x.setup.dtls_connected.p50).is_some_and(|v| v > 10.0)
                || med(&s.runs, |x| x.setup.dtls_connected.p99).is_some_and(|v| v > 30.0)
        })
        .collect();
    let base = setup.iter().min_by(|a, b| a.rate.total_cmp(&b.rate));
    for s in &slow {
        let _ = writeln!(
            md,
            "- **Setup at {}/s**: POST → 201 alone takes p50 {} ms (p50 {} ms at {}/s); ICE adds {} ms and DTLS {} ms more. \
             The answer is produced by the transceiver's control plane (str0m accepts the offer on a tokio worker, \
             then the session is handed to its loop; the table's server answer column is that part), so it queues behind whatever else runs: during this ramp the \
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
            match split {
                Some(c) => format!(" (each on its own cores: {} and {})", c.server, c.generator),
                None => format!(" of the machine's {}", cores),
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
    !slow.is_empty()
}
