//! Empty: Cargo resolves a crate's `[build-dependencies]` (here, the host-side crates whose
//! features are unified) only when it has a build script.
fn main() {}
