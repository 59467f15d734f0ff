//! The rest of the stack behind a relay, as real processes: the workspace's `transceiver` and
//! `echo-bot` binaries, built next to `relay` (`cargo build --workspace --bins`; cargo-nextest
//! builds them with the tests).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{eventually, free_tcp_port, free_udp_range, relay_bin, FLEET_KEY_HEX};

/// A workspace binary next to `relay`.
pub fn sibling_bin(name: &str) -> PathBuf {
    let p = relay_bin().parent().unwrap().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` (scripts/test does)",
        p.display()
    );
    p
}

/// A child process killed on drop, its output in a log file.
pub struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub fn spawn(cmd: &mut Command, tag: &str) -> Proc {
        let log = std::env::temp_dir().join(format!(
            "voxgate-relay-e2e-{tag}-{}.log",
            rand::random::<u32>()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("spawn");
        Proc { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running transceiver: its process, signaling base URL, gRPC address and loop 0's media
/// address (UDP, and TCP in direct mode).
pub struct Transceiver {
    pub proc: Proc,
    pub signal_url: String,
    pub grpc: String,
    pub media: SocketAddr,
}

/// A transceiver whose answers advertise `advertise` (the relay) and whose hints carry
/// `cluster_id`, with the test fleet key.
pub fn start_transceiver(advertise: SocketAddr, cluster_id: u32, loops: u16) -> Transceiver {
    start_transceiver_on(Ipv4Addr::LOCALHOST.into(), advertise, cluster_id, loops)
}

/// As [`start_transceiver`], with the media loops (and so the routing hints) on `media_ip`.
pub fn start_transceiver_on(
    media_ip: IpAddr,
    advertise: SocketAddr,
    cluster_id: u32,
    loops: u16,
) -> Transceiver {
    start_transceiver_with(
        Ipv4Addr::LOCALHOST.into(),
        media_ip,
        loops,
        &[
            "--advertise",
            &advertise.to_string(),
            // The relays of these tests forward from loopback (v4 and v6 internal sockets).
            "--relays",
            "127.0.0.0/8,::1/128",
            "--cluster-id",
            &cluster_id.to_string(),
        ],
        &[],
    )
}

/// A transceiver with signaling on `signal_ip` (a free port), `loops` media loops from a free
/// base port on `media_ip`, gRPC on loopback, the test fleet key, plus `args` and `envs`.
pub fn start_transceiver_with(
    signal_ip: IpAddr,
    media_ip: IpAddr,
    loops: u16,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Transceiver {
    // Ports picked free a moment ago can be taken by anyone on this shared machine before the
    // transceiver binds them: a start-up that exits early is retried on fresh ports.
    for attempt in 1.. {
        let signal = SocketAddr::new(signal_ip, free_tcp_port());
        let grpc = free_tcp_port();
        let media = SocketAddr::new(media_ip, free_udp_range(loops));
        let mut proc = Proc::spawn(
            Command::new(sibling_bin("transceiver"))
                .args(["--signal-listen", &signal.to_string()])
                .args(["--media-listen", &media.to_string()])
                .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
                .args(["--loops", &loops.to_string(), "--no-pin"])
                .args(args)
                .envs(envs.iter().copied())
                .env("VOXGATE_FLEET_KEY", FLEET_KEY_HEX),
            "transceiver",
        );
        let url = format!("http://{signal}");
        let ok = eventually(Duration::from_secs(10), || {
            proc.exited()
                || reqwest::blocking::get(format!("{url}/healthz")).is_ok_and(|r| r.status() == 200)
        });
        if ok && proc.exited() && attempt < 3 {
            eprintln!(
                "transceiver exited during start-up, retrying:\n{}",
                proc.log_text()
            );
            continue;
        }
        assert!(
            ok && !proc.exited(),
            "transceiver did not start:\n{}",
            proc.log_text()
        );
        return Transceiver {
            proc,
            signal_url: url,
            grpc: format!("127.0.0.1:{grpc}"),
            media,
        };
    }
    unreachable!()
}

/// The echo-bot subscribed to `t` (capacity 100), once it has registered.
pub fn start_echo_bot(t: &Transceiver) -> Proc {
    start_echo_bot_with(t, None, &[])
}

/// As [`start_echo_bot`], presenting `token` on every gRPC call (a transceiver whose signaling
/// has a token wants it on gRPC too, when it has no `--grpc-token`).
pub fn start_echo_bot_with_token(t: &Transceiver, token: Option<&str>) -> Proc {
    start_echo_bot_with(t, token, &[])
}

/// As [`start_echo_bot_with_token`], with extra flags (e.g. `--continuous`).
pub fn start_echo_bot_with(t: &Transceiver, token: Option<&str>, args: &[&str]) -> Proc {
    let mut cmd = Command::new(sibling_bin("echo-bot"));
    cmd.args(["--transceiver", &t.grpc, "--capacity", "100"])
        .args(["--silence-ms", "300"])
        .args(args);
    if let Some(token) = token {
        cmd.env("VOXGATE_ECHO_TOKEN", token);
    }
    let bot = Proc::spawn(&mut cmd, "echo-bot");
    let ok = eventually(Duration::from_secs(10), || {
        bot.log_text().contains("registered")
    });
    assert!(ok, "echo-bot did not register:\n{}", bot.log_text());
    bot
}

/// Runs `tests/browser/chromium_session.mjs` (headless Chromium as an unmodified WebRTC client,
/// see its header for `envs`) with `node`, a command for node that may wrap it (e.g. in a
/// namespace). Returns its one-line JSON report; panics with its output and `logs()` when it
/// fails.
pub fn chromium_report(
    mut node: Command,
    envs: &[(&str, &str)],
    logs: impl Fn() -> String,
) -> serde_json::Value {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    assert!(
        repo.join("tests/browser/node_modules/playwright-core")
            .exists(),
        "run scripts/setup first (playwright-core missing)"
    );
    let out = node
        .arg(repo.join("tests/browser/chromium_session.mjs"))
        .envs(envs.iter().copied())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chromium failed:\nstdout: {stdout}\nstderr: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        logs()
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    serde_json::from_str(line).expect("JSON report")
}
