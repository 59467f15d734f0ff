//! The benchmark suite: the list of scenarios, and the run that goes through it. Each
//! scenario (`crate::scenarios`) starts its servers fresh on free loopback ports, runs its
//! load in this process, reads what the kernel charged the server, stops it, and records
//! what it measured in its part of one [`SuiteResults`] JSON. A scenario that fails is
//! recorded with its error and the suite goes on; nothing measured is ever filled in by hand.
//!
//! Profiles ([`plan::Plan`]): `smoke` (seconds; exercises every code path that needs no extra
//! package, used by `scripts/test`), `quick` (under 10 minutes on the 2-core box), `full`
//! (repetitions, longer windows, more sessions).
//!
//! Below the list: the machinery every scenario shares ([`runner`], [`servers`],
//! [`process`], [`cpu_split`], [`machine`], [`perf`]).

pub mod args;
pub mod builds;
pub mod cpu_split;
pub mod loads;
pub mod machine;
pub mod perf;
pub mod plan;
pub mod process;
pub mod runner;
pub mod servers;

use std::fs;
use std::time::Instant;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::codec_floor::CodecFloor;
use crate::codec_quality::QualityMatrix;
use crate::json_out::write_json;
use crate::scenarios::cost::{self, CostPoint};
use crate::scenarios::micro::{self, MicroBench};
use crate::scenarios::peers::{self, PeersSection};
use crate::scenarios::relay::{self, RelaySection};
use crate::scenarios::relay_tcp::{self, RelayTcpSection};
use crate::scenarios::setup::{self, SetupPoint};
use crate::scenarios::soak::{self, SoakResult};
use crate::scenarios::voice::{self, VoiceSection};
use crate::scenarios::{encoder, media, memory, via_relay};
use crate::session_load::LoadResult;

pub use args::{Profile, SuiteArgs};
pub use builds::MeasuredBuild;
pub use cpu_split::CpuSplit;
pub use machine::Machine;
pub use perf::ServerProfile;
pub use plan::Plan;
use runner::{Ledger, Runner};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SuiteResults {
    pub profile: String,
    pub started_unix: u64,
    pub duration_secs: f64,
    pub machine: Machine,
    pub commit: String,
    pub command: String,
    /// The builds of the servers this run measured (none: not recorded, as in runs from
    /// before the bench wrote them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<MeasuredBuild>,
    pub loops: usize,
    pub plan: Option<Plan>,
    /// The floor at 48 kHz (also in `codec_floors`).
    pub codec_floor: Option<CodecFloor>,
    /// The floor at each backend rate, with the cost runs' encoder settings.
    pub codec_floors: Vec<CodecFloor>,
    /// Encoder settings' cost and quality on spoken sentences.
    pub encoder_quality: QualityMatrix,
    pub relay: RelaySection,
    pub relay_tcp: RelayTcpSection,
    pub cost: Vec<CostPoint>,
    pub setup: Vec<SetupPoint>,
    pub memory: Vec<LoadResult>,
    pub peers: PeersSection,
    pub via_relay: Vec<LoadResult>,
    pub via_relay_skipped: Option<String>,
    pub micro: Vec<MicroBench>,
    pub voice: VoiceSection,
    pub soak: Option<SoakResult>,
    pub profiles: Vec<ServerProfile>,
    /// Cores of the server under test and of the load generator (none: not split).
    pub cpu_split: Option<CpuSplit>,
    /// Scenarios that failed, with why.
    pub errors: Vec<String>,
}

impl SuiteResults {
    /// The codec floors by rate (results from before floors were measured per rate have the
    /// 48 kHz one only).
    pub fn floors(&self) -> &[CodecFloor] {
        if self.codec_floors.is_empty() {
            self.codec_floor.as_slice()
        } else {
            &self.codec_floors
        }
    }
}

impl Ledger for SuiteResults {
    fn errors(&mut self) -> &mut Vec<String> {
        &mut self.errors
    }

    fn set_duration_secs(&mut self, secs: f64) {
        self.duration_secs = secs;
    }
}

/// A scenario: its name (for `--skip`), what it runs, and what it adds to the report: its
/// rows of the Targets table and its section. Its "why" notes are placed by the report
/// (`report::why_section`), in the order the evidence reads best.
pub struct Scenario {
    pub name: &'static str,
    /// `None`: it measures nothing of its own (media latency comes from the cost runs,
    /// micro-benchmarks from criterion before the suite).
    pub run: Option<fn(&mut Runner<'_, SuiteResults>)>,
    pub targets: fn(&mut String, &SuiteResults),
    pub section: fn(&mut String, &SuiteResults),
}

/// Every scenario, in the order they run and appear in the report.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "relay",
        run: Some(|s| relay::run(s, |r| &mut r.relay)),
        targets: |md, r| relay::targets(md, &r.relay),
        section: |md, r| relay::section(md, &r.relay),
    },
    Scenario {
        name: "relay-tcp",
        run: Some(|s| relay_tcp::run(s, |r| &mut r.relay_tcp)),
        targets: |_, _| {},
        section: |md, r| relay_tcp::section(md, &r.relay_tcp),
    },
    Scenario {
        name: "cost",
        run: Some(|s| cost::run::run(s, |r| (&mut r.cost, &mut r.profiles))),
        targets: |md, r| cost::report::targets(md, &r.cost, r.codec_floor.as_ref()),
        section: |md, r| cost::report::section(md, &r.cost, r.floors(), r.plan.as_ref()),
    },
    Scenario {
        name: "encoder",
        // Measured in process before any server starts (see `run`).
        run: None,
        targets: |_, _| {},
        section: |md, r| encoder::section(md, &r.encoder_quality),
    },
    Scenario {
        name: "setup",
        run: Some(|s| setup::run(s, |r| &mut r.setup)),
        targets: |md, r| setup::targets(md, &r.setup),
        section: |md, r| setup::section(md, &r.setup),
    },
    Scenario {
        name: "media",
        run: None,
        targets: |md, r| media::targets(md, &r.cost, r.loops),
        section: |md, r| media::section(md, &r.cost),
    },
    Scenario {
        name: "memory",
        run: Some(|s| memory::run(s, |r| &mut r.memory)),
        targets: |md, r| memory::targets(md, &r.memory),
        section: |md, r| memory::section(md, &r.memory),
    },
    Scenario {
        name: "peers",
        run: Some(|s| peers::run(s, |r| &mut r.peers)),
        targets: |_, _| {},
        section: |md, r| peers::section(md, &r.peers, &r.relay),
    },
    Scenario {
        name: "via-relay",
        run: Some(|s| via_relay::run(s, |r| (&mut r.via_relay, &mut r.via_relay_skipped))),
        targets: |_, _| {},
        section: |md, r| via_relay::section(md, &r.via_relay, r.via_relay_skipped.as_ref()),
    },
    Scenario {
        name: "voice",
        run: Some(|s| voice::run(s, |r| &mut r.voice)),
        targets: |md, r| voice::targets(md, &r.voice),
        section: |md, r| voice::section(md, &r.voice),
    },
    Scenario {
        name: "soak",
        run: Some(|s| soak::run(s, |r| &mut r.soak)),
        targets: |_, _| {},
        section: |md, r| soak::section(md, r.soak.as_ref()),
    },
    Scenario {
        name: "micro",
        run: None,
        targets: |_, _| {},
        section: |md, r| {
            micro::packet_cost_section(md, &r.micro, &r.cost, &r.profiles);
            micro::section(md, &r.micro)
        },
    },
];

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
    let commit = machine::commit();
    let builds = match &args.builds {
        Some(path) => builds::read_manifest(path)?,
        None => Vec::new(),
    };
    let results = SuiteResults {
        profile: format!("{:?}", args.profile).to_lowercase(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        machine: machine::machine(),
        commit,
        command: args.command.clone(),
        builds,
        loops: args.loops,
        plan: Some(plan.clone()),
        cpu_split: cpu_split.clone(),
        ..SuiteResults::default()
    };
    let mut suite = Runner::new(args, plan, results, cpu_split, started);
    // What starts no server comes first: criterion's estimates (made before the suite) and
    // the codec floor (measured before any server competes for the CPU).
    if let Some(dir) = &args.criterion_dir {
        suite.results.micro = micro::read_criterion(dir);
    }
    cost::run::measure_floor(&mut suite, |r| (&mut r.codec_floor, &mut r.codec_floors));
    if !suite.skip("encoder") {
        encoder::measure(&mut suite, |r| &mut r.encoder_quality);
    }
    suite.save();
    for scenario in SCENARIOS {
        let Some(run) = scenario.run else {
            continue;
        };
        if !suite.skip(scenario.name) {
            run(&mut suite);
            suite.save();
        }
    }
    suite.results.duration_secs = started.elapsed().as_secs_f64();
    let results = suite.results;
    write_json(&results, Some(&args.out))?;
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
    if r.codec_floor.is_none() || r.codec_floors.len() < 3 {
        bail!("smoke: no codec floor at each backend rate");
    }
    if r.encoder_quality.skipped.is_none() && r.encoder_quality.points.is_empty() {
        bail!("smoke: encoder quality neither measured nor skipped");
    }
    if !r
        .cost
        .iter()
        .any(|p| p.mode == "pcm16k" && !p.runs.is_empty())
    {
        bail!("smoke: no PCM run at 16 kHz");
    }
    if r.relay.skipped.is_none() && r.relay.relay_max.iter().all(|f| f.received == 0) {
        bail!("smoke: nothing went through the relay");
    }
    if r.relay_tcp.skipped.is_none() && r.relay_tcp.tcp.iter().all(|f| f.received == 0) {
        bail!("smoke: nothing went through the relay over TCP");
    }
    let soak = r.soak.as_ref().context("smoke: no soak")?;
    if soak.connected == 0 || soak.drained_after_secs.is_none() {
        bail!("smoke: the soak connected no session or did not drain: {soak:?}");
    }
    Ok(())
}
