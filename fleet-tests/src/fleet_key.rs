//! The fleet key of a test fleet: fresh random bytes in a 0600 file, as a mounted secret would be.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writes a new random fleet key (64 hex digits) to `dir/fleet.key` and returns its path.
pub fn write(dir: &Path) -> PathBuf {
    let mut raw = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .expect("urandom");
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join("fleet.key");
    std::fs::write(&path, hex + "\n").expect("write key");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}
