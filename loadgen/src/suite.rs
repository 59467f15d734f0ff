//! The benchmark suite: starts each server process fresh (transceiver, relay, bare forwarder,
//! coturn, Janus) on free loopback ports, runs the load against it in this process, reads
//! what the kernel charged the server, stops it, and collects everything in one
//! [`SuiteResults`] JSON. A scenario that fails is recorded with its error and the suite goes
//! on; nothing measured is ever filled in by hand.
//!
//! Profiles: `smoke` (seconds; exercises every code path that needs no extra package, used by
//! `scripts/test`), `quick` (under 10 minutes on the 2-core box), `full` (repetitions, longer
//! windows, more sessions).

use std::fs;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::backend::{BackendConfig, Behaviour};
use crate::codec_floor::{self, CodecFloor, CodecFloorArgs};
use crate::relay_load::{self, FlowResult, FlowTarget, FlowsArgs};
use crate::session_load::{self, LoadConfig, LoadResult, Target};
use crate::stats::median;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum Profile {
    Smoke,
    Quick,
    Full,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SuiteArgs {
    #[arg(long, value_enum, default_value_t = Profile::Quick)]
    pub profile: Profile,
    /// Where the transceiver and relay binaries are (e.g. target/release).
    #[arg(long)]
    pub bin_dir: PathBuf,
    /// Results JSON to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Folder for server logs and scratch files.
    #[arg(long)]
    pub work_dir: PathBuf,
    /// Media loops of the transceiver under test.
    #[arg(long, default_value_t = 1)]
    pub loops: usize,
    /// Network namespace holding the peer-comparison servers (made by scripts/bench); without
    /// it the Janus comparison is skipped.
    #[arg(long)]
    pub peer_netns: Option<String>,
    /// The host side's address on the veth towards --peer-netns.
    #[arg(long, default_value = "10.254.77.1")]
    pub peer_host_ip: IpAddr,
    /// The namespace side's address.
    #[arg(long, default_value = "10.254.77.2")]
    pub peer_ns_ip: IpAddr,
    /// The namespace side's interface name (Janus gathers ICE candidates only there).
    #[arg(long, default_value = "vxb1")]
    pub peer_ns_if: String,
    /// Criterion's output folder (target/criterion), to include the micro-benchmarks.
    #[arg(long)]
    pub criterion_dir: Option<PathBuf>,
    /// The command line to print in the report.
    #[arg(long, default_value = "scripts/bench")]
    pub command: String,
    /// Scenarios to skip: relay, cost, setup, media, memory, peers, via-relay, perf.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
}

/// The sizes and times of one profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub reps: usize,
    pub cost_sessions: Vec<usize>,
    pub cost_rate: f64,
    pub hold_secs: f64,
    pub setup_rates: Vec<(f64, usize)>,
    pub memory_sessions: usize,
    pub peer_sessions: usize,
    pub via_relay_sessions: usize,
    pub relay_flows: usize,
    pub relay_secs: f64,
    pub codec_frames: usize,
    pub uplink_loss: f64,
    pub perf_secs: f64,
    /// Audio modes of the cost runs.
    pub modes: Vec<String>,
    /// Run the latency comparison of the relay against the direct path and the forwarder.
    pub relay_latency_baselines: bool,
}

impl Plan {
    pub fn of(p: Profile) -> Plan {
        match p {
            Profile::Smoke => Plan {
                reps: 1,
                cost_sessions: vec![4],
                cost_rate: 50.0,
                hold_secs: 1.0,
                setup_rates: vec![],
                memory_sessions: 0,
                peer_sessions: 0,
                via_relay_sessions: 0,
                relay_flows: 20,
                relay_secs: 0.5,
                codec_frames: 200,
                uplink_loss: 0.05,
                perf_secs: 0.0,
                modes: vec!["pcm".into()],
                relay_latency_baselines: false,
            },
            Profile::Quick => Plan {
                reps: 1,
                cost_sessions: vec![100, 250, 500, 1000],
                cost_rate: 100.0,
                hold_secs: 10.0,
                setup_rates: vec![(20.0, 100), (100.0, 200)],
                memory_sessions: 1000,
                peer_sessions: 100,
                via_relay_sessions: 100,
                relay_flows: 200,
                relay_secs: 3.0,
                codec_frames: 3000,
                uplink_loss: 0.0,
                perf_secs: 4.0,
                modes: vec!["pcm".into(), "passthrough".into()],
                relay_latency_baselines: true,
            },
            Profile::Full => Plan {
                reps: 3,
                cost_sessions: vec![100, 250, 500, 750, 1000],
                cost_rate: 100.0,
                hold_secs: 30.0,
                // Within one loop's capacity: setup latency, not saturation (the cost runs
                // measure where capacity ends).
                setup_rates: vec![(20.0, 300), (100.0, 300)],
                memory_sessions: 1000,
                peer_sessions: 200,
                via_relay_sessions: 300,
                relay_flows: 1000,
                relay_secs: 10.0,
                codec_frames: 10000,
                uplink_loss: 0.0,
                perf_secs: 10.0,
                modes: vec!["pcm".into(), "passthrough".into()],
                relay_latency_baselines: true,
            },
        }
    }
}

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

/// One point of the transceiver-cost curve.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CostPoint {
    pub mode: String,
    pub sessions: usize,
    pub runs: Vec<LoadResult>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SetupPoint {
    pub rate: f64,
    pub sessions: usize,
    pub runs: Vec<LoadResult>,
}

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

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeersSection {
    pub skipped: Option<String>,
    pub sessions: usize,
    pub voxgate: Vec<LoadResult>,
    pub janus: Vec<LoadResult>,
    pub janus_version: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MicroBench {
    pub name: String,
    pub mean_ns: f64,
    pub median_ns: f64,
}

/// A `perf` profile of a server during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerProfile {
    pub scenario: String,
    pub top: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SuiteResults {
    pub profile: String,
    pub started_unix: u64,
    pub duration_secs: f64,
    pub machine: Machine,
    pub commit: String,
    pub command: String,
    pub loops: usize,
    pub plan: Option<Plan>,
    pub codec_floor: Option<CodecFloor>,
    pub relay: RelaySection,
    pub cost: Vec<CostPoint>,
    pub setup: Vec<SetupPoint>,
    pub memory: Vec<LoadResult>,
    pub peers: PeersSection,
    pub via_relay: Vec<LoadResult>,
    pub via_relay_skipped: Option<String>,
    pub micro: Vec<MicroBench>,
    pub profiles: Vec<ServerProfile>,
    /// Cores of the server under test and of the load generator (none: not split).
    pub cpu_split: Option<CpuSplit>,
    /// Scenarios that failed, with why.
    pub errors: Vec<String>,
}

// ------------------------------------------------------------------------------------------
// Processes and ports

/// A server process, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Proc {
    child: Child,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Proc> {
        let f = fs::File::create(log).with_context(|| format!("log {}", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({cmd:?})"))?;
        Ok(Proc {
            child,
            name: name.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_tcp_port(ip: IpAddr) -> anyhow::Result<u16> {
    Ok(TcpListener::bind((ip, 0))?.local_addr()?.port())
}

/// A base port P with P..P+n free for UDP on `ip`.
fn free_udp_ports(ip: IpAddr, n: u16) -> anyhow::Result<u16> {
    for _ in 0..100 {
        let first = UdpSocket::bind((ip, 0))?;
        let base = first.local_addr()?.port();
        if base.checked_add(n).is_none() {
            continue;
        }
        let rest: Result<Vec<_>, _> = (1..n).map(|i| UdpSocket::bind((ip, base + i))).collect();
        if rest.is_ok() {
            return Ok(base);
        }
    }
    bail!("no free UDP port range")
}

fn wait_http(url: &str, timeout: Duration) -> anyhow::Result<()> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(1))
        .no_proxy()
        .build()?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if http.get(url).send().is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{url} did not answer within {timeout:?}")
}

fn wait_tcp(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{addr} did not accept within {timeout:?}")
}

/// CPUs online on the machine, whatever this thread's affinity (the suite pins itself).
fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

/// How the machine's cores are split between the server under test and the load generator,
/// so neither steals CPU from the other (the figures are per core of the server).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuSplit {
    /// `taskset -c` list for every server process (transceiver, relay, peers, forwarder).
    pub server: String,
    /// The load generator's own cores (this process and its threads).
    pub generator: String,
}

impl CpuSplit {
    /// `loops` cores for the server, the rest for the generator; `None` when nothing is left.
    fn for_loops(loops: usize) -> Option<CpuSplit> {
        let cores = online_cores();
        if loops == 0 || loops >= cores {
            return None;
        }
        let list = |a: usize, b: usize| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        };
        Some(CpuSplit {
            server: list(0, loops - 1),
            generator: list(loops, cores - 1),
        })
    }

    /// Confines the calling thread, and so every thread it starts later, to the generator's
    /// cores. Servers are started through `taskset` with their own list.
    fn pin_generator(&self, loops: usize) -> anyhow::Result<()> {
        let cores = online_cores();
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it, and
        // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            for c in loops..cores {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if rc != 0 {
            bail!(
                "sched_setaffinity to cores {}: {}",
                self.generator,
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}

struct Transceiver {
    proc: Proc,
    signal: String,
    grpc: String,
}

struct TransceiverOpts<'a> {
    ip: IpAddr,
    netns: Option<&'a str>,
    relay: Option<(SocketAddr, &'a str)>,
}

impl Default for TransceiverOpts<'_> {
    fn default() -> Self {
        TransceiverOpts {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
            relay: None,
        }
    }
}

// ------------------------------------------------------------------------------------------

struct Suite<'a> {
    args: &'a SuiteArgs,
    started: Instant,
    plan: Plan,
    results: SuiteResults,
    run_no: usize,
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn machine() -> Machine {
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

impl Suite<'_> {
    /// A server process's command: on the server's cores (when the suite split them), inside
    /// `netns` when given.
    fn server_command(&self, netns: Option<&str>, program: &Path) -> Command {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let Some(split) = &self.results.cpu_split {
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

    fn skip(&self, what: &str) -> bool {
        self.args.skip.iter().any(|s| s == what)
    }

    fn log_path(&mut self, name: &str) -> PathBuf {
        self.run_no += 1;
        self.args
            .work_dir
            .join(format!("{:02}-{name}.log", self.run_no))
    }

    /// Writes what has been measured so far (a killed suite leaves its partial results).
    fn save(&mut self) {
        self.results.duration_secs = self.started.elapsed().as_secs_f64();
        if let Err(e) = crate::cli::write_json(&self.results, Some(&self.args.out)) {
            self.say(&format!("cannot save results: {e:#}"));
        }
    }

    fn say(&self, msg: &str) {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "bench: {msg}");
    }

    fn record_error(&mut self, scenario: &str, e: anyhow::Error) {
        let msg = format!("{scenario}: {e:#}");
        self.say(&format!("FAILED {msg}"));
        self.results.errors.push(msg);
    }

    fn start_transceiver(
        &mut self,
        name: &str,
        o: &TransceiverOpts,
    ) -> anyhow::Result<Transceiver> {
        let bin = self.args.bin_dir.join("transceiver");
        // Ports are probed on loopback: an address inside a namespace cannot be bound here,
        // and the namespace holds nothing else, so a port free here is free there.
        let probe = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let signal = SocketAddr::new(o.ip, free_tcp_port(probe)?);
        let grpc = SocketAddr::new(o.ip, free_tcp_port(probe)?);
        let media = SocketAddr::new(o.ip, free_udp_ports(probe, self.args.loops as u16)?);
        let mut cmd = self.server_command(o.netns, &bin);
        cmd.arg("--signal-listen")
            .arg(signal.to_string())
            .arg("--media-listen")
            .arg(media.to_string())
            .arg("--grpc-listen")
            .arg(grpc.to_string())
            .arg("--loops")
            .arg(self.args.loops.to_string())
            .args(["--max-sessions", "5000", "--connect-timeout-secs", "30"])
            .args(["--opus-bitrate", "32000", "--opus-complexity", "5"])
            .env("RUST_LOG", "warn");
        if let Some((relay, key)) = o.relay {
            cmd.arg("--advertise")
                .arg(relay.to_string())
                .arg("--fleet-key")
                .arg(key);
        }
        let log = self.log_path(name);
        let proc = Proc::spawn("transceiver", cmd, &log)?;
        let signal_url = format!("http://{signal}");
        wait_http(&format!("{signal_url}/healthz"), Duration::from_secs(15))
            .with_context(|| format!("transceiver did not start (log: {})", log.display()))?;
        wait_tcp(grpc, Duration::from_secs(5))?;
        Ok(Transceiver {
            proc,
            signal: signal_url,
            grpc: format!("http://{grpc}"),
        })
    }

    fn load_config(&self, t: &Transceiver, sessions: usize, rate: f64) -> LoadConfig {
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
            seed: 1000 + self.run_no as u64,
            signaling_threads: 4,
            server_pid: Some(t.proc.pid()),
            backend: None,
            progress: true,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            teardown: false,
            metrics_url: None,
        }
    }

    fn backend(
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

    fn duty() -> Behaviour {
        Behaviour::Duty {
            on: Duration::from_secs(1),
            period: Duration::from_secs(2),
        }
    }

    // ---- codec floor ---------------------------------------------------------------------

    fn codec_floor(&mut self) {
        self.say("codec floor (libopus decode + encode, in process)");
        let a = CodecFloorArgs {
            bitrate: 32_000,
            complexity: 5,
            sample_rate: 48_000,
            duty: 0.5,
            frames: self.plan.codec_frames,
            repeats: if self.args.profile == Profile::Smoke {
                1
            } else {
                5
            },
            out: None,
        };
        match codec_floor::run(&a) {
            Ok(f) => self.results.codec_floor = Some(f),
            Err(e) => self.record_error("codec floor", e),
        }
    }

    // ---- transceiver cost, media latency -------------------------------------------------

    fn cost(&mut self) {
        for (mode_name, mode) in [
            ("pcm", AudioMode::Pcm),
            ("passthrough", AudioMode::OpusPassthrough),
        ] {
            if !self.plan.modes.iter().any(|m| m == mode_name) {
                continue;
            }
            for &n in &self.plan.cost_sessions.clone() {
                let mut point = CostPoint {
                    mode: mode_name.into(),
                    sessions: n,
                    runs: Vec::new(),
                };
                for rep in 0..self.plan.reps {
                    self.say(&format!(
                        "transceiver cost: {mode_name}, {n} sessions, duty cycle 1 s / 2 s (rep {})",
                        rep + 1
                    ));
                    let perf = rep == 0
                        && self.plan.perf_secs > 0.0
                        && !self.skip("perf")
                        && n == *self.plan.cost_sessions.iter().max().unwrap_or(&0);
                    match self.cost_run(&format!("cost-{mode_name}-{n}"), n, mode, perf) {
                        Ok(r) => point.runs.push(r),
                        Err(e) => self.record_error(&format!("cost {mode_name} {n}"), e),
                    }
                }
                self.results.cost.push(point);
                self.save();
            }
        }
    }

    fn cost_run(
        &mut self,
        name: &str,
        n: usize,
        mode: AudioMode,
        perf: bool,
    ) -> anyhow::Result<LoadResult> {
        let t = self.start_transceiver(name, &TransceiverOpts::default())?;
        let mut cfg = self.load_config(&t, n, self.plan.cost_rate);
        cfg.backend = Some(self.backend(&t, n, mode, Self::duty()));
        if mode == AudioMode::Pcm {
            // The in-transceiver hand-off (socket → PCM on the gRPC stream) of the media
            // latency target, from the transceiver's own histogram.
            cfg.metrics_url = Some(format!("{}/metrics", t.signal));
        }
        let profiler = if perf {
            Some(self.perf_during(
                &format!("{name} ({} loops)", self.args.loops),
                t.proc.pid(),
                &cfg,
            ))
        } else {
            None
        };
        let r = session_load::run(&cfg);
        if let Some(p) = profiler {
            match p.join() {
                Ok(Some(prof)) => self.results.profiles.push(prof),
                Ok(None) => {}
                Err(_) => self
                    .results
                    .errors
                    .push(format!("{name}: perf thread panicked")),
            }
        }
        drop(t);
        r
    }

    /// Records a `perf` profile of `pid` during the measurement window of a run that starts
    /// now (its ramp and settle are estimated from the config).
    fn perf_during(
        &self,
        scenario: &str,
        pid: u32,
        cfg: &LoadConfig,
    ) -> std::thread::JoinHandle<Option<ServerProfile>> {
        let delay = Duration::from_secs_f64(cfg.sessions as f64 / cfg.rate + 3.0);
        let secs = self.plan.perf_secs.min(cfg.hold.as_secs_f64());
        let data = self.args.work_dir.join(format!("perf-{pid}.data"));
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

    // ---- setup latency -------------------------------------------------------------------

    fn setup(&mut self) {
        for &(rate, n) in &self.plan.setup_rates.clone() {
            let mut point = SetupPoint {
                rate,
                sessions: n,
                runs: Vec::new(),
            };
            for rep in 0..self.plan.reps {
                self.say(&format!(
                    "setup latency: {n} sessions at {rate}/s (rep {})",
                    rep + 1
                ));
                let r = (|| {
                    let t = self
                        .start_transceiver(&format!("setup-{rate}"), &TransceiverOpts::default())?;
                    let mut cfg = self.load_config(&t, n, rate);
                    cfg.hold = Duration::from_secs(2);
                    cfg.backend = Some(self.backend(&t, n, AudioMode::Pcm, Behaviour::Listen));
                    session_load::run(&cfg)
                })();
                match r {
                    Ok(r) => point.runs.push(r),
                    Err(e) => self.record_error(&format!("setup {rate}/s"), e),
                }
            }
            self.results.setup.push(point);
        }
    }

    // ---- memory --------------------------------------------------------------------------

    fn memory(&mut self) {
        let n = self.plan.memory_sessions;
        if n == 0 {
            return;
        }
        for rep in 0..self.plan.reps {
            self.say(&format!(
                "memory: {n} connected idle sessions (rep {})",
                rep + 1
            ));
            let r = (|| {
                let t = self.start_transceiver("memory", &TransceiverOpts::default())?;
                std::thread::sleep(Duration::from_millis(300));
                let mut cfg = self.load_config(&t, n, self.plan.cost_rate);
                cfg.audio = false;
                cfg.hold = Duration::from_secs(3);
                session_load::run(&cfg)
            })();
            match r {
                Ok(r) => self.results.memory.push(r),
                Err(e) => self.record_error("memory", e),
            }
        }
    }

    // ---- peers: Janus echotest vs voxgate passthrough echo -------------------------------

    fn peers(&mut self) {
        let n = self.plan.peer_sessions;
        self.results.peers.sessions = n;
        if n == 0 {
            return;
        }
        let Some(ns) = self.args.peer_netns.clone() else {
            self.results.peers.skipped = Some(
                "no network namespace for the peer servers (scripts/bench could not create one)"
                    .into(),
            );
            return;
        };
        let janus = match janus_files() {
            Ok(j) => j,
            Err(e) => {
                self.results.peers.skipped = Some(format!("{e:#}"));
                return;
            }
        };
        self.results.peers.janus_version = janus.version.clone();
        for rep in 0..self.plan.reps {
            self.say(&format!(
                "peers: voxgate passthrough echo, {n} sessions (rep {})",
                rep + 1
            ));
            let host = self.args.peer_host_ip;
            let r = (|| {
                let o = TransceiverOpts {
                    ip: self.args.peer_ns_ip,
                    netns: Some(&ns),
                    relay: None,
                };
                let t = self.start_transceiver("peer-voxgate", &o)?;
                let mut cfg = self.load_config(&t, n, 50.0);
                cfg.bind_ip = host;
                cfg.backend =
                    Some(self.backend(&t, n, AudioMode::OpusPassthrough, Behaviour::Echo));
                session_load::run(&cfg)
            })();
            match r {
                Ok(r) => self.results.peers.voxgate.push(r),
                Err(e) => self.record_error("peers voxgate", e),
            }
            self.say(&format!(
                "peers: Janus echotest, {n} sessions (rep {})",
                rep + 1
            ));
            let r = (|| {
                let port = free_tcp_port(self.args.peer_host_ip).unwrap_or(28088);
                let dir = self.args.work_dir.join("janus");
                janus.write_config(&dir, port, self.args.peer_ns_ip, &self.args.peer_ns_if)?;
                let mut cmd = self.server_command(Some(&ns), Path::new(&janus.binary));
                cmd.arg("-F")
                    .arg(&dir)
                    .arg("-C")
                    .arg(dir.join("janus.jcfg"));
                let log = self.log_path("janus");
                let proc = Proc::spawn("janus", cmd, &log)?;
                let api = SocketAddr::new(self.args.peer_ns_ip, port);
                wait_tcp(api, Duration::from_secs(15))
                    .with_context(|| format!("janus did not start (log: {})", log.display()))?;
                let mut cfg = LoadConfig {
                    target: Target::Janus {
                        url: format!("http://{api}/janus"),
                    },
                    server_pid: Some(proc.pid()),
                    bind_ip: host,
                    ..self.load_config_stub(n, 50.0)
                };
                cfg.teardown = true;
                let r = session_load::run(&cfg);
                drop(proc);
                r
            })();
            match r {
                Ok(r) => self.results.peers.janus.push(r),
                Err(e) => self.record_error("peers janus", e),
            }
        }
    }

    fn load_config_stub(&self, sessions: usize, rate: f64) -> LoadConfig {
        LoadConfig {
            target: Target::Voxgate {
                url: String::new(),
                token: None,
            },
            sessions,
            rate,
            hold: Duration::from_secs_f64(self.plan.hold_secs),
            settle: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(15),
            audio: true,
            data_channel: false,
            uplink_loss: 0.0,
            seed: 1000 + self.run_no as u64,
            signaling_threads: 4,
            server_pid: None,
            backend: None,
            progress: true,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            teardown: false,
            metrics_url: None,
        }
    }

    // ---- relay ---------------------------------------------------------------------------

    fn start_relay(&mut self, key: &str) -> anyhow::Result<(Proc, SocketAddr)> {
        let bin = self.args.bin_dir.join("relay");
        if !bin.exists() {
            bail!("no relay binary at {}", bin.display());
        }
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let public = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let internal = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let metrics = SocketAddr::new(ip, free_tcp_port(ip)?);
        let mut cmd = self.server_command(None, &bin);
        cmd.arg("--listen")
            .arg(public.to_string())
            .arg("--internal-listen")
            .arg(internal.to_string())
            .arg("--metrics-listen")
            .arg(metrics.to_string())
            .args(["--workers", "1"])
            .env("VOXGATE_RELAY_FLEET_KEY", key)
            .env("RUST_LOG", "warn");
        let log = self.log_path("relay");
        let p = Proc::spawn("relay", cmd, &log)?;
        wait_tcp(metrics, Duration::from_secs(10))
            .with_context(|| format!("relay did not start (log: {})", log.display()))?;
        Ok((p, public))
    }

    fn flows(
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
            size: 120,
            server_pid: pid,
            cpu: Some(1),
            out: None,
        })
    }

    fn relay(&mut self) {
        let key = hex::encode(rand::random::<[u8; 32]>());
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        self.results.relay.flows = self.plan.relay_flows;
        self.results.relay.size = 120;
        let loadgen = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => {
                self.record_error("relay", e.into());
                return;
            }
        };
        for rep in 0..self.plan.reps {
            self.say(&format!(
                "relay: flat-out throughput, relay vs bare forwarder (rep {})",
                rep + 1
            ));
            let r = (|| {
                let (relay, public) = self.start_relay(&key)?;
                self.flows(
                    FlowTarget::Relay,
                    Some(public),
                    SocketAddr::new(ip, 0),
                    0.0,
                    Some(relay.pid()),
                    Some(&key),
                )
            })();
            match r {
                Ok(r) => self.results.relay.relay_max.push(r),
                Err(e) => {
                    self.results.relay.skipped = Some(format!("{e:#}"));
                    self.record_error("relay max", e);
                }
            }
            let r = (|| {
                let (fwd, listen, sink) = self.start_forwarder(&loadgen)?;
                let r = self.flows(
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
                Ok(r) => self.results.relay.forwarder_max.push(r),
                Err(e) => self.record_error("forwarder max", e),
            }
            if self.args.profile != Profile::Smoke {
                let r = (|| {
                    let (turn, listen) = self.start_coturn()?;
                    self.flows(
                        FlowTarget::Coturn,
                        Some(listen),
                        SocketAddr::new(ip, 0),
                        0.0,
                        Some(turn.pid()),
                        None,
                    )
                })();
                match r {
                    Ok(r) => self.results.relay.coturn_max.push(r),
                    Err(e) => {
                        self.results.relay.coturn_skipped = Some(format!("{e:#}"));
                        self.record_error("coturn max", e);
                    }
                }
            }
        }
        let max: Vec<f64> = self
            .results
            .relay
            .relay_max
            .iter()
            .map(|r| r.rx_pps)
            .collect();
        let rate = (median(&max).unwrap_or(10_000.0) * 0.5).clamp(1_000.0, 200_000.0);
        self.results.relay.latency_rate = rate;
        for rep in 0..self.plan.reps {
            self.say(&format!(
                "relay: one-way latency at {rate:.0} pps (half the relay's maximum) (rep {})",
                rep + 1
            ));
            if self.plan.relay_latency_baselines {
                match self.flows(
                    FlowTarget::Direct,
                    None,
                    SocketAddr::new(ip, 0),
                    rate,
                    None,
                    None,
                ) {
                    Ok(r) => self.results.relay.direct_lat.push(r),
                    Err(e) => self.record_error("direct latency", e),
                }
                let r = (|| {
                    let (fwd, listen, sink) = self.start_forwarder(&loadgen)?;
                    self.flows(
                        FlowTarget::Forwarder,
                        Some(listen),
                        sink,
                        rate,
                        Some(fwd.pid()),
                        None,
                    )
                })();
                match r {
                    Ok(r) => self.results.relay.forwarder_lat.push(r),
                    Err(e) => self.record_error("forwarder latency", e),
                }
            }
            let r = (|| {
                let (relay, public) = self.start_relay(&key)?;
                self.flows(
                    FlowTarget::Relay,
                    Some(public),
                    SocketAddr::new(ip, 0),
                    rate,
                    Some(relay.pid()),
                    Some(&key),
                )
            })();
            match r {
                Ok(r) => self.results.relay.relay_lat.push(r),
                Err(e) => self.record_error("relay latency", e),
            }
            if self.args.profile != Profile::Smoke {
                let r = (|| {
                    let (turn, listen) = self.start_coturn()?;
                    self.flows(
                        FlowTarget::Coturn,
                        Some(listen),
                        SocketAddr::new(ip, 0),
                        rate,
                        Some(turn.pid()),
                        None,
                    )
                })();
                match r {
                    Ok(r) => self.results.relay.coturn_lat.push(r),
                    Err(e) => self.record_error("coturn latency", e),
                }
            }
        }
    }

    fn start_forwarder(
        &mut self,
        loadgen: &Path,
    ) -> anyhow::Result<(Proc, SocketAddr, SocketAddr)> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let listen = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let sink = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let mut cmd = self.server_command(None, Path::new(loadgen));
        cmd.arg("forwarder")
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--to")
            .arg(sink.to_string())
            .args(["--cpu", "0"]);
        let log = self.log_path("forwarder");
        let p = Proc::spawn("forwarder", cmd, &log)?;
        // The forwarder prints its addresses once bound.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if fs::read_to_string(&log).is_ok_and(|s| s.contains("forwarder:")) {
                return Ok((p, listen, sink));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("forwarder did not start (log: {})", log.display())
    }

    fn start_coturn(&mut self) -> anyhow::Result<(Proc, SocketAddr)> {
        let bin =
            which("turnserver").context("coturn's turnserver is not installed (apt coturn)")?;
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let port = free_udp_ports(ip, 1)?;
        let relay_base = free_udp_ports(ip, 1)?.clamp(20_000, 60_000);
        let mut cmd = self.server_command(None, &bin);
        cmd.args([
            "-n",
            "--no-auth",
            "--listening-ip",
            "127.0.0.1",
            "--relay-ip",
            "127.0.0.1",
            "--allow-loopback-peers",
            "--no-cli",
            "--no-tls",
            "--no-dtls",
            "--no-stun-backward-compatibility",
            "-m",
            "1",
            "--log-file",
            "stdout",
            "--simple-log",
            "--userdb",
        ]);
        cmd.arg(self.args.work_dir.join("turndb.sqlite"))
            .arg("-p")
            .arg(port.to_string())
            .arg("--min-port")
            .arg(relay_base.to_string())
            .arg("--max-port")
            .arg((relay_base + 3000).to_string());
        let log = self.log_path("coturn");
        let p = Proc::spawn("coturn", cmd, &log)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if fs::read_to_string(&log)
                .is_ok_and(|s| s.contains("Total General servers") || s.contains("IO method"))
            {
                std::thread::sleep(Duration::from_millis(300));
                return Ok((p, SocketAddr::new(ip, port)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("coturn did not start (log: {})", log.display())
    }

    // ---- sessions through the relay ------------------------------------------------------

    fn via_relay(&mut self) {
        let n = self.plan.via_relay_sessions;
        if n == 0 {
            return;
        }
        let key = hex::encode(rand::random::<[u8; 32]>());
        for rep in 0..self.plan.reps {
            self.say(&format!(
                "sessions through the relay: {n} passthrough echo (rep {})",
                rep + 1
            ));
            let r = (|| {
                let (relay, public) = self.start_relay(&key)?;
                let o = TransceiverOpts {
                    relay: Some((public, &key)),
                    ..TransceiverOpts::default()
                };
                let t = self.start_transceiver("via-relay", &o)?;
                let mut cfg = self.load_config(&t, n, 50.0);
                cfg.backend =
                    Some(self.backend(&t, n, AudioMode::OpusPassthrough, Behaviour::Echo));
                let r = session_load::run(&cfg);
                drop(t);
                drop(relay);
                r
            })();
            match r {
                Ok(r) => self.results.via_relay.push(r),
                Err(e) => {
                    self.results.via_relay_skipped = Some(format!("{e:#}"));
                    self.record_error("via relay", e);
                }
            }
        }
    }

    fn micro(&mut self) {
        let Some(dir) = &self.args.criterion_dir else {
            return;
        };
        self.results.micro = read_criterion(dir);
    }
}

/// `  12.02%  [kernel.kallsyms]  [k] finish_task_switch   -   -` → `12.02%  [kernel.kallsyms]  finish_task_switch`.
fn tidy_perf_line(line: &str) -> String {
    line.split_whitespace()
        .filter(|w| *w != "-" && *w != "[.]" && *w != "[k]")
        .collect::<Vec<_>>()
        .join("  ")
}

/// Criterion's estimates (`<dir>/<group>/<bench>/new/estimates.json`).
pub fn read_criterion(dir: &Path) -> Vec<MicroBench> {
    let mut out = Vec::new();
    collect_criterion(dir, 0, &mut out);
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Criterion writes `<id>/new/estimates.json` (and `benchmark.json` with the full id), the id
/// being one folder or a group folder with one folder per benchmark.
fn collect_criterion(dir: &Path, depth: usize, out: &mut Vec<MicroBench>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let est = path.join("new").join("estimates.json");
        match fs::read_to_string(&est) {
            Ok(text) => {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                let name = fs::read_to_string(path.join("new").join("benchmark.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .and_then(|b| b["full_id"].as_str().map(str::to_string))
                    .unwrap_or_else(|| e.file_name().to_string_lossy().into_owned());
                out.push(MicroBench {
                    name,
                    mean_ns: v["mean"]["point_estimate"].as_f64().unwrap_or(0.0),
                    median_ns: v["median"]["point_estimate"].as_f64().unwrap_or(0.0),
                });
            }
            Err(_) if depth < 2 && path.is_dir() && e.file_name() != "report" => {
                collect_criterion(&path, depth + 1, out);
            }
            Err(_) => {}
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// Where Debian's janus package put its binary and plugins.
struct JanusFiles {
    binary: String,
    lib: PathBuf,
    version: String,
}

fn janus_files() -> anyhow::Result<JanusFiles> {
    let binary = which("janus").context("Janus is not installed (Debian package janus)")?;
    let lib = [
        "/usr/lib/x86_64-linux-gnu/janus",
        "/usr/lib/aarch64-linux-gnu/janus",
        "/usr/lib/janus",
        "/usr/local/lib/janus",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.join("plugins/libjanus_echotest.so").exists())
    .context("Janus's echotest plugin (libjanus_echotest.so) was not found")?;
    let version = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "janus"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Ok(JanusFiles {
        binary: binary.to_string_lossy().into_owned(),
        lib,
        version,
    })
}

impl JanusFiles {
    /// A minimal configuration: HTTP transport and the echotest plugin only, ICE on one
    /// interface, no session timeout (the load keeps sessions without keepalives).
    fn write_config(&self, dir: &Path, port: u16, ip: IpAddr, iface: &str) -> anyhow::Result<()> {
        for sub in ["plugins", "transports", "events", "loggers"] {
            fs::create_dir_all(dir.join(sub))?;
        }
        for (sub, so) in [
            ("plugins", "libjanus_echotest.so"),
            ("transports", "libjanus_http.so"),
        ] {
            let link = dir.join(sub).join(so);
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(self.lib.join(sub).join(so), &link)?;
        }
        let d = dir.display();
        fs::write(
            dir.join("janus.jcfg"),
            format!(
                "general: {{\n  configs_folder = \"{d}\"\n  plugins_folder = \"{d}/plugins\"\n  transports_folder = \"{d}/transports\"\n  events_folder = \"{d}/events\"\n  loggers_folder = \"{d}/loggers\"\n  log_to_stdout = true\n  debug_level = 3\n  session_timeout = 0\n}}\ncertificates: {{\n}}\nmedia: {{\n  rtp_port_range = \"42000-60000\"\n}}\nnat: {{\n  ice_enforce_list = \"{iface}\"\n  ignore_mdns = true\n}}\nplugins: {{\n}}\ntransports: {{\n}}\nevents: {{\n}}\nloggers: {{\n}}\n"
            ),
        )?;
        fs::write(
            dir.join("janus.transport.http.jcfg"),
            format!("general: {{\n  json = \"compact\"\n  base_path = \"/janus\"\n  http = true\n  port = {port}\n  ip = \"{ip}\"\n  https = false\n}}\nadmin: {{\n  admin_http = false\n}}\n"),
        )?;
        fs::write(dir.join("janus.plugin.echotest.jcfg"), "general: {\n}\n")?;
        Ok(())
    }
}

/// Runs the suite and writes its JSON.
pub fn run(args: &SuiteArgs) -> anyhow::Result<()> {
    fs::create_dir_all(&args.work_dir)?;
    if let Some(parent) = args.out.parent() {
        fs::create_dir_all(parent)?;
    }
    crate::proc_stat::raise_nofile_limit()?;
    let started = Instant::now();
    let plan = Plan::of(args.profile);
    // Before any thread starts: every later thread of this process inherits the mask.
    let cpu_split = CpuSplit::for_loops(args.loops);
    if let Some(split) = &cpu_split {
        split.pin_generator(args.loops)?;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let mut suite = Suite {
        args,
        started,
        plan: plan.clone(),
        results: SuiteResults {
            profile: format!("{:?}", args.profile).to_lowercase(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            machine: machine(),
            commit: if dirty {
                format!("{commit} (with uncommitted changes)")
            } else {
                commit
            },
            command: args.command.clone(),
            loops: args.loops,
            plan: Some(plan),
            cpu_split,
            ..SuiteResults::default()
        },
        run_no: 0,
    };
    suite.micro();
    suite.codec_floor();
    suite.save();
    if !suite.skip("relay") {
        suite.relay();
        suite.save();
    }
    if !suite.skip("cost") {
        suite.cost();
        suite.save();
    }
    if !suite.skip("setup") {
        suite.setup();
        suite.save();
    }
    if !suite.skip("memory") {
        suite.memory();
        suite.save();
    }
    if !suite.skip("peers") {
        suite.peers();
        suite.save();
    }
    if !suite.skip("via-relay") {
        suite.via_relay();
        suite.save();
    }
    suite.results.duration_secs = started.elapsed().as_secs_f64();
    let results = suite.results;
    crate::cli::write_json(&results, Some(&args.out))?;
    eprintln!(
        "bench: {} scenario error(s); results in {} ({:.0} s)",
        results.errors.len(),
        args.out.display(),
        results.duration_secs
    );
    if args.profile == Profile::Smoke {
        smoke_checks(&results)?;
    }
    Ok(())
}

/// What the smoke run must show for the benchmark code to be considered alive: every
/// scenario ran, sessions connected and carried audio, and the 5 % uplink loss it injects was
/// seen by the loss accounting. No timing is asserted.
pub fn smoke_checks(r: &SuiteResults) -> anyhow::Result<()> {
    if !r.errors.is_empty() {
        bail!("smoke: scenarios failed: {:?}", r.errors);
    }
    let run = r
        .cost
        .iter()
        .flat_map(|p| &p.runs)
        .next()
        .context("smoke: no session run")?;
    if run.sessions_connected_window_start == 0 || run.window_audio_sent == 0 {
        bail!("smoke: no session carried audio");
    }
    if run.loss.sessions_with_uplink_loss == 0 {
        bail!("smoke: injected uplink loss was not counted");
    }
    if r.codec_floor.is_none() {
        bail!("smoke: no codec floor");
    }
    if r.relay.skipped.is_none() && r.relay.relay_max.iter().all(|f| f.received == 0) {
        bail!("smoke: nothing went through the relay");
    }
    Ok(())
}
