//! Micro-benchmarks: criterion's estimates for `loadgen/benches/proto_parsers.rs`, which
//! `scripts/bench` runs before the suite; the suite only reads what criterion wrote.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MicroBench {
    pub name: String,
    pub mean_ns: f64,
    pub median_ns: f64,
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

/// The "Micro-benchmarks" section.
pub fn section(md: &mut String, micro: &[MicroBench]) {
    let _ = writeln!(md, "## Micro-benchmarks\n");
    if micro.is_empty() {
        let _ = writeln!(
            md,
            "Not run in this profile (`cargo bench -p voxgate-loadgen --bench proto_parsers`).\n"
        );
        return;
    }
    let _ = writeln!(
        md,
        "criterion, `loadgen/benches/proto_parsers.rs`, short measurement times (shared machine). Demux maps hold 1,000 sessions.\n"
    );
    let _ = writeln!(md, "| benchmark | median ns | mean ns |\n|---|---|---|");
    for b in micro {
        let _ = writeln!(
            md,
            "| `{}` | {:.1} | {:.1} |",
            b.name, b.median_ns, b.mean_ns
        );
    }
    md.push('\n');
}
