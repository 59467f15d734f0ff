//! The browser client driver (voxgate-testkit's `web_client`: headless Chromium running
//! `clients/web`), started against one of these tests' transceivers.

use std::time::Duration;

#[allow(unused_imports)] // each test binary uses its part
pub use voxgate_testkit::web_client::{connected, WebClient};

use super::ServerProcess;

/// A browser client whose page and signaling are `server`'s.
pub fn start(server: &ServerProcess) -> WebClient {
    start_for(server, Duration::from_secs(120))
}

/// As [`start`], giving up (the browser closes) after `lifetime`.
pub fn start_for(server: &ServerProcess, lifetime: Duration) -> WebClient {
    WebClient::start_at(&server.signal_url, lifetime)
}
