//! `perf` profiles of a server during a run's measurement window, kept as the top lines of
//! `perf report` for the report's "why" notes.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::session_load::LoadConfig;

/// A `perf` profile of a server during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerProfile {
    pub scenario: String,
    pub top: Vec<String>,
}

/// Records a `perf` profile of `pid` during the measurement window of a run that starts
/// now (its ramp and settle are estimated from the config), for at most `perf_secs`, its
/// data in `work_dir`.
pub fn record_during(
    work_dir: &Path,
    perf_secs: f64,
    scenario: &str,
    pid: u32,
    cfg: &LoadConfig,
) -> std::thread::JoinHandle<Option<ServerProfile>> {
    let delay = Duration::from_secs_f64(cfg.sessions as f64 / cfg.rate + 3.0);
    let secs = perf_secs.min(cfg.hold.as_secs_f64());
    let data = work_dir.join(format!("perf-{pid}.data"));
    let scenario = scenario.to_string();
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let rec = Command::new("perf")
            .args(["record", "-q", "-F", "499", "-p", &pid.to_string(), "-o"])
            .arg(&data)
            .args(["--", "sleep", &format!("{secs}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !rec.success() {
            return None;
        }
        let out = Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--sort",
                "dso,symbol",
                "-i",
            ])
            .arg(&data)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let top: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains('%'))
            .take(20)
            .map(tidy_perf_line)
            .collect();
        let _ = fs::remove_file(&data);
        (!top.is_empty()).then_some(ServerProfile { scenario, top })
    })
}

/// `  12.02%  [kernel.kallsyms]  [k] finish_task_switch   -   -` → `12.02%  [kernel.kallsyms]  finish_task_switch`.
fn tidy_perf_line(line: &str) -> String {
    line.split_whitespace()
        .filter(|w| *w != "-" && *w != "[.]" && *w != "[k]")
        .collect::<Vec<_>>()
        .join("  ")
}
