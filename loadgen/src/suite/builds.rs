//! Which builds of the servers a run measured: for each binary, the exact cargo command that
//! built it, its profile and its sha256. `scripts/bench` writes them to a manifest (one line
//! per binary, tab-separated: name, profile, sha256, command) and passes it with `--builds`;
//! the report prints them, so a reader can tell whether the bench measured what ships.

use std::path::Path;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

/// One binary the run measured and how it was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MeasuredBuild {
    /// The binary's name (`transceiver`, `relay`).
    pub binary: String,
    /// The cargo profile (`release`, `dev`).
    pub profile: String,
    /// The binary's sha256, hex.
    pub sha256: String,
    /// The cargo command that built it, as run.
    pub command: String,
}

/// Reads a manifest file (see the module header).
pub fn read_manifest(path: &Path) -> anyhow::Result<Vec<MeasuredBuild>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the build manifest {}", path.display()))?;
    parse_manifest(&text).with_context(|| format!("in {}", path.display()))
}

/// Parses a manifest's text: one `name<TAB>profile<TAB>sha256<TAB>command` line per binary;
/// blank lines are skipped.
pub fn parse_manifest(text: &str) -> anyhow::Result<Vec<MeasuredBuild>> {
    let mut builds = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        let [binary, profile, sha256, command] = fields[..] else {
            bail!(
                "line {}: want name, profile, sha256 and command, tab-separated",
                i + 1
            );
        };
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("line {}: {sha256:?} is not a sha256", i + 1);
        }
        builds.push(MeasuredBuild {
            binary: binary.into(),
            profile: profile.into(),
            sha256: sha256.to_ascii_lowercase(),
            command: command.trim_end().into(),
        });
    }
    Ok(builds)
}

#[cfg(test)]
mod tests {
    use crate::suite::builds::{parse_manifest, MeasuredBuild};

    #[test]
    fn a_manifest_names_each_binary_with_its_command_profile_and_hash() {
        let sha = "ab".repeat(32);
        let text = format!(
            "transceiver\trelease\t{sha}\tcargo build --release --locked -p voxgate-transceiver --bin transceiver\n\n\
             relay\trelease\t{}\tcargo build --release --locked -p voxgate-relay --bin relay\n",
            sha.to_uppercase()
        );
        let builds = parse_manifest(&text).unwrap();
        assert_eq!(
            builds[0],
            MeasuredBuild {
                binary: "transceiver".into(),
                profile: "release".into(),
                sha256: sha.clone(),
                command: "cargo build --release --locked -p voxgate-transceiver --bin transceiver"
                    .into(),
            }
        );
        assert_eq!(builds.len(), 2);
        assert_eq!(builds[1].sha256, sha, "hashes read in lower case");
    }

    #[test]
    fn a_line_without_four_fields_or_a_hash_is_refused() {
        assert!(parse_manifest("transceiver\trelease\n").is_err());
        assert!(parse_manifest("transceiver\trelease\tnot-a-hash\tcargo build\n").is_err());
        assert!(parse_manifest("").unwrap().is_empty());
    }
}
