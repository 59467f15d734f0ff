//! Shared support for the transceiver's integration tests (`mod support;` in a test file).
//!
//! - [`ServerProcess`]: the real `transceiver` binary on free loopback ports, its output in a log
//!   file under `CARGO_TARGET_TMPDIR`, stopped (SIGTERM, then SIGKILL) on drop.
//! - [`backend`]: a real gRPC backend (worker, session streams, taps) for audio-bridge tests.
//! - Small blocking HTTP helpers (reqwest::blocking) and a subprocess runner with a timeout.
#![allow(dead_code)]

pub mod backend;
pub mod probe;
pub mod raw_tcp;
pub mod web_client;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long `ServerProcess::start` waits for `GET /healthz` to answer 200.
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);
/// How many consecutive UDP ports from the media base port must be free.
pub const MEDIA_PORTS: u16 = 4;

/// Repository root (the workspace folder holding `transceiver/`, `tests/`, `scripts/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("CARGO_MANIFEST_DIR has a parent")
        .to_path_buf()
}

/// Path of the `transceiver` binary that cargo built for these tests.
pub fn transceiver_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_transceiver"))
}

// ------------------------------------------------------------------------------------------------
// Ports

// Ports for the servers these tests start come from voxgate_testkit::ports: below the
// ephemeral range (an outgoing connection cannot take one between the pick and the child's
// bind), claimed in this process and across test processes.
pub use voxgate_testkit::ports::free_tcp_port;

/// A base port P on loopback such that P, P+1, .., P+count-1 are free for UDP and TCP (a media
/// loop also listens for ICE-TCP on its UDP port).
pub fn free_udp_port_range(count: u16) -> u16 {
    voxgate_testkit::ports::free_port_range(count, voxgate_testkit::ports::Protocols::UdpAndTcp)
}

// ------------------------------------------------------------------------------------------------
// Server process

/// The transceiver binary running on loopback for one test.
pub struct ServerProcess {
    /// e.g. `http://127.0.0.1:40123` (no trailing slash).
    pub signal_url: String,
    pub signal_addr: SocketAddr,
    /// First media UDP port (loop i binds base + i).
    pub media_base_port: u16,
    /// The gRPC bridge address, e.g. `http://127.0.0.1:40124`.
    pub grpc_url: String,
    /// Where the server's stdout and stderr go.
    pub log_path: PathBuf,
    child: Child,
}

static SERVER_SEQ: AtomicU32 = AtomicU32::new(0);

/// The gRPC credential of each server started in this process, by its `grpc_url`.
static GRPC_CREDENTIALS: std::sync::Mutex<Vec<(String, String)>> =
    std::sync::Mutex::new(Vec::new());

/// The bearer token gRPC calls to the server at `grpc_url` need, if it was started with one:
/// `--grpc-token`, else the signaling `--token` (which the server then takes on gRPC too), each
/// from the command line or the environment. The test backends ([`backend`]) present it, as a
/// configured backend would.
pub fn grpc_credential(grpc_url: &str) -> Option<String> {
    let known = GRPC_CREDENTIALS.lock().unwrap_or_else(|e| e.into_inner());
    known
        .iter()
        .find(|(url, _)| url == grpc_url)
        .map(|(_, token)| token.clone())
}

/// What [`grpc_credential`] reports for a server started with these arguments.
fn credential_of(args: &[&str], envs: &[(&str, &str)]) -> Option<String> {
    let value = |flag: &str, var: &str| {
        let arg = args
            .windows(2)
            .rev()
            .find(|w| w[0] == flag)
            .map(|w| w[1].to_string());
        let env = envs.iter().rev().find(|(k, _)| *k == var);
        arg.or_else(|| env.map(|(_, v)| v.to_string()))
    };
    value("--grpc-token", "VOXGATE_GRPC_TOKEN").or_else(|| value("--token", "VOXGATE_TOKEN"))
}

impl ServerProcess {
    /// Starts the transceiver with `--signal-listen 127.0.0.1:S --media-listen 127.0.0.1:P` plus
    /// `extra_args` and waits until `GET /healthz` is 200. Panics (with the log tail) otherwise.
    pub fn start(extra_args: &[&str]) -> ServerProcess {
        Self::start_with_env(extra_args, &[])
    }

    /// As [`ServerProcess::start`], with extra environment variables for the server.
    pub fn start_with_env(extra_args: &[&str], envs: &[(&str, &str)]) -> ServerProcess {
        Self::start_full(Ipv4Addr::LOCALHOST.into(), extra_args, envs)
    }

    /// As [`ServerProcess::start`], with the media loops on `media_ip` (e.g. `::1`).
    pub fn start_media_on(media_ip: IpAddr, extra_args: &[&str]) -> ServerProcess {
        Self::start_full(media_ip, extra_args, &[])
    }

    /// As [`ServerProcess::start`], run through `wrapper` (a command and its arguments that
    /// end by executing the rest of the command line, e.g. `setpriv --bounding-set=...`).
    pub fn start_via(wrapper: &[&str], extra_args: &[&str]) -> ServerProcess {
        Self::start_wrapped(wrapper, Ipv4Addr::LOCALHOST.into(), extra_args, &[])
    }

    fn start_full(media_ip: IpAddr, extra_args: &[&str], envs: &[(&str, &str)]) -> ServerProcess {
        Self::start_wrapped(&[], media_ip, extra_args, envs)
    }

    fn start_wrapped(
        wrapper: &[&str],
        media_ip: IpAddr,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> ServerProcess {
        // A port picked free can be taken by someone else before the server binds it: retry a few
        // times when the process exits during start-up.
        let mut last_err = String::new();
        for attempt in 0..3 {
            match Self::try_start(wrapper, media_ip, extra_args, envs) {
                Ok(server) => return server,
                Err(StartError::ExitedEarly(msg)) => {
                    last_err = msg;
                    if attempt < 2 {
                        eprintln!(
                            "support: transceiver exited during start-up (attempt {}), retrying",
                            attempt + 1
                        );
                    }
                }
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
        panic!("{last_err}");
    }

    fn try_start(
        wrapper: &[&str],
        media_ip: IpAddr,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<ServerProcess, StartError> {
        let signal_port = free_tcp_port();
        let media_base_port = free_udp_port_range(MEDIA_PORTS);
        let signal_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, signal_port));
        let grpc_port = free_tcp_port();
        let signal_url = format!("http://{signal_addr}");

        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&tmp).expect("create CARGO_TARGET_TMPDIR");
        let seq = SERVER_SEQ.fetch_add(1, Ordering::Relaxed);
        let test_name = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        let log_path = tmp.join(format!(
            "transceiver-{}-{}-{seq}.log",
            std::process::id(),
            test_name
        ));
        let log = File::create(&log_path).expect("create server log file");
        let log_err = log.try_clone().expect("clone log file handle");

        let mut cmd = match wrapper {
            [] => Command::new(transceiver_bin()),
            [program, args @ ..] => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(transceiver_bin());
                cmd
            }
        };
        cmd.arg("--signal-listen")
            .arg(signal_addr.to_string())
            .arg("--media-listen")
            .arg(SocketAddr::new(media_ip, media_base_port).to_string())
            .arg("--grpc-listen")
            .arg(format!("127.0.0.1:{grpc_port}"))
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        // The log is a file: no ANSI colour codes in it (tracing-subscriber honours NO_COLOR).
        cmd.env("NO_COLOR", "1");
        // Tests stop servers with SIGTERM and expect a prompt exit; a test of the drain
        // passes `--drain-timeout-secs` (a flag beats its env twin).
        cmd.env("VOXGATE_DRAIN_TIMEOUT_SECS", "0");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(|e| {
            StartError::Fatal(format!("cannot spawn {}: {e}", transceiver_bin().display()))
        })?;
        let grpc_url = format!("http://127.0.0.1:{grpc_port}");
        if let Some(token) = credential_of(extra_args, envs) {
            let mut known = GRPC_CREDENTIALS.lock().unwrap_or_else(|e| e.into_inner());
            known.retain(|(url, _)| *url != grpc_url);
            known.push((grpc_url.clone(), token));
        }
        let mut server = ServerProcess {
            signal_url,
            signal_addr,
            media_base_port,
            grpc_url,
            log_path,
            child,
        };

        let client = http_client();
        let health = format!("{}/healthz", server.signal_url);
        let deadline = Instant::now() + HEALTH_TIMEOUT;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                let msg = format!(
                    "transceiver exited during start-up ({status}); args: {extra_args:?}\n--- log {} ---\n{}",
                    server.log_path.display(),
                    server.log_tail(60)
                );
                return Err(StartError::ExitedEarly(msg));
            }
            if let Ok(resp) = client.get(&health).timeout(Duration::from_secs(1)).send() {
                if resp.status().as_u16() == 200 {
                    return Ok(server);
                }
            }
            if Instant::now() >= deadline {
                let msg = format!(
                    "transceiver did not answer 200 on {health} within {HEALTH_TIMEOUT:?}\n--- log {} ---\n{}",
                    server.log_path.display(),
                    server.log_tail(60)
                );
                return Err(StartError::Fatal(msg)); // `server` is dropped: the child is stopped
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `signal_url` + `path` (path starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.signal_url, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `lines` lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, lines)
    }

    /// Stops the server now (SIGTERM, up to 5 s, then SIGKILL); returns its exit status.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "support: transceiver (pid {}) ignored SIGTERM for 5 s, killing it",
            self.child.id()
        );
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

enum StartError {
    ExitedEarly(String),
    Fatal(String),
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "--- transceiver log {} (last 80 lines) ---\n{}\n--- end of transceiver log ---",
                self.log_path.display(),
                self.log_tail(80)
            );
        }
    }
}

/// The last `lines` lines of a file (reads at most its last 64 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return format!("(cannot open {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let _ = f.seek(SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ------------------------------------------------------------------------------------------------
// HTTP helpers (blocking; do not call from inside a tokio runtime)

pub fn http_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .expect("build reqwest blocking client")
}

/// A response read to the end.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {}", self.body))
    }
}

fn read_response(
    method: &str,
    url: &str,
    r: reqwest::Result<reqwest::blocking::Response>,
) -> HttpResponse {
    let resp = r.unwrap_or_else(|e| panic!("{method} {url} failed: {e}"));
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .text()
        .unwrap_or_else(|e| panic!("{method} {url}: reading body failed: {e}"));
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn with_token(
    rb: reqwest::blocking::RequestBuilder,
    token: Option<&str>,
) -> reqwest::blocking::RequestBuilder {
    match token {
        Some(t) => rb.bearer_auth(t),
        None => rb,
    }
}

/// A blocking client whose connections come from `ip` (a loopback address like 127.0.0.2).
pub fn client_from(ip: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .no_proxy()
        .local_address(ip.parse::<IpAddr>().expect("an IP address"))
        .build()
        .expect("build reqwest blocking client")
}

/// The server's `/metrics` text.
pub fn metrics(server: &ServerProcess) -> String {
    let r = http_get(&server.url("/metrics"), None);
    assert_eq!(r.status, 200, "GET /metrics");
    r.body
}

pub fn http_get(url: &str, token: Option<&str>) -> HttpResponse {
    read_response("GET", url, with_token(http_client().get(url), token).send())
}

/// GET `url`, expect 200 and a JSON body.
pub fn http_get_json(url: &str) -> serde_json::Value {
    http_get_json_auth(url, None)
}

pub fn http_get_json_auth(url: &str, token: Option<&str>) -> serde_json::Value {
    let r = http_get(url, token);
    assert_eq!(
        r.status, 200,
        "GET {url}: status {} body {}",
        r.status, r.body
    );
    r.json()
}

/// POST an SDP offer (`Content-Type: application/sdp`).
pub fn http_post_sdp(url: &str, sdp: &str, token: Option<&str>) -> HttpResponse {
    let rb = http_client()
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/sdp")
        .body(sdp.to_owned());
    read_response("POST", url, with_token(rb, token).send())
}

pub fn http_delete(url: &str, token: Option<&str>) -> HttpResponse {
    read_response(
        "DELETE",
        url,
        with_token(http_client().delete(url), token).send(),
    )
}

// ------------------------------------------------------------------------------------------------
// Subprocesses

/// What a subprocess did.
#[derive(Debug)]
pub struct ProcOutput {
    /// None when it was killed for running too long.
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl ProcOutput {
    pub fn success(&self) -> bool {
        self.status.map(|s| s.success()).unwrap_or(false)
    }

    /// The last stdout line that parses as a JSON object.
    pub fn json_line(&self) -> Option<serde_json::Value> {
        self.stdout
            .lines()
            .rev()
            .map(str::trim)
            .filter(|l| l.starts_with('{'))
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    }

    /// A readable summary for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "status: {:?}{}, elapsed {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            self.elapsed,
            self.stdout.trim_end(),
            self.stderr.trim_end()
        )
    }
}

/// Runs `cmd` (stdout/stderr captured, stdin null) in its own process group; kills the whole group
/// (SIGKILL) if it runs longer than `timeout`.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> ProcOutput {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let pgid = child.id() as libc::pid_t;
    let deadline = started + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(e) => panic!("waiting for {cmd:?}: {e}"),
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: kill(2) on the process group we created for this child.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // Anything the child left behind in its group (e.g. a browser) must not hold the pipes open.
    // SAFETY: as above; ESRCH when the group is already gone is fine.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    ProcOutput {
        status,
        timed_out,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

// ------------------------------------------------------------------------------------------------
// Fixtures

/// A minimal but complete audio offer (fake fingerprint: it never gets to DTLS).
pub const AUDIO_OFFER: &str = "v=0\r\n\
o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n\
s=-\r\n\
t=0 0\r\n\
a=group:BUNDLE 0\r\n\
a=msid-semantic: WMS\r\n\
m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\
c=IN IP4 0.0.0.0\r\n\
a=rtcp:9 IN IP4 0.0.0.0\r\n\
a=ice-ufrag:Kx9f\r\n\
a=ice-pwd:Nw5Yb2XzT0t1QZ0ScmTn3aJ8\r\n\
a=fingerprint:sha-256 6B:8B:5D:EA:59:04:20:23:29:C8:87:1C:CC:87:32:BE:DD:8C:66:A5:8E:50:55:EA:8C:D3:B6:5C:09:5E:D6:BC\r\n\
a=setup:actpass\r\n\
a=mid:0\r\n\
a=sendrecv\r\n\
a=rtcp-mux\r\n\
a=rtpmap:111 opus/48000/2\r\n\
a=fmtp:111 minptime=10;useinbandfec=1\r\n\
a=ssrc:1001 cname:test\r\n";

/// STUN Binding request with USERNAME = "{server_ufrag}:{client_ufrag}" and a dummy
/// MESSAGE-INTEGRITY (so a real ufrag would still fail authentication).
pub fn binding_request(server_ufrag: &str, txid: u32) -> Vec<u8> {
    let username = format!("{server_ufrag}:abcd");
    let ulen = username.len();
    let upad = (4 - ulen % 4) % 4;
    let attrs_len = 4 + ulen + upad + 4 + 20;
    let mut m = Vec::with_capacity(20 + attrs_len);
    m.extend_from_slice(&0x0001u16.to_be_bytes());
    m.extend_from_slice(&(attrs_len as u16).to_be_bytes());
    m.extend_from_slice(&0x2112_A442u32.to_be_bytes());
    m.extend_from_slice(&[0u8; 8]);
    m.extend_from_slice(&txid.to_be_bytes());
    m.extend_from_slice(&0x0006u16.to_be_bytes());
    m.extend_from_slice(&(ulen as u16).to_be_bytes());
    m.extend_from_slice(username.as_bytes());
    m.extend(std::iter::repeat_n(0u8, upad));
    m.extend_from_slice(&0x0008u16.to_be_bytes());
    m.extend_from_slice(&20u16.to_be_bytes());
    m.extend_from_slice(&[0x5a; 20]);
    m
}

/// Sum of every sample of `name` whose labels contain all of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|lab| l.contains(lab)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Drives the fleet until `pred` holds (checked every 50 ms), for at most `limit`.
pub fn drive_until(
    fleet: &mut voxgate_testkit::Fleet,
    limit: Duration,
    mut pred: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        fleet.run_for(Duration::from_millis(50));
        if pred() {
            return true;
        }
    }
    false
}

/// Polls `/metrics` until the sum of `name{labels}` reaches `want` (15 s at most); returns it.
pub fn wait_metric(server: &ServerProcess, name: &str, labels: &[&str], want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v = metric_sum(&metrics(server), name, labels);
        if v >= want || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET /v1/sessions/{id}` as JSON (asserting 200).
pub fn snapshot(server: &ServerProcess, id: &str) -> serde_json::Value {
    let r = http_get(&server.url(&format!("/v1/sessions/{id}")), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Drives the fleet until `pred(fleet)` holds (checked every 50 ms), for at most `limit`.
pub fn drive_fleet_until(
    fleet: &mut voxgate_testkit::Fleet,
    limit: Duration,
    mut pred: impl FnMut(&voxgate_testkit::Fleet) -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        fleet.run_for(Duration::from_millis(50));
        if pred(fleet) {
            return true;
        }
    }
    false
}

/// A fresh resume key (64 hex characters) in a file for `--resume-key-file`: its path, and the
/// key as the file holds it (for a test that mints credentials itself).
pub fn resume_key_file() -> (String, String) {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).expect("create CARGO_TARGET_TMPDIR");
    let path = dir.join(format!("resume-{}.key", &hex[..12]));
    std::fs::write(&path, &hex).expect("write the resume key");
    (path.to_string_lossy().into_owned(), hex)
}
