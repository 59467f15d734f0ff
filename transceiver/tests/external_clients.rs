//! Unmodified external WebRTC clients against the real transceiver binary:
//! Debian's Chromium (driven by playwright-core, tests/browser/chromium_session.mjs) and aiortc
//! (tests/aiortc_client.py). Needs `scripts/setup` to have run (apt packages, .venv, npm deps).

mod support;

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use support::{repo_root, run_with_timeout, ProcOutput, ServerProcess};

/// The clients are heavy (a browser, real-time audio) and the machine has 2 cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Longer than the scripts' own 60 s hard timeouts, so theirs fire first and explain themselves.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const SETUP_HINT: &str = "run scripts/setup (from the repository root) first";

fn require_node_env() {
    let root = repo_root();
    let pw = root.join("tests/browser/node_modules/playwright-core/package.json");
    assert!(pw.is_file(), "{} is missing: {SETUP_HINT}", pw.display());
    assert!(
        std::path::Path::new("/usr/bin/chromium").is_file(),
        "/usr/bin/chromium is missing: {SETUP_HINT}"
    );
    for tool in ["node", "sox"] {
        let ok = Command::new(tool)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(ok, "`{tool} --version` failed: {SETUP_HINT}");
    }
}

fn venv_python() -> std::path::PathBuf {
    let py = repo_root().join(".venv/bin/python");
    assert!(py.is_file(), "{} is missing: {SETUP_HINT}", py.display());
    let ok = Command::new(&py)
        .args(["-c", "import aiortc, av, numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{} cannot import aiortc/av/numpy: {SETUP_HINT}",
        py.display()
    );
    py
}

fn run_chromium(server: &ServerProcess, envs: &[(&str, &str)]) -> ProcOutput {
    let root = repo_root();
    let mut cmd = Command::new("node");
    cmd.arg(root.join("tests/browser/chromium_session.mjs"))
        .current_dir(root.join("tests/browser"))
        .env("SIGNAL_URL", &server.signal_url)
        .env_remove("TOKEN")
        .env_remove("EXPECT_STATUS")
        .env_remove("STUB_PAGE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    run_with_timeout(&mut cmd, CLIENT_TIMEOUT)
}

fn run_aiortc(server: &ServerProcess, extra: &[&str]) -> ProcOutput {
    let root = repo_root();
    let mut cmd = Command::new(venv_python());
    cmd.arg(root.join("tests/aiortc_client.py"))
        .arg("--url")
        .arg(&server.signal_url)
        .args(extra)
        .current_dir(&root);
    run_with_timeout(&mut cmd, CLIENT_TIMEOUT)
}

fn report(out: &ProcOutput) -> Value {
    out.json_line()
        .unwrap_or_else(|| panic!("client printed no JSON line\n{}", out.describe()))
}

fn num(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The checks both media clients share.
fn assert_media_session(name: &str, out: &ProcOutput, server: &ServerProcess, token: Option<&str>) {
    assert!(out.success(), "{name} failed\n{}", out.describe());
    let r = report(out);
    assert_eq!(
        r["ok"],
        Value::Bool(true),
        "{name} reported failure\n{}",
        out.describe()
    );
    assert!(
        num(&r, "/packetsSent") > 0,
        "{name}: packetsSent is 0\n{}",
        out.describe()
    );
    for c in [
        "datagrams_in",
        "bytes_in",
        "datagrams_out",
        "audio_packets_in",
    ] {
        assert!(
            num(&r, &format!("/server/counters/{c}")) > 0,
            "{name}: server counters.{c} is 0\n{}",
            out.describe()
        );
    }
    assert_eq!(
        r["server"]["state"].as_str(),
        Some("connected"),
        "{name}: server state while media flowed\n{}",
        out.describe()
    );
    assert_eq!(
        num(&r, "/deleteStatus"),
        204,
        "{name}: DELETE status\n{}",
        out.describe()
    );
    // The session is gone after DELETE.
    let location = r["location"]
        .as_str()
        .expect("report has the Location of the session");
    let url = if location.starts_with("http") {
        location.to_owned()
    } else {
        server.url(location)
    };
    let gone = support::http_get(&url, token).status;
    assert!(
        matches!(gone, 404 | 410),
        "{name}: GET {location} after DELETE answered {gone}"
    );
}

#[test]
fn chromium_connects_and_sends_audio() {
    require_node_env();
    let _g = serial();
    let server = ServerProcess::start(&[]);
    let out = run_chromium(&server, &[("HOLD_MS", "3000")]);
    assert_media_session("chromium", &out, &server, None);
}

#[test]
fn chromium_gets_401_without_token() {
    require_node_env();
    let _g = serial();
    let server = ServerProcess::start(&["--token", "secret"]);
    let out = run_chromium(&server, &[("EXPECT_STATUS", "401")]);
    assert!(
        out.success(),
        "chromium without token did not get 401\n{}",
        out.describe()
    );
    let r = report(&out);
    assert_eq!(num(&r, "/postStatus"), 401, "{}", out.describe());
    // And a wrong token is refused the same way.
    let out = run_chromium(
        &server,
        &[("EXPECT_STATUS", "401"), ("TOKEN", "not-the-secret")],
    );
    assert!(
        out.success(),
        "chromium with a wrong token did not get 401\n{}",
        out.describe()
    );
}

#[test]
fn chromium_connects_with_token() {
    require_node_env();
    let _g = serial();
    let server = ServerProcess::start(&["--token", "secret"]);
    let out = run_chromium(&server, &[("HOLD_MS", "1500"), ("TOKEN", "secret")]);
    assert_media_session("chromium (token)", &out, &server, Some("secret"));
}

#[test]
fn aiortc_connects_and_sends_audio() {
    venv_python();
    let _g = serial();
    let server = ServerProcess::start(&[]);
    let out = run_aiortc(&server, &["--seconds", "3"]);
    assert_media_session("aiortc", &out, &server, None);
}
