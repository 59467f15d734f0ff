//! Soak: sessions created and ended continuously through the relay for the plan's duration
//! (quick: 2 minutes, full: 10), with backends attaching and dying, then the state of both
//! servers compared with its baseline: RSS, reserved registry slots, relay flows and open
//! file descriptors. A leak of any of them shows as a figure that does not come back.
//!
//! "1,000 sessions" on a 2-core machine is read as session *lifecycles*: waves of
//! `soak_wave` concurrent sessions (offer, ICE/DTLS through the relay, audio both ways,
//! DELETE), one after the other, at least 1,000 over the quick run. Each wave has two
//! backends: one the session load attaches and drops when the wave ends, and one attached
//! before the wave and killed halfway through it (its sessions are re-dispatched or lose
//! their owner), so backends attach and die all the time.
//!
//! The baseline is taken after one warm-up wave has come and gone (allocator pools and
//! thread stacks are then in place), once the relay's flows have idled out. The smoke
//! profile, which only keeps this code alive, skips the warm-up.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::backend::{Backend, Behaviour};
use crate::proc_stat;
use crate::prom_hist;
use crate::report::cells::{num, thousands};
use crate::session_load;
use crate::suite::args::Profile;
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::{Transceiver, TransceiverOpts};

/// Seconds an established relay flow lives without traffic in the soak: short, so the flows
/// of the last wave are gone soon after it (the default is 30 s).
const RELAY_IDLE_SECS: u64 = 6;
/// How long the servers get to come back to their baseline after the last wave.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(40);
/// The transceiver gauge of reserved registry slots, and the one to fall back to.
const RESERVED: &str = "voxgate_sessions_reserved";
const ACTIVE: &str = "voxgate_sessions_active";
const RELAY_FLOWS: &str = "voxgate_relay_flows_active";

/// What one process looks like at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcState {
    pub rss_kib: u64,
    pub fds: u64,
}

/// Both servers at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub transceiver: ProcState,
    pub relay: ProcState,
    /// Registry slots held (see [`SoakResult::reserved_metric`]).
    pub reserved: Option<f64>,
    pub relay_flows: Option<f64>,
}

/// The soak's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakResult {
    pub secs: f64,
    pub wave: usize,
    pub waves: usize,
    /// Sessions signaled / connected over the soak (warm-up wave excluded).
    pub sessions: usize,
    pub connected: usize,
    pub failed: usize,
    pub backends_attached: usize,
    pub backends_killed: usize,
    /// The transceiver metric read for reserved slots: `voxgate_sessions_reserved`, or
    /// `voxgate_sessions_active` where the transceiver does not have it.
    pub reserved_metric: String,
    /// The baseline was taken after a warm-up wave (not in the smoke profile).
    pub warmed_up: bool,
    pub baseline: Snapshot,
    pub end: Snapshot,
    /// Seconds after the last wave until flows and slots were back (None: not within the
    /// drain timeout).
    pub drained_after_secs: Option<f64>,
}

/// Runs the soak once (nothing when the plan has none).
pub fn run<R: Ledger>(s: &mut Runner<R>, slot: fn(&mut R) -> &mut Option<SoakResult>) {
    if s.plan.soak_secs <= 0.0 {
        return;
    }
    s.say(&format!(
        "soak: waves of {} sessions through the relay for {:.0} s, backends attaching and dying",
        s.plan.soak_wave, s.plan.soak_secs
    ));
    match soak(s) {
        Ok(r) => *slot(&mut s.results) = Some(r),
        Err(e) => s.record_error("soak", e),
    }
}

fn soak<R: Ledger>(s: &mut Runner<R>) -> anyhow::Result<SoakResult> {
    let key = hex::encode(rand::random::<[u8; 32]>());
    let idle = RELAY_IDLE_SECS.to_string();
    let relay = s.start_relay_with(&key, &["--idle-timeout-secs", &idle])?;
    let o = TransceiverOpts {
        relay: Some((relay.public, &key)),
        ..TransceiverOpts::default()
    };
    let t = s.start_transceiver("soak", &o)?;
    let http = prom_hist::client().context("http client")?;
    let probe = Probe {
        http: &http,
        transceiver: &t,
        relay_pid: relay.proc.pid(),
        relay_metrics: format!("http://{}/metrics", relay.metrics),
    };
    let reserved_metric = probe.reserved_metric();

    let wave = s.plan.soak_wave;
    let mut r = SoakResult {
        wave,
        reserved_metric: reserved_metric.to_string(),
        ..SoakResult::default()
    };
    // Warm-up, then the baseline once it has drained.
    r.warmed_up = s.args.profile != Profile::Smoke;
    if r.warmed_up {
        one_wave(s, &t, wave, &mut SoakResult::default())?;
        let idle_state = Snapshot {
            reserved: Some(0.0),
            relay_flows: Some(0.0),
            ..Snapshot::default()
        };
        probe.drained(&idle_state, reserved_metric, DRAIN_TIMEOUT);
    }
    r.baseline = probe.snapshot(reserved_metric);

    let started = Instant::now();
    let budget = Duration::from_secs_f64(s.plan.soak_secs);
    while started.elapsed() < budget {
        one_wave(s, &t, wave, &mut r)?;
        r.waves += 1;
    }
    r.secs = started.elapsed().as_secs_f64();
    let ended = Instant::now();
    if probe.drained(&r.baseline, reserved_metric, DRAIN_TIMEOUT) {
        r.drained_after_secs = Some(ended.elapsed().as_secs_f64());
    }
    r.end = probe.snapshot(reserved_metric);
    s.say(&format!(
        "soak: {} sessions in {} waves, {} connected; flows {:?} -> {:?}, reserved {:?} -> {:?}",
        r.sessions,
        r.waves,
        r.connected,
        r.baseline.relay_flows,
        r.end.relay_flows,
        r.baseline.reserved,
        r.end.reserved
    ));
    drop(t);
    drop(relay);
    Ok(r)
}

/// One wave: a doomed backend attaches, the session load (with its own backend) runs
/// `n` sessions through the relay and tears them down, the doomed backend dies halfway.
fn one_wave<R: Ledger>(
    s: &mut Runner<R>,
    t: &Transceiver,
    n: usize,
    r: &mut SoakResult,
) -> anyhow::Result<()> {
    let mut cfg = s.load_config(t, n, (n as f64 * 2.0).max(10.0));
    cfg.hold = Duration::from_secs_f64(s.plan.hold_secs.min(2.0));
    cfg.teardown = true;
    cfg.progress = false;
    cfg.uplink_loss = 0.0;
    let mut steady = s.backend(t, n, AudioMode::Pcm, Behaviour::Echo);
    steady.worker_id = format!("soak-steady-{:08x}", rand::random::<u32>());
    cfg.backend = Some(steady);
    let mut doomed_cfg = s.backend(t, n, AudioMode::Pcm, Behaviour::Echo);
    doomed_cfg.worker_id = format!("soak-doomed-{:08x}", rand::random::<u32>());
    let doomed = Backend::start(doomed_cfg).context("attaching the doomed backend")?;
    // Halfway through the wave: after the ramp, while sessions carry audio.
    let kill_after = Duration::from_secs_f64(n as f64 / cfg.rate + cfg.hold.as_secs_f64() / 2.0);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(kill_after);
        drop(doomed);
    });
    let load = session_load::run(&cfg);
    let _ = killer.join();
    let load = load?;
    r.backends_attached += 2;
    r.backends_killed += 1;
    r.sessions += load.sessions_signaled;
    r.connected += load.sessions_connected_window_start;
    r.failed += load.sessions_failed;
    Ok(())
}

/// Reads both servers' state.
struct Probe<'a> {
    http: &'a reqwest::blocking::Client,
    transceiver: &'a Transceiver,
    relay_pid: u32,
    relay_metrics: String,
}

impl Probe<'_> {
    fn metric(&self, url: &str, name: &str) -> Option<f64> {
        let text = self.http.get(url).send().ok()?.text().ok()?;
        prom_hist::sum(&text, name)
    }

    fn transceiver_metrics(&self) -> String {
        format!("{}/metrics", self.transceiver.signal)
    }

    /// `voxgate_sessions_reserved` if the transceiver exports it, else the active sessions.
    fn reserved_metric(&self) -> &'static str {
        match self.metric(&self.transceiver_metrics(), RESERVED) {
            Some(_) => RESERVED,
            None => ACTIVE,
        }
    }

    fn snapshot(&self, reserved_metric: &str) -> Snapshot {
        let pid = self.transceiver.proc.pid();
        Snapshot {
            transceiver: proc_state(pid),
            relay: proc_state(self.relay_pid),
            reserved: self.metric(&self.transceiver_metrics(), reserved_metric),
            relay_flows: self.metric(&self.relay_metrics, RELAY_FLOWS),
        }
    }

    /// Waits until reserved slots and relay flows are down to `target`'s; whether they were.
    fn drained(&self, target: &Snapshot, reserved_metric: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.snapshot(reserved_metric);
            let at_most = |v: Option<f64>, t: Option<f64>| match (v, t) {
                (Some(v), Some(t)) => v <= t,
                _ => false,
            };
            if at_most(now.reserved, target.reserved)
                && at_most(now.relay_flows, target.relay_flows)
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn proc_state(pid: u32) -> ProcState {
    ProcState {
        rss_kib: proc_stat::rss_kib(pid).unwrap_or(0),
        fds: proc_stat::open_fds(pid).unwrap_or(0),
    }
}

/// The "Reliability" section.
pub fn section(md: &mut String, soak: Option<&SoakResult>) {
    let _ = writeln!(md, "## Reliability\n");
    let Some(r) = soak else {
        let _ = writeln!(md, "Not measured in this profile.\n");
        return;
    };
    let _ = writeln!(
        md,
        "Soak: waves of {} concurrent sessions created and ended through the relay for {:.0} s ({} waves, {} sessions \
         signaled, {} connected, {} failed), each wave with a backend that stays and one killed halfway ({} attached, \
         {} killed). Baseline {}; end after the last wave, once flows and slots came back{}. Reserved slots read \
         from `{}`.\n",
        r.wave,
        r.secs,
        r.waves,
        thousands(Some(r.sessions as f64)),
        thousands(Some(r.connected as f64)),
        r.failed,
        r.backends_attached,
        r.backends_killed,
        if r.warmed_up {
            "after a warm-up wave"
        } else {
            "before the first session (no warm-up: RSS growth includes first-use allocations)"
        },
        match r.drained_after_secs {
            Some(s) => format!(" ({s:.1} s after the last wave)"),
            None => format!(" (**not** within {} s)", DRAIN_TIMEOUT.as_secs()),
        },
        r.reserved_metric,
    );
    let _ = writeln!(
        md,
        "| figure | baseline | end | change | back to baseline |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    type Pick = fn(&Snapshot) -> Option<f64>;
    // (figure, how to read it, whether it must come back exactly)
    let rows: [(&str, Pick, bool); 6] = [
        (
            "transceiver RSS KiB",
            |x| Some(x.transceiver.rss_kib as f64),
            false,
        ),
        ("relay RSS KiB", |x| Some(x.relay.rss_kib as f64), false),
        ("reserved slots", |x| x.reserved, true),
        ("relay flows", |x| x.relay_flows, true),
        (
            "transceiver open fds",
            |x| Some(x.transceiver.fds as f64),
            true,
        ),
        ("relay open fds", |x| Some(x.relay.fds as f64), true),
    ];
    for (name, pick, exact) in rows {
        let before = pick(&r.baseline).unwrap_or(f64::NAN);
        let after = pick(&r.end).unwrap_or(f64::NAN);
        let change = after - before;
        let verdict = if !before.is_finite() || !after.is_finite() {
            "–".to_string()
        } else if exact {
            if change <= 0.0 { "yes" } else { "**no**" }.to_string()
        } else {
            // RSS: the allocator keeps some pages; growth under 10 % of the baseline is noise.
            let pct = 100.0 * change / before.max(1.0);
            if pct <= 10.0 {
                format!("yes ({pct:+.1} %)")
            } else {
                format!("**no** ({pct:+.1} %)")
            }
        };
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {verdict} |",
            thousands(Some(before).filter(|v| v.is_finite())),
            thousands(Some(after).filter(|v| v.is_finite())),
            num(Some(change).filter(|v| v.is_finite()), 0),
        );
    }
    let _ = writeln!(md);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(rss_kib: u64, fds: u64) -> ProcState {
        ProcState { rss_kib, fds }
    }

    #[test]
    fn section_says_which_figures_came_back_to_their_baseline() {
        let r = SoakResult {
            secs: 120.0,
            wave: 50,
            waves: 24,
            sessions: 1200,
            connected: 1199,
            reserved_metric: ACTIVE.into(),
            baseline: Snapshot {
                transceiver: state(50_000, 40),
                relay: state(10_000, 12),
                reserved: Some(0.0),
                relay_flows: Some(0.0),
            },
            end: Snapshot {
                transceiver: state(51_000, 40),
                relay: state(20_000, 13),
                reserved: Some(0.0),
                relay_flows: Some(3.0),
            },
            drained_after_secs: None,
            ..SoakResult::default()
        };
        let mut md = String::new();
        section(&mut md, Some(&r));
        let row = |name: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {name} |")))
                .unwrap_or_else(|| panic!("no row {name} in\n{md}"))
                .to_string()
        };
        assert!(
            row("transceiver RSS KiB").ends_with("| yes (+2.0 %) |"),
            "{md}"
        );
        assert!(
            row("relay RSS KiB").ends_with("| **no** (+100.0 %) |"),
            "{md}"
        );
        assert!(row("reserved slots").ends_with("| yes |"), "{md}");
        assert!(row("relay flows").ends_with("| **no** |"), "{md}");
        assert!(row("transceiver open fds").ends_with("| yes |"), "{md}");
        assert!(row("relay open fds").ends_with("| **no** |"), "{md}");
        assert!(md.contains("1,200 sessions"), "{md}");
        assert!(md.contains("**not** within 40 s"), "{md}");
        assert!(md.contains("`voxgate_sessions_active`"), "{md}");
    }
}
