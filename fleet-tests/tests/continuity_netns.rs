//! The fault suite (issue 38, docs/continuity.md): one browser call lives through every fault
//! a voxgate deployment meets, in a fleet made of network namespaces, with headless Chromium
//! running the web client (`clients/web`) and two backend workers on the Python SDK.
//!
//! ```text
//!   client: the caller .64 (.65 after the address change) ─ policy routing = the UDP load balancer: VIP via relay1
//!     Chromium → http://127.0.0.1:8000 = TcpBalancer (signaling LB) → tx1 / tx2 :8080
//!   relay1 .11, relay2 .12 ─ VIP 10.231.1.100:3478 ─┐          redis .2 (route cache)
//!                                                   └─ internal UDP ─ tx1 .21, tx2 .22
//!   backend .31: w1, w2 = fleet-tests/backend/continuity_worker.py (echo), subscribed to both
//! ```
//!
//! Faults, in this order, each `VOXGATE_CONTINUITY_REPS` times (default 1):
//! - **relay kill**: kill -9 of the relay carrying the call; the load balancer moves the flow
//!   to the other relay, which finds the route in Redis (no signaling);
//! - **address change**: the caller's address is replaced (.64 ↔ .65); the client restarts ICE;
//! - **backend kill**: kill -9 of the worker serving the call; the transceiver re-dispatches it
//!   to the other worker with the held audio;
//! - **drain**: SIGTERM of the transceiver serving the call (a rolling deploy: it leaves the
//!   balancer's pool first); the client is told to move and resumes on the other one; the
//!   drained transceiver exits 0 and is started again;
//! - **transceiver kill**: kill -9 of the transceiver serving the call; the client finds its
//!   session gone and resumes on the other one with its resume credential.
//!
//! Each fault asserts the call goes on: the same call id at the backend, audio both ways
//! afterwards (heard by the browser, received by a worker), the browser's call connected and
//! never ended, no second call at the backend. Killed processes are started again before the
//! next fault. It measures, per fault: the gap the caller heard (the browser's WebAudio ear on
//! the remote stream), the gap in caller audio at the backend, and the caller audio lost; the
//! `continuity` scenario of `scripts/bench` runs it with 10 repetitions and reports medians and
//! p90s (`VOXGATE_CONTINUITY_REPORT` = a file for the JSON results).
//!
//! Needs root, redis-server, Chromium + node (tests/browser) and the .venv with the SDK
//! (scripts/setup). `FLEET_NETNS_HOLD_SECS=N` keeps a failed fleet up N seconds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use voxgate_fleet_tests::netns::HostSpec;
use voxgate_fleet_tests::process::describe;
use voxgate_fleet_tests::{binaries, metrics_text, Network, Proc};
use voxgate_testkit::tcp_balancer::TcpBalancer;
use voxgate_testkit::web_client::{connected, WebClient};

const VIP: &str = "10.231.1.100";
const RELAY_PORT: u16 = 3478;
const RELAY_INTERNAL_PORT: u16 = 3578;
const RELAY_METRICS_PORT: u16 = 9478;
const SIGNAL_PORT: u16 = 8080;
const MEDIA_PORT: u16 = 40000;
const GRPC_PORT: u16 = 50051;
const REDIS_PORT: u16 = 6379;
const REDIS_IP: &str = "10.231.0.2";
const RELAY_IPS: [&str; 2] = ["10.231.0.11", "10.231.0.12"];
const TX_IPS: [&str; 2] = ["10.231.0.21", "10.231.0.22"];
const BACKEND_IP: &str = "10.231.0.31";
/// The caller's two addresses (the address-change fault swaps them); both in `CALLER_NET`,
/// which the client host routes to the VIP through routing table `LB_TABLE`.
const CALLER_IPS: [&str; 2] = ["10.231.0.64", "10.231.0.65"];
const CALLER_NET: &str = "10.231.0.64/26";
const LB_TABLE: &str = "101";
/// The signaling load balancer, on the client host's loopback: the page's origin is then
/// `http://127.0.0.1`, a secure context (getUserMedia needs one).
const LB_ADDR: &str = "127.0.0.1:8000";
const SIGNAL_TOKEN: &str = "continuity-signal-token";
const GRPC_TOKEN: &str = "continuity-grpc-token";
const DRAIN_TIMEOUT_SECS: u64 = 30;
/// How long one fault may take to heal before the suite gives up on it.
const HEAL_WITHIN: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    RelayKill,
    AddressChange,
    BackendKill,
    Drain,
    TransceiverKill,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::RelayKill,
        Fault::AddressChange,
        Fault::BackendKill,
        Fault::Drain,
        Fault::TransceiverKill,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::RelayKill => "relay_kill",
            Fault::AddressChange => "address_change",
            Fault::BackendKill => "backend_kill",
            Fault::Drain => "drain",
            Fault::TransceiverKill => "transceiver_kill",
        }
    }
}

/// What one fault cost the call.
#[derive(Debug)]
struct Outcome {
    fault: Fault,
    rep: usize,
    /// Longest stretch without loud audio at the caller's ear around the fault.
    heard_gap_ms: u64,
    /// Longest stretch without loud caller audio at the backend around the fault.
    uplink_gap_ms: u64,
    /// Caller audio that never reached the backend: the SDK's `caller_audio_lost_ms` after a
    /// resume; otherwise the uplink gap (nothing is held or retransmitted on those paths).
    lost_ms: u64,
    /// Fault → the web client's `reconnecting` (it noticed and began to recover), by the page's
    /// wall clock (`None`: it never said so, e.g. a backend kill, which it need not notice).
    noticed_ms: Option<u64>,
    /// Address change only: fault → the browser's first candidate on its new address, i.e. when
    /// Chromium itself learnt of it (nothing can send from it before).
    address_known_ms: Option<u64>,
    /// Whether the call moved to a new session.
    resumed: bool,
}

#[test]
fn one_chromium_call_survives_relay_address_backend_drain_and_transceiver_faults() {
    voxgate_fleet_tests::netns::check_privileges().unwrap_or_else(|e| panic!("{e}"));
    for (b, _) in binaries::BINARIES {
        assert!(binaries::path(b).is_file());
    }
    let python = binaries::workspace_root().join(".venv/bin/python");
    assert!(python.is_file(), "no .venv: run scripts/setup first");
    let reps: usize = std::env::var("VOXGATE_CONTINUITY_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let net = Network::create(&hosts()).unwrap_or_else(|e| panic!("{e}"));
    net.ip(
        "client",
        &["rule", "add", "from", CALLER_NET, "lookup", LB_TABLE],
    )
    .expect("ip rule");
    route_vip(&net, 0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("continuity-netns");
    std::fs::create_dir_all(&dir).expect("log dir");
    let key = voxgate_fleet_tests::fleet_key::write(&dir);

    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            net.enter("client").expect("enter the client host");
            let mut fleet = Fleet::start(&net, &dir, &key, python);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_faults(&mut fleet, reps)
            }));
            if result.is_err() {
                hold_for_inspection();
                eprintln!("logs in {}:\n{}", dir.display(), fleet.tails());
            }
            result
        })
        .join()
        .expect("the client thread")
    });
    match outcome {
        Ok(outcomes) => report(&outcomes),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn hold_for_inspection() {
    if let Some(secs) = std::env::var("FLEET_NETNS_HOLD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        eprintln!("FLEET_NETNS_HOLD_SECS: holding the failed fleet for {secs} s");
        std::thread::sleep(Duration::from_secs(secs));
    }
}

fn hosts() -> Vec<HostSpec> {
    let cidr = |ip: &str| format!("{ip}/24");
    let vip = format!("{VIP}/32");
    let mut hosts = vec![HostSpec::new("redis", &[&cidr(REDIS_IP)])];
    for (i, ip) in RELAY_IPS.iter().enumerate() {
        hosts.push(HostSpec::new(&format!("relay{}", i + 1), &[&cidr(ip)]).with_loopback(&vip));
    }
    for (i, ip) in TX_IPS.iter().enumerate() {
        hosts.push(HostSpec::new(&format!("tx{}", i + 1), &[&cidr(ip)]));
    }
    hosts.push(HostSpec::new("backend", &[&cidr(BACKEND_IP)]));
    // The caller's address is the client host's only one: Chromium cannot keep a path through
    // another when the address changes.
    hosts.push(HostSpec::new("client", &[&cidr(CALLER_IPS[0])]));
    hosts
}

/// The UDP load balancer in front of the relays: the caller's flows reach the VIP through
/// relay `relay` (its main table has no route to the VIP, so only the caller's addresses
/// reach it). `route replace` is the balancer moving the flows after a failed health check.
fn route_vip(net: &Network, relay: usize) {
    let route = format!("{VIP}/32");
    net.ip(
        "client",
        &[
            "route",
            "replace",
            &route,
            "via",
            RELAY_IPS[relay],
            "table",
            LB_TABLE,
        ],
    )
    .expect("ip route replace");
    // Chromium gathers only on a host that has a default route; the client host's goes to the
    // same relay (every address reaches the VIP the same way).
    net.ip(
        "client",
        &["route", "replace", "default", "via", RELAY_IPS[relay]],
    )
    .expect("ip route replace default");
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(50), ok)
}

// ---- the fleet ----------------------------------------------------------------------------

/// Every process of the fleet, restartable; the balancer; the logs of every worker process.
struct Fleet<'a> {
    net: &'a Network,
    dir: &'a Path,
    key: &'a Path,
    python: PathBuf,
    http: reqwest::blocking::Client,
    _redis: Proc,
    relays: [Option<Proc>; 2],
    tx: [Option<Proc>; 2],
    workers: [Option<Proc>; 2],
    /// Every worker log, killed processes' too (the call's history is spread over them).
    worker_logs: Vec<PathBuf>,
    starts: usize,
    lb: TcpBalancer,
    /// The relay the caller's flows go through now.
    relay_now: usize,
    /// Which of `CALLER_IPS` the caller has now.
    caller_ip_now: usize,
}

fn tx_addr(i: usize) -> SocketAddr {
    format!("{}:{SIGNAL_PORT}", TX_IPS[i])
        .parse()
        .expect("addr")
}

fn tx_url(i: usize) -> String {
    format!("http://{}:{SIGNAL_PORT}", TX_IPS[i])
}

impl<'a> Fleet<'a> {
    fn start(net: &'a Network, dir: &'a Path, key: &'a Path, python: PathBuf) -> Fleet<'a> {
        let redis_bin = ["/usr/bin/redis-server", "/usr/sbin/redis-server"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect("redis-server: scripts/setup installs it");
        let redis = net
            .spawn(
                "redis",
                "redis",
                Command::new(redis_bin)
                    .args(["--bind", REDIS_IP, "--port", &REDIS_PORT.to_string()])
                    .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"]),
                dir.join("redis.log"),
            )
            .expect("spawn redis");
        assert!(
            redis.wait_for_log("Ready to accept connections", 1, Duration::from_secs(10)),
            "redis did not start\n{}",
            redis.tail(20)
        );
        let lb = TcpBalancer::start(LB_ADDR.parse().unwrap(), vec![tx_addr(0), tx_addr(1)])
            .expect("signaling balancer");
        let mut fleet = Fleet {
            net,
            dir,
            key,
            python,
            http: reqwest::blocking::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(3))
                .build()
                .expect("http client"),
            _redis: redis,
            relays: [None, None],
            tx: [None, None],
            workers: [None, None],
            worker_logs: Vec::new(),
            starts: 0,
            lb,
            relay_now: 0,
            caller_ip_now: 0,
        };
        for i in 0..2 {
            fleet.start_relay(i);
            fleet.start_tx(i);
        }
        for i in 0..2 {
            fleet.start_worker(i);
        }
        for i in 0..2 {
            fleet.wait_relay_up(i);
            fleet.wait_tx_serving(i);
        }
        fleet
    }

    fn log(&mut self, name: &str) -> PathBuf {
        self.starts += 1;
        self.dir.join(format!("{name}-{}.log", self.starts))
    }

    fn start_relay(&mut self, i: usize) {
        let name = format!("relay{}", i + 1);
        let log = self.log(&name);
        let tx_cidrs = TX_IPS.map(|ip| format!("{ip}/32")).join(",");
        let p = self
            .net
            .spawn(
                &name,
                &name,
                Command::new(binaries::path("relay"))
                    .args(["--listen", &format!("{VIP}:{RELAY_PORT}")])
                    .args([
                        "--internal-listen",
                        &format!("{}:{RELAY_INTERNAL_PORT}", RELAY_IPS[i]),
                    ])
                    .args(["--workers", "1"])
                    .args(["--transceivers", &tx_cidrs])
                    .args([
                        "--metrics-listen",
                        &format!("{}:{RELAY_METRICS_PORT}", RELAY_IPS[i]),
                    ])
                    .args(["--metrics-interval-ms", "100"])
                    .env("VOXGATE_RELAY_FLEET_KEY_FILE", self.key)
                    .env(
                        "VOXGATE_RELAY_REDIS",
                        format!("redis://{REDIS_IP}:{REDIS_PORT}"),
                    )
                    .env("RUST_LOG", "info"),
                log,
            )
            .expect("spawn relay");
        self.relays[i] = Some(p);
    }

    fn start_tx(&mut self, i: usize) {
        let name = format!("tx{}", i + 1);
        let log = self.log(&name);
        let ip = TX_IPS[i];
        let p = self
            .net
            .spawn(
                &name,
                &name,
                Command::new(binaries::path("transceiver"))
                    .args(["--signal-listen", &format!("{ip}:{SIGNAL_PORT}")])
                    .args(["--public-url", &tx_url(i)])
                    .args(["--media-listen", &format!("0.0.0.0:{MEDIA_PORT}")])
                    .args(["--internal-ip", ip])
                    .args(["--advertise", &format!("{VIP}:{RELAY_PORT}")])
                    .args([
                        "--relays",
                        &RELAY_IPS.map(|ip| format!("{ip}/32")).join(","),
                    ])
                    .args(["--grpc-listen", &format!("{ip}:{GRPC_PORT}")])
                    .args(["--loops", "1", "--no-pin"])
                    .args(["--drain-timeout-secs", &DRAIN_TIMEOUT_SECS.to_string()])
                    .env("VOXGATE_FLEET_KEY_FILE", self.key)
                    .env("VOXGATE_TOKEN", SIGNAL_TOKEN)
                    .env("VOXGATE_GRPC_TOKEN", GRPC_TOKEN)
                    .env("RUST_LOG", "info"),
                log,
            )
            .expect("spawn transceiver");
        self.tx[i] = Some(p);
    }

    fn start_worker(&mut self, i: usize) {
        let name = format!("w{}", i + 1);
        let log = self.log(&name);
        let targets = TX_IPS.map(|ip| format!("{ip}:{GRPC_PORT}")).join(",");
        let script = binaries::workspace_root().join("fleet-tests/backend/continuity_worker.py");
        let p = self
            .net
            .spawn(
                "backend",
                &name,
                Command::new(&self.python)
                    .arg(script)
                    .args([name.as_str(), targets.as_str()])
                    .env("VOXGATE_GRPC_TOKEN", GRPC_TOKEN)
                    .env("PYTHONUNBUFFERED", "1"),
                log.clone(),
            )
            .expect("spawn worker");
        self.worker_logs.push(log);
        self.workers[i] = Some(p);
    }

    fn get(&self, url: &str) -> Option<(u16, String)> {
        let r = self.http.get(url).send().ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().unwrap_or_default()))
    }

    fn metric(&self, base: &str, name: &str) -> f64 {
        self.get(&format!("{base}/metrics"))
            .and_then(|(_, body)| metrics_text::sum(&body, name))
            .unwrap_or(-1.0)
    }

    fn wait_relay_up(&self, i: usize) {
        let base = format!("http://{}:{RELAY_METRICS_PORT}", RELAY_IPS[i]);
        let up = wait_until(Duration::from_secs(15), || {
            self.metric(&base, "voxgate_relay_redis_connected") >= 1.0
        });
        assert!(up, "relay{} not up with Redis\n{}", i + 1, self.tails());
    }

    /// Until transceiver `i` is ready and both workers are subscribed to it.
    fn wait_tx_serving(&self, i: usize) {
        let ready = wait_until(Duration::from_secs(20), || {
            self.get(&format!("{}/readyz", tx_url(i)))
                .is_some_and(|(s, _)| s == 200)
                && self.metric(&tx_url(i), "voxgate_backend_workers") >= 2.0
        });
        assert!(
            ready,
            "tx{} not ready with both workers\n{}",
            i + 1,
            self.tails()
        );
    }

    fn tails(&self) -> String {
        let mut out = String::new();
        for p in self
            .relays
            .iter()
            .chain(&self.tx)
            .chain(&self.workers)
            .flatten()
        {
            out.push_str(&p.tail(20));
            out.push('\n');
        }
        out
    }

    /// Every JSON event the workers printed, in time order.
    fn worker_events(&self) -> Vec<Value> {
        let mut events: Vec<Value> = self
            .worker_logs
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .flat_map(|text| {
                text.lines()
                    .filter(|l| l.starts_with('{'))
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        events.sort_by(|a, b| a["t"].as_f64().partial_cmp(&b["t"].as_f64()).unwrap());
        events
    }
}

/// The index of the transceiver behind gRPC target `target` ("10.231.0.21:50051").
fn tx_of_target(target: &str) -> usize {
    TX_IPS
        .iter()
        .position(|ip| target.starts_with(ip))
        .unwrap_or_else(|| panic!("unknown target {target}"))
}

fn ms_at(e: &Value) -> u64 {
    (e["t"].as_f64().unwrap_or(0.0) * 1000.0) as u64
}

// ---- the call -----------------------------------------------------------------------------

/// Where the call is now, by the backend's account: the last `call` or `resumed` event.
struct Whereabouts {
    tx: usize,
    worker: usize,
    session_id: String,
}

fn whereabouts(fleet: &Fleet, call_id: &str) -> Whereabouts {
    let events = fleet.worker_events();
    let last = events
        .iter()
        .rev()
        .find(|e| e["call_id"] == call_id && (e["ev"] == "call" || e["ev"] == "resumed"))
        .unwrap_or_else(|| panic!("the backend never served {call_id}"));
    let worker = last["worker"].as_str().unwrap_or_default();
    Whereabouts {
        tx: tx_of_target(last["target"].as_str().unwrap_or_default()),
        worker: if worker == "w1" { 0 } else { 1 },
        session_id: last["session_id"].as_str().unwrap_or_default().to_owned(),
    }
}

fn heard(client: &mut WebClient, since: u64) -> Value {
    client.run(
        json!({"cmd": "heard", "since": since}),
        Duration::from_secs(10),
    )
}

/// Until the caller hears `ms` of loud audio after `after` and a worker got `frames` loud
/// caller frames of the call in one second that started after `after`: audio both ways.
fn wait_both_ways(fleet: &Fleet, client: &mut WebClient, call_id: &str, after: u64, what: &str) {
    let deadline = Instant::now() + HEAL_WITHIN;
    loop {
        let h = heard(client, after);
        let down = h["loudMs"].as_u64().unwrap_or(0) >= 1000;
        let up = fleet.worker_events().iter().any(|e| {
            e["ev"] == "loud"
                && e["call_id"] == call_id
                && ms_at(e) > after + 1000
                && e["frames"].as_u64().unwrap_or(0) >= 40
        });
        if down && up {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: audio did not flow both ways within {HEAL_WITHIN:?} (heard {h}, uplink at \
             the backend: {up})\n{}",
            fleet.tails()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn run_faults(fleet: &mut Fleet, reps: usize) -> Vec<Outcome> {
    let mut client = WebClient::start_with(
        &fleet.lb.url(),
        Duration::from_secs(240 + 60 * reps as u64),
        Some(SIGNAL_TOKEN),
    );
    let call_id = connected(&mut client, None);
    let t_connected = wall_ms();
    wait_both_ways(fleet, &mut client, &call_id, t_connected, "the call");
    let baseline = heard(&mut client, t_connected + 1000)["maxGapMs"]
        .as_u64()
        .unwrap_or(0);
    println!("call {call_id} connected; baseline heard gap {baseline} ms");

    let mut outcomes = Vec::new();
    for rep in 0..reps {
        for fault in Fault::ALL {
            let o = inject_and_heal(fleet, &mut client, &call_id, fault, rep);
            println!(
                "{:>16} rep {rep}: heard gap {} ms, uplink gap {} ms, caller audio lost {} ms{}{}",
                fault.name(),
                o.heard_gap_ms,
                o.uplink_gap_ms,
                o.lost_ms,
                o.noticed_ms
                    .map(|n| format!(", client noticed at {n} ms"))
                    .unwrap_or_default()
                    + &o.address_known_ms
                        .map(|n| format!(", browser learnt its new address at {n} ms"))
                        .unwrap_or_default(),
                if o.resumed { " (resumed)" } else { "" }
            );
            outcomes.push(o);
        }
    }

    // One call from start to end: the backend never saw another, nor an end.
    let events = fleet.worker_events();
    let calls: Vec<&Value> = events.iter().filter(|e| e["ev"] == "call").collect();
    assert!(
        calls.iter().all(|e| e["call_id"] == call_id.as_str()),
        "the backend saw calls other than {call_id}: {calls:?}"
    );
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["ev"] == "ended" && e["call_id"] == call_id.as_str())
        .collect();
    assert!(ended.is_empty(), "the call ended at the backend: {ended:?}");
    client.run(json!({"cmd": "hangup"}), Duration::from_secs(10));
    outcomes
}

fn inject_and_heal(
    fleet: &mut Fleet,
    client: &mut WebClient,
    call_id: &str,
    fault: Fault,
    rep: usize,
) -> Outcome {
    let before = whereabouts(fleet, call_id);
    let resumes_before = resumes(fleet, call_id);
    let t0 = wall_ms();
    match fault {
        Fault::RelayKill => {
            let r = fleet.relay_now;
            fleet.relays[r].as_mut().expect("relay").kill();
            route_vip(fleet.net, 1 - r);
            fleet.relay_now = 1 - r;
        }
        Fault::AddressChange => {
            let (old, new) = (fleet.caller_ip_now, 1 - fleet.caller_ip_now);
            // The old address is the primary: without promotion its removal takes the new
            // (secondary) one with it.
            let ns = fleet.net.ns("client");
            let promote = "net.ipv4.conf.eth0.promote_secondaries=1";
            let ok = Command::new("ip")
                .args(["netns", "exec", &ns, "sysctl", "-qw", promote])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "sysctl {promote} in {ns}");
            let add = format!("{}/24", CALLER_IPS[new]);
            let del = format!("{}/24", CALLER_IPS[old]);
            fleet
                .net
                .ip("client", &["addr", "add", &add, "dev", "eth0"])
                .expect("add the new address");
            fleet
                .net
                .ip("client", &["addr", "del", &del, "dev", "eth0"])
                .expect("remove the old address");
            // Routes through eth0 may go with the old address: put the balancer's back.
            route_vip(fleet.net, fleet.relay_now);
            fleet.caller_ip_now = new;
        }
        Fault::BackendKill => fleet.workers[before.worker].as_mut().expect("w").kill(),
        Fault::Drain => {
            fleet.lb.set_upstreams(vec![tx_addr(1 - before.tx)]);
            let tx = fleet.tx[before.tx].as_ref().expect("tx");
            tx.signal(libc::SIGTERM).expect("SIGTERM");
        }
        Fault::TransceiverKill => fleet.tx[before.tx].as_mut().expect("tx").kill(),
    }

    // The call goes on: where it is expected to be, audio both ways.
    let what = format!("{} rep {rep}", fault.name());
    match fault {
        Fault::BackendKill => {
            let moved = wait_until(HEAL_WITHIN, || {
                whereabouts(fleet, call_id).worker != before.worker
            });
            assert!(
                moved,
                "{what}: the other worker never took the call\n{}",
                fleet.tails()
            );
        }
        Fault::Drain | Fault::TransceiverKill => {
            let moved = wait_until(HEAL_WITHIN, || {
                let now = whereabouts(fleet, call_id);
                now.tx != before.tx && now.session_id != before.session_id
            });
            assert!(
                moved,
                "{what}: the call did not resume on the other transceiver\n{}",
                fleet.tails()
            );
        }
        Fault::RelayKill | Fault::AddressChange => {}
    }
    wait_both_ways(fleet, client, call_id, t0, &what);
    let stats = client.stats();
    assert_eq!(stats["state"], "connected", "{what}: {stats}");
    let after = whereabouts(fleet, call_id);
    let resumed = resumes(fleet, call_id) > resumes_before;
    if matches!(fault, Fault::RelayKill | Fault::BackendKill) {
        assert!(
            !resumed,
            "{what}: the call resumed, its session should have lived"
        );
        assert_eq!(after.session_id, before.session_id, "{what}");
    }

    let outcome = measure(fleet, client, call_id, fault, rep, t0, resumed);
    restore(fleet, fault, &before);
    outcome
}

fn resumes(fleet: &Fleet, call_id: &str) -> usize {
    fleet
        .worker_events()
        .iter()
        .filter(|e| e["ev"] == "resumed" && e["call_id"] == call_id)
        .count()
}

/// The gaps around a fault injected at `t0`, read once audio flows again.
fn measure(
    fleet: &Fleet,
    client: &mut WebClient,
    call_id: &str,
    fault: Fault,
    rep: usize,
    t0: u64,
    resumed: bool,
) -> Outcome {
    // From a little before the fault: the window starts inside loud audio.
    let heard_gap_ms = heard(client, t0.saturating_sub(500))["maxGapMs"]
        .as_u64()
        .unwrap_or(0);
    let events = fleet.worker_events();
    let of_call = |e: &&Value| e["call_id"] == call_id && ms_at(e) >= t0;
    let gap_event = events
        .iter()
        .filter(of_call)
        .filter(|e| e["ev"] == "gap")
        .filter_map(|e| e["ms"].as_u64())
        .max()
        .unwrap_or(0);
    // A new worker's uplink starts at its first loud frame: the gap runs from the kill.
    let new_worker_start = events
        .iter()
        .filter(of_call)
        .find(|e| e["ev"] == "first_loud")
        .map(|e| ms_at(e).saturating_sub(t0))
        .unwrap_or(0);
    let uplink_gap_ms = if fault == Fault::BackendKill {
        new_worker_start.max(gap_event)
    } else {
        gap_event
    };
    let lost_ms = events
        .iter()
        .filter(of_call)
        .find(|e| e["ev"] == "resumed")
        .and_then(|e| e["caller_audio_lost_ms"].as_u64())
        .unwrap_or(uplink_gap_ms);
    // `heard` and `stats` above read the page's events up to now.
    let noticed_ms = client
        .seen()
        .iter()
        .filter(|e| e["event"] == "state" && e["state"] == "reconnecting")
        .filter_map(|e| e["wall"].as_f64())
        .map(|wall| wall as u64)
        .find(|wall| *wall >= t0)
        .map(|wall| wall - t0);
    let address_known_ms = (fault == Fault::AddressChange)
        .then(|| {
            let new_ip = CALLER_IPS[fleet.caller_ip_now].to_string();
            client
                .seen()
                .iter()
                .filter(|e| e["event"] == "candidate")
                .filter(|e| e["candidate"].as_str().is_some_and(|c| c.contains(&new_ip)))
                .filter_map(|e| e["wall"].as_f64())
                .map(|wall| wall as u64)
                .find(|wall| *wall >= t0)
                .map(|wall| wall - t0)
        })
        .flatten();
    if std::env::var_os("VOXGATE_CONTINUITY_TRACE").is_some() {
        let trace: Vec<String> = client
            .seen()
            .iter()
            .filter(|e| e["wall"].as_f64().is_some_and(|w| w as u64 >= t0))
            .map(|e| {
                let what = e["state"]
                    .as_str()
                    .or(e["candidate"].as_str())
                    .unwrap_or("-");
                format!(
                    "+{}ms {} {what}",
                    e["wall"].as_f64().unwrap() as u64 - t0,
                    e["event"]
                )
            })
            .collect();
        println!("{} rep {rep} trace: {}", fault.name(), trace.join(" | "));
    }
    Outcome {
        fault,
        rep,
        heard_gap_ms,
        uplink_gap_ms,
        lost_ms,
        noticed_ms,
        address_known_ms,
        resumed,
    }
}

/// Puts back what the fault took away, so the next fault meets a whole fleet.
fn restore(fleet: &mut Fleet, fault: Fault, before: &Whereabouts) {
    match fault {
        Fault::RelayKill => {
            let dead = 1 - fleet.relay_now;
            fleet.start_relay(dead);
            fleet.wait_relay_up(dead);
        }
        Fault::AddressChange => {}
        Fault::BackendKill => {
            fleet.start_worker(before.worker);
            for tx in 0..2 {
                fleet.wait_tx_serving(tx);
            }
        }
        Fault::Drain => {
            let p = fleet.tx[before.tx].as_mut().expect("tx");
            let status = p.wait_exit(Duration::from_secs(DRAIN_TIMEOUT_SECS + 5));
            assert!(
                status.is_some_and(|s| s.success()),
                "the drained tx{} did not exit 0 once its call moved: {}\n{}",
                before.tx + 1,
                status.map_or("still running".into(), describe),
                p.tail(30)
            );
            fleet.start_tx(before.tx);
            fleet.wait_tx_serving(before.tx);
            fleet.lb.set_upstreams(vec![tx_addr(0), tx_addr(1)]);
        }
        Fault::TransceiverKill => {
            fleet.start_tx(before.tx);
            fleet.wait_tx_serving(before.tx);
        }
    }
}

// ---- the report ---------------------------------------------------------------------------

fn report(outcomes: &[Outcome]) {
    let json: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            json!({
                "fault": o.fault.name(),
                "rep": o.rep,
                "heard_gap_ms": o.heard_gap_ms,
                "uplink_gap_ms": o.uplink_gap_ms,
                "lost_ms": o.lost_ms,
                "noticed_ms": o.noticed_ms,
                "address_known_ms": o.address_known_ms,
                "resumed": o.resumed,
            })
        })
        .collect();
    if let Ok(path) = std::env::var("VOXGATE_CONTINUITY_REPORT") {
        std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap())
            .unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    println!(
        "continuity: {} faults survived, 0 calls lost",
        outcomes.len()
    );
}
