//! The suite's command line: the profile, where the binaries are, where results go, the
//! peer namespace, and what to skip.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

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
    /// The build manifest of the servers under test (see `suite::builds`), written by
    /// scripts/bench, for the report to say which builds it measured.
    #[arg(long)]
    pub builds: Option<PathBuf>,
    /// The command line to print in the report.
    #[arg(long, default_value = "scripts/bench")]
    pub command: String,
    /// The Python of the voice-to-voice scenario (the venv scripts/setup makes).
    #[arg(long, env = "VOXGATE_BENCH_PYTHON", default_value = ".venv/bin/python")]
    pub python: PathBuf,
    /// The folder holding the Python test harness (`voxgate_harness`).
    #[arg(long, env = "VOXGATE_BENCH_PYTHON_TESTS", default_value = "tests")]
    pub python_tests: PathBuf,
    /// Scenarios to skip: relay, cost, setup, media, memory, peers, via-relay, voice, perf.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
}
