//! Memory: connected idle sessions (no audio, no backend) and the transceiver's RSS before
//! the first one and with all of them up.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::cells::{at_most, med, num, thousands};
use crate::report::runs::server;
use crate::session_load::{self, LoadResult};
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

/// The planned number of idle sessions, once per repetition (nothing when the plan has none).
pub fn run<R: Ledger>(s: &mut Runner<R>, runs: fn(&mut R) -> &mut Vec<LoadResult>) {
    let n = s.plan.memory_sessions;
    if n == 0 {
        return;
    }
    let what = format!("memory: {n} connected idle sessions");
    let done = s.repeat(&what, "memory", |s, _| {
        let t = s.start_transceiver("memory", &TransceiverOpts::default())?;
        std::thread::sleep(Duration::from_millis(300));
        let mut cfg = s.load_config(&t, n, s.plan.cost_rate);
        cfg.audio = false;
        cfg.hold = Duration::from_secs(3);
        session_load::run(&cfg)
    });
    runs(&mut s.results).extend(done);
}

/// The Targets row: RSS per connected idle session.
pub fn targets(md: &mut String, runs: &[LoadResult]) {
    if runs.is_empty() {
        return;
    }
    let kib = server(runs, |s| s.rss_per_session_kib);
    let _ = writeln!(
        md,
        "| ≤ 100 KiB RSS per connected idle session at {} sessions | {} KiB | {} |",
        runs[0].sessions_requested,
        num(kib, 1),
        at_most(kib, 100.0, "KiB")
    );
}

/// The "Memory" section.
pub fn section(md: &mut String, runs: &[LoadResult]) {
    let _ = writeln!(md, "## Memory\n");
    if runs.is_empty() {
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
