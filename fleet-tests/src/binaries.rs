//! The workspace's binaries, as the tests run them.
//!
//! A test in this crate cannot use `CARGO_BIN_EXE_*` for other packages' binaries, so the first
//! call builds them into the same target directory and profile as the running test, then hands
//! out their paths. It runs exactly the build `scripts/test` runs before the tests
//! (`cargo build --workspace --bins`), so in the suite it is a no-op. Building only the three
//! packages (`-p ...`) would not be: cargo unifies features over the packages it is asked for,
//! so that build compiles tokio and friends again with other features, minutes on two cores,
//! inside the test's time limit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Package of every binary the deployment ships.
pub const BINARIES: [(&str, &str); 3] = [
    ("transceiver", "voxgate-transceiver"),
    ("relay", "voxgate-relay"),
    ("echo-bot", "voxgate-echo-bot"),
];

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fleet-tests sits inside the workspace")
        .to_path_buf()
}

/// `target/<profile>` of the running test executable (`target/<profile>/deps/<test>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// Path of workspace binary `name` (one of [`BINARIES`]), built on first use; or, when
/// `VOXGATE_FLEET_BIN_DIR` names a folder, that folder's (a benchmark measures the binaries as
/// they ship, built by scripts/build-release, not a test build).
pub fn path(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        if let Some(dir) = std::env::var_os("VOXGATE_FLEET_BIN_DIR") {
            return PathBuf::from(dir);
        }
        let profile = profile_dir();
        let target_dir = profile.parent().expect("target dir").to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "--workspace", "--bins"])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(workspace_root());
        if profile.file_name() == Some("release".as_ref()) {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building the voxgate binaries failed");
        profile
    });
    assert!(
        BINARIES.iter().any(|(b, _)| *b == name),
        "{name} is not a voxgate binary"
    );
    dir.join(name)
}

/// The `--help` output of binary `name`.
pub fn help(name: &str) -> String {
    let out = Command::new(path(name))
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("running {name} --help: {e}"));
    assert!(out.status.success(), "{name} --help failed");
    String::from_utf8(out.stdout).expect("--help is UTF-8")
}
