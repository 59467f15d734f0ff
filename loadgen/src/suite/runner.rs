//! What every scenario runs with: the suite's arguments and plan, the results being
//! collected (saved after each step, so a killed suite leaves what it measured), server
//! commands on the server's cores, log files, and the load shapes the scenarios share.
//!
//! The runner is generic over the results (`R`) so that the scenarios, which each own a part
//! of them, sit below the suite's list of scenarios rather than beside it: a scenario is
//! handed the runner and a function that picks its own part out of `R`.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;
use voxgate_proto::bridge::AudioMode;

use crate::backend::{BackendConfig, Behaviour};
use crate::json_out::write_json;
use crate::relay_load::{self, FlowResult, FlowTarget, FlowsArgs};
use crate::session_load::{LoadConfig, Target};
use crate::suite::args::{Profile, SuiteArgs};
use crate::suite::cpu_split::CpuSplit;
use crate::suite::plan::Plan;
use crate::suite::servers::Transceiver;

/// Results a runner can save and record failures in.
pub trait Ledger: Serialize {
    /// Scenarios that failed, with why.
    fn errors(&mut self) -> &mut Vec<String>;
    /// How long the suite has run, as of the last save.
    fn set_duration_secs(&mut self, secs: f64);
}

/// The datagram size of every flow run, in bytes (an Opus voice packet in SRTP).
pub const FLOW_SIZE: usize = 120;

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

    /// The suite's session load against transceiver `t`: audio on, the plan's window and
    /// uplink loss, no backend (the scenario adds the one it needs).
    pub fn load_config(&self, t: &Transceiver, sessions: usize, rate: f64) -> LoadConfig {
        LoadConfig {
            target: Target::Voxgate {
                url: t.signal.clone(),
                token: None,
            },
            sessions,
            rate,
            hold: Duration::from_secs_f64(self.plan.hold_secs),
            settle: Duration::from_secs_f64(if self.args.profile == Profile::Smoke {
                0.2
            } else {
                1.0
            }),
            connect_timeout: Duration::from_secs(10),
            audio: true,
            data_channel: false,
            uplink_loss: self.plan.uplink_loss,
            seed: self.seed(),
            signaling_threads: 4,
            server_pid: Some(t.proc.pid()),
            backend: None,
            progress: true,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            teardown: false,
            metrics_url: None,
        }
    }

    /// The built-in backend of transceiver `t`, with room for every session.
    pub fn backend(
        &self,
        t: &Transceiver,
        sessions: usize,
        mode: AudioMode,
        behaviour: Behaviour,
    ) -> BackendConfig {
        BackendConfig {
            url: t.grpc.clone(),
            worker_id: format!("bench-{}", self.run_no),
            capacity: (sessions as u32 * 2).max(4),
            mode,
            behaviour,
            sample_rate: 48_000,
        }
    }

    /// The backend's downlink duty cycle: 1 s of audio every 2 s.
    pub fn duty() -> Behaviour {
        Behaviour::Duty {
            on: Duration::from_secs(1),
            period: Duration::from_secs(2),
        }
    }

    /// One flow run of the plan's size through `target`.
    pub fn flows(
        &self,
        target: FlowTarget,
        to: Option<SocketAddr>,
        sink: SocketAddr,
        rate: f64,
        pid: Option<u32>,
        key: Option<&str>,
    ) -> anyhow::Result<FlowResult> {
        relay_load::run(&FlowsArgs {
            target,
            to,
            sink,
            fleet_key: key.map(str::to_string),
            fleet_key_id: 1,
            flows: self.plan.relay_flows,
            rate,
            secs: self.plan.relay_secs,
            size: FLOW_SIZE,
            server_pid: pid,
            cpu: Some(1),
            out: None,
        })
    }
}
