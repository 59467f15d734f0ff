//! Where a tool's JSON result goes: a file, or stdout.

use std::path::PathBuf;

use anyhow::Context as _;

/// Writes `value` as pretty JSON to `out`, or to stdout.
pub fn write_json<T: serde::Serialize>(value: &T, out: Option<&PathBuf>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    match out {
        Some(p) => {
            std::fs::write(p, text + "\n").with_context(|| format!("writing {}", p.display()))
        }
        None => {
            println!("{text}");
            Ok(())
        }
    }
}
