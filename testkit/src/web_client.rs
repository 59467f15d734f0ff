//! Headless Chromium running the browser client library (`clients/web`, served by the
//! transceiver at `/voxgate.js`), driven one command at a time through
//! `tests/browser/web_client.mjs` (commands on stdin, events as JSON lines on stdout; the
//! script's header lists them). Needs `scripts/setup` (Chromium, node and playwright-core in
//! tests/browser, sox). Shared by the transceiver's browser tests and the fleet's fault suite,
//! which starts it inside a network namespace (the child inherits the calling thread's).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The workspace root (the parent of this crate).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits inside the workspace")
        .to_path_buf()
}

/// The browser client, driven one command at a time.
pub struct WebClient {
    child: Child,
    stdin: ChildStdin,
    events: Receiver<Value>,
    /// Every event seen so far, in order (for failure messages).
    seen: Vec<Value>,
}

impl WebClient {
    /// A driver whose page and signaling are at `signal_url` (e.g. a load balancer in front of
    /// several transceivers).
    pub fn start_at(signal_url: &str, lifetime: Duration) -> WebClient {
        Self::start_with(signal_url, lifetime, None)
    }

    /// As [`WebClient::start_at`], with `token` as the bearer of the first POST.
    pub fn start_with(signal_url: &str, lifetime: Duration, token: Option<&str>) -> WebClient {
        Self::start_with_env(
            signal_url,
            lifetime,
            &[("TOKEN", token.unwrap_or_default())],
        )
    }

    /// As [`WebClient::start_at`], with more of the driver's environment (its header lists it):
    /// `("TOKEN", ..)`, or `("MIC_PATTERN", "tone:1200,silence:2800")` for a fake microphone
    /// that speaks 1.2 s out of every 4 s instead of a steady tone (turns to time).
    pub fn start_with_env(signal_url: &str, lifetime: Duration, env: &[(&str, &str)]) -> WebClient {
        let root = repo_root();
        assert!(
            root.join("tests/browser/node_modules/playwright-core/package.json")
                .is_file(),
            "tests/browser has no playwright-core: run scripts/setup first"
        );
        let mut child = Command::new("node")
            .arg(root.join("tests/browser/web_client.mjs"))
            .current_dir(root.join("tests/browser"))
            .env("SIGNAL_URL", signal_url)
            .env("HARD_TIMEOUT_MS", lifetime.as_millis().to_string())
            // No bearer and a steady tone unless asked, whatever this process's environment says.
            .env("TOKEN", "")
            .env_remove("MIC_PATTERN")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node tests/browser/web_client.mjs");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({"event":"raw","line":line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut client = WebClient {
            child,
            stdin,
            events,
            seen: Vec::new(),
        };
        client.wait("ready", Duration::from_secs(45));
        client
    }

    /// Sends one command, waits until the page has run it and returns its result.
    pub fn run(&mut self, cmd: Value, within: Duration) -> Value {
        let name = cmd["cmd"].as_str().unwrap_or_default().to_owned();
        writeln!(self.stdin, "{cmd}").expect("write command");
        self.stdin.flush().expect("flush command");
        let before = self.seen.len();
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = match self.events.recv_timeout(left) {
                Ok(e) => e,
                Err(e) => panic!("{name}: {e:?} within {within:?}; events: {:?}", self.seen),
            };
            self.seen.push(e.clone());
            if e["cmd"] == name.as_str() && e["event"] == "error" {
                panic!(
                    "{name} failed in the page: {e}\nevents: {:?}",
                    &self.seen[before..]
                );
            }
            if e["cmd"] == name.as_str() && e["event"] == "done" {
                return e["result"].clone();
            }
        }
    }

    /// Every event the page reported so far that a command or a wait has read, in order.
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// The next event named `event` (earlier ones count too), or a panic after `within`.
    pub fn wait(&mut self, event: &str, within: Duration) -> Value {
        self.wait_for(within, |e| e["event"] == event)
    }

    pub fn wait_for(&mut self, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(e) = self.seen.iter().find(|e| want(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => {
                    self.seen.push(e.clone());
                    if want(&e) {
                        return e;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no matching event within {within:?}; events: {:?}",
                        self.seen
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the driver exited; events: {:?}", self.seen)
                }
            }
        }
    }

    pub fn stats(&mut self) -> Value {
        self.run(json!({"cmd": "stats"}), Duration::from_secs(10))
    }

    /// `{turns, reports}`: the `turn` splits the client emitted so far (`{turn, totalMs, parts}`)
    /// and the `turn.report` messages it sent on its `voxgate.turns` channel.
    pub fn turns(&mut self) -> Value {
        self.run(json!({"cmd": "turns"}), Duration::from_secs(10))
    }
}

impl Drop for WebClient {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects (media through 127.0.0.1:`port` when given) and returns the session id.
pub fn connected(client: &mut WebClient, port: Option<u16>) -> String {
    let cmd = match port {
        Some(p) => json!({"cmd": "connect", "port": p}),
        None => json!({"cmd": "connect"}),
    };
    let before = client.seen.len();
    client.run(cmd, Duration::from_secs(30));
    // This connect's event (the page reports it before the command is done), not an earlier
    // call's.
    let c = client.seen[before..]
        .iter()
        .find(|e| e["event"] == "connected")
        .cloned()
        .unwrap_or_else(|| panic!("connect reported no session; events: {:?}", client.seen));
    eprintln!("connected: {c}");
    c["sessionId"]
        .as_str()
        .filter(|s| !s.is_empty())
        .expect("a session id")
        .to_owned()
}
