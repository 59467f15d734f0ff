//! The report is a pure function of a results JSON: these render stored results and compare
//! the output byte for byte with the stored `BENCHMARKS.md` and SVGs, so work on one scenario
//! cannot change another section (or the Targets table, or the "why" notes) unnoticed.
//!
//! Fixtures (`tests/data/report/<name>/`):
//! - `smoke_run`: the results of a real `scripts/bench --smoke` run, as written.
//! - `full_missed`: hand-written, full-profile shaped, where nearly every target is missed so
//!   that every "why" explanation renders (handoff over budget, Nagle on gRPC sockets,
//!   negative stamps, perf profile, passthrough per packet, PCM above the floor, saturation,
//!   slow setup with and without refusals, PCM downlink shortfall, relay throughput and
//!   latency), plus truncated ramps, refusals, a failed point and runs whose histogram
//!   buckets differ.
//! - `smoke_met`: hand-written, every measured target met (the "every target was met" line),
//!   no CPU split, skipped peers and coturn, no micro-benchmarks.
//! - `failures`: hand-written, scenarios that failed or were skipped (relay, via-relay, Janus,
//!   an empty cost point), no codec floor, media latency with no in-transceiver histogram.
//!
//! Nothing in the render reads the clock or the machine: date, machine and commit all come
//! from the JSON, so nothing needs pinning. To accept an intended change of the report,
//! rerun with `LOADGEN_BLESS=1` and review the diff of the stored files.

use std::path::{Path, PathBuf};

use voxgate_loadgen::report::{self, ReportArgs};

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/report")
        .join(name)
}

/// Renders `<fixture>/results.json` into a scratch folder and compares every file it wrote
/// with the stored one (and checks no stored file went missing).
fn renders_as_stored(name: &str) {
    let dir = fixture_dir(name);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-golden-{name}"));
    let _ = std::fs::remove_dir_all(&out);
    report::run(&ReportArgs {
        results: dir.join("results.json"),
        docs: out.clone(),
    })
    .expect("render");
    let bless = std::env::var_os("LOADGEN_BLESS").is_some();
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert!(
        written.contains(&"BENCHMARKS.md".to_string()),
        "{written:?}"
    );
    for file in &written {
        let got = std::fs::read(out.join(file)).unwrap();
        let stored = dir.join(file);
        if bless {
            std::fs::write(&stored, &got).unwrap();
            continue;
        }
        let want = std::fs::read(&stored)
            .unwrap_or_else(|e| panic!("{name}: no stored {file} ({e}); bless to create it"));
        assert!(
            got == want,
            "{name}: {file} differs from the stored one; diff {} {}",
            out.join(file).display(),
            stored.display()
        );
    }
    let mut stored: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "results.json")
        .collect();
    stored.sort();
    assert_eq!(stored, written, "{name}: the render wrote other files");
}

#[test]
fn smoke_run_report_is_unchanged() {
    renders_as_stored("smoke_run");
}

#[test]
fn report_with_every_explanation_is_unchanged() {
    renders_as_stored("full_missed");
}

#[test]
fn report_with_every_target_met_is_unchanged() {
    renders_as_stored("smoke_met");
}

#[test]
fn report_of_failed_and_skipped_scenarios_is_unchanged() {
    renders_as_stored("failures");
}
