//! The machine a run was measured on, and the commit it measured, as the report prints them.

use std::fs;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::suite::cpu_split::online_cores;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub mem_gib: f64,
    pub kernel: String,
    pub os: String,
    /// 1-minute load average when the suite started (other work on the machine).
    pub load_at_start: f64,
}

/// The output of a git command in the current folder, if it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The machine as `/proc` and `/etc/os-release` describe it.
pub fn machine() -> Machine {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_default();
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = crate::proc_stat::parse_status_kib(&meminfo, "MemTotal:").unwrap_or(0);
    let os = fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default();
    let load = fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0);
    Machine {
        cpu_model,
        cores: online_cores(),
        mem_gib: mem_kib as f64 / 1024.0 / 1024.0,
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        os,
        load_at_start: load,
    }
}

/// The commit under test, marked when the work tree has uncommitted changes.
pub fn commit() -> String {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit} (with uncommitted changes)")
    } else {
        commit
    }
}
