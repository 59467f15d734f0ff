//! What every scenario runs with: the suite's arguments and plan, the results being
//! collected (saved after each step, so a killed suite leaves what it measured), server
//! commands on the server's cores, log files and seeds.
//!
//! The runner is generic over the results (`R`) so that the scenarios, which each own a part
//! of them, sit below the suite's list of scenarios rather than beside it: a scenario is
//! handed the runner and a function that picks its own part out of `R`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use crate::json_out::write_json;
use crate::suite::args::SuiteArgs;
use crate::suite::cpu_split::CpuSplit;
use crate::suite::plan::Plan;

/// Results a runner can save and record failures in.
pub trait Ledger: Serialize {
    /// Scenarios that failed, with why.
    fn errors(&mut self) -> &mut Vec<String>;
    /// How long the suite has run, as of the last save.
    fn set_duration_secs(&mut self, secs: f64);
}

pub struct Runner<'a, R> {
    pub args: &'a SuiteArgs,
    pub plan: Plan,
    pub results: R,
    /// The cores servers run on (a copy of the one in the results).
    cpu_split: Option<CpuSplit>,
    started: Instant,
    /// Servers started so far: numbers the logs and seeds the loads.
    run_no: usize,
}

impl<'a, R: Ledger> Runner<'a, R> {
    pub fn new(
        args: &'a SuiteArgs,
        plan: Plan,
        results: R,
        cpu_split: Option<CpuSplit>,
        started: Instant,
    ) -> Self {
        Runner {
            args,
            plan,
            results,
            cpu_split,
            started,
            run_no: 0,
        }
    }

    pub fn skip(&self, what: &str) -> bool {
        self.args.skip.iter().any(|s| s == what)
    }

    /// A fresh log file for a server called `name`.
    pub fn log_path(&mut self, name: &str) -> PathBuf {
        self.run_no += 1;
        self.args
            .work_dir
            .join(format!("{:02}-{name}.log", self.run_no))
    }

    /// Servers started so far.
    pub fn run_no(&self) -> usize {
        self.run_no
    }

    /// The seed of the next load: differs from run to run, the same in every suite.
    pub fn seed(&self) -> u64 {
        1000 + self.run_no as u64
    }

    /// Writes what has been measured so far (a killed suite leaves its partial results).
    pub fn save(&mut self) {
        let secs = self.started.elapsed().as_secs_f64();
        self.results.set_duration_secs(secs);
        if let Err(e) = write_json(&self.results, Some(&self.args.out)) {
            self.say(&format!("cannot save results: {e:#}"));
        }
    }

    pub fn say(&self, msg: &str) {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "bench: {msg}");
    }

    /// Runs `one` for each of the plan's repetitions: says `what` with the repetition's number,
    /// keeps the results, records each failure under `scenario`.
    pub fn repeat<T>(
        &mut self,
        what: &str,
        scenario: &str,
        mut one: impl FnMut(&mut Self, usize) -> anyhow::Result<T>,
    ) -> Vec<T> {
        let mut runs = Vec::new();
        for rep in 0..self.plan.reps {
            self.say(&format!("{what} (rep {})", rep + 1));
            match one(self, rep) {
                Ok(r) => runs.push(r),
                Err(e) => self.record_error(scenario, e),
            }
        }
        runs
    }

    pub fn record_error(&mut self, scenario: &str, e: anyhow::Error) {
        let msg = format!("{scenario}: {e:#}");
        self.say(&format!("FAILED {msg}"));
        self.results.errors().push(msg);
    }

    /// A server process's command: on the server's cores (when the suite split them), inside
    /// `netns` when given.
    pub fn server_command(&self, netns: Option<&str>, program: &Path) -> Command {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let Some(split) = &self.cpu_split {
            argv.extend(["taskset".into(), "-c".into(), split.server.clone().into()]);
        }
        if let Some(ns) = netns {
            argv.extend(["ip".into(), "netns".into(), "exec".into(), ns.into()]);
        }
        argv.push(program.as_os_str().to_owned());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }
}
