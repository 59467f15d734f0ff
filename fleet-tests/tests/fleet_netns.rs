//! The voxgate fleet on several hosts made of network namespaces (issue 6): Redis, two relays
//! sharing one VIP, three transceivers, an echo-bot backend and a client host, all on one
//! bridge. The real binaries run in their hosts; the client is voxgate-testkit's str0m `Fleet`,
//! driven from a thread that entered the client host.
//!
//! ```text
//!   client: one address per caller  ─┐  policy routing = the region's UDP load balancer:
//!     A 10.231.0.64/26 (even callers)  │  A → VIP via relay1, B → VIP via relay2
//!     B 10.231.0.128/26 (odd callers) ─┤  (failover: A → VIP via relay2)
//!                                      │
//!   relay1 .11 ─ VIP 10.231.1.100:3478 on lo ─┐          redis .2 (route cache)
//!   relay2 .12 ─ VIP 10.231.1.100:3478 on lo ─┼── internal UDP ── tx1 .21, tx2 .22, tx3 .23
//!                                             │                   (2 media loops each)
//!   backend .31: echo-bot ──── gRPC ──────────┘ (subscribed to every transceiver)
//! ```
//!
//! One test, in stages (one fleet is costly to build): 60 sessions spread round robin over
//! the transceivers and the two relays, each caller's tone burst comes back from the echo-bot
//! at the caller's own frequency; relay1 is killed while its callers talk and hear a reply
//! (the echo-bot runs `--continuous`, so a caller who talks on hears an unbroken reply), the
//! "load balancer" moves them to relay2, media resumes from the Redis route with no new
//! signaling (the gap is measured at the client, from the downlink); then tx3 is drained with
//! SIGTERM: it refuses new sessions (`/readyz` and POST 503), its calls keep working until
//! they are DELETEd, and it exits 0.
//!
//! Needs root (network namespaces) and `redis-server` (scripts/setup installs it). On a failure,
//! `FLEET_NETNS_HOLD_SECS=N` keeps the fleet up N seconds for inspection (`ip netns exec vgft-...`).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use voxgate_fleet_tests::metrics_text;
use voxgate_fleet_tests::netns::HostSpec;
use voxgate_fleet_tests::process::describe;
use voxgate_fleet_tests::{binaries, Network, Proc};
use voxgate_testkit::{signal, ClientSession, Fleet, SessionConfig};

const VIP: &str = "10.231.1.100";
const RELAY_PORT: u16 = 3478;
const RELAY_INTERNAL_PORT: u16 = 3578;
const RELAY_METRICS_PORT: u16 = 9478;
const SIGNAL_PORT: u16 = 8080;
const MEDIA_PORT: u16 = 40000;
const GRPC_PORT: u16 = 50051;
const REDIS_PORT: u16 = 6379;

/// Sessions of the first stages (the drain stage opens a few more).
const SESSIONS: usize = 60;

const REDIS_IP: &str = "10.231.0.2";
const RELAY_IPS: [&str; 2] = ["10.231.0.11", "10.231.0.12"];
const TX_IPS: [&str; 3] = ["10.231.0.21", "10.231.0.22", "10.231.0.23"];
const BACKEND_IP: &str = "10.231.0.31";
/// The client host's own address (signaling goes from here).
const CLIENT_IP: &str = "10.231.0.41";
/// Caller addresses: caller i is alone on `client_ip(i)`, as real callers are on theirs (the
/// relay caps new flows per source address). The load balancer sends group g to relay g.
const CLIENT_GROUPS: [&str; 2] = ["10.231.0.64/26", "10.231.0.128/26"];
/// Routing table per client group in the client host.
const LB_TABLES: [&str; 2] = ["101", "102"];
/// Callers, including those opened during the drain.
const CALLERS: usize = SESSIONS + 6;

/// Caller i's address: even callers in group A, odd ones in group B.
fn client_ip(i: usize) -> Ipv4Addr {
    assert!(i < CALLERS);
    Ipv4Addr::new(10, 231, 0, (64 + 64 * (i % 2) + i / 2) as u8)
}

const SIGNAL_TOKEN: &str = "fleet-netns-signal-token";
const GRPC_TOKEN: &str = "fleet-netns-grpc-token";
/// Long enough that the drained transceiver can only exit early because its sessions ended.
const DRAIN_TIMEOUT_SECS: u64 = 60;
/// The echo-bot (`--continuous`) cuts speech into pieces this long and plays each while the
/// caller goes on talking: in the failover stage uplink and downlink flow together, without a
/// pause, for as long as the callers talk. Longer than the echo rounds' 1 s bursts.
const BOT_MAX_UTTERANCE_SECS: u64 = 2;
/// Silence that ends an utterance for the echo-bot: long enough that a scheduling hiccup on a
/// loaded machine does not split a caller's tone (or end the failover stage's long utterance).
const BOT_SILENCE_MS: u64 = 1000;
/// A 20 ms frame louder than this is "loud" (the test tone is about -13.5 dBFS).
const LOUD_DBFS: f32 = -30.0;

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
    let mut client = vec![cidr(CLIENT_IP)];
    client.extend((0..CALLERS).map(|i| cidr(&client_ip(i).to_string())));
    let client: Vec<&str> = client.iter().map(String::as_str).collect();
    hosts.push(HostSpec::new("client", &client));
    hosts
}

/// The client host's routing stands in for the region's UDP load balancer in front of the
/// relays: flows from client group g go to relay g (as an ECMP hash would split them).
fn route_vip_per_client_group(net: &Network) {
    for g in 0..2 {
        net.ip(
            "client",
            &[
                "rule",
                "add",
                "from",
                CLIENT_GROUPS[g],
                "lookup",
                LB_TABLES[g],
            ],
        )
        .expect("ip rule");
        net.ip(
            "client",
            &[
                "route",
                "add",
                &format!("{VIP}/32"),
                "via",
                RELAY_IPS[g],
                "table",
                LB_TABLES[g],
            ],
        )
        .expect("ip route");
    }
}

/// What the load balancer does when a relay fails its health checks: the flows of client
/// group `group` go to relay `to` from now on. Client sockets are untouched.
fn move_vip_next_hop(net: &Network, group: usize, to: usize) {
    net.ip(
        "client",
        &[
            "route",
            "replace",
            &format!("{VIP}/32"),
            "via",
            RELAY_IPS[to],
            "table",
            LB_TABLES[group],
        ],
    )
    .expect("ip route replace");
}

struct Processes {
    redis: Proc,
    relays: Vec<Option<Proc>>,
    tx: Vec<Proc>,
    bot: Proc,
}

impl Processes {
    fn all(&self) -> Vec<&Proc> {
        let mut v = vec![&self.redis];
        v.extend(self.relays.iter().flatten());
        v.extend(self.tx.iter());
        v.push(&self.bot);
        v
    }

    fn tails(&self) -> String {
        self.all()
            .iter()
            .map(|p| p.tail(25))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn log_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fleet-netns");
    std::fs::create_dir_all(&dir).expect("log dir");
    dir
}

fn start_processes(net: &Network, dir: &Path, key: &Path) -> Processes {
    let redis_bin = which("redis-server").unwrap_or_else(|| {
        panic!("redis-server not found: scripts/setup installs it (apt-get install redis-server)")
    });
    let redis = net
        .spawn(
            "redis",
            "redis",
            Command::new(redis_bin)
                .args(["--bind", REDIS_IP, "--port", &REDIS_PORT.to_string()])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                .args(["--daemonize", "no"]),
            dir.join("redis.log"),
        )
        .expect("spawn redis");
    assert!(
        redis.wait_for_log("Ready to accept connections", 1, Duration::from_secs(10)),
        "redis did not start\n{}",
        redis.tail(20)
    );

    let tx_cidrs = TX_IPS.map(|ip| format!("{ip}/32")).join(",");
    let relays = RELAY_IPS
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let name = format!("relay{}", i + 1);
            let p = net
                .spawn(
                    &name,
                    &name,
                    Command::new(binaries::path("relay"))
                        .args(["--listen", &format!("{VIP}:{RELAY_PORT}")])
                        .args(["--internal-listen", &format!("{ip}:{RELAY_INTERNAL_PORT}")])
                        .args(["--workers", "2"])
                        .args(["--transceivers", &tx_cidrs])
                        .args(["--metrics-listen", &format!("{ip}:{RELAY_METRICS_PORT}")])
                        .args(["--metrics-interval-ms", "100"])
                        .env("VOXGATE_RELAY_FLEET_KEY_FILE", key)
                        .env(
                            "VOXGATE_RELAY_REDIS",
                            format!("redis://{REDIS_IP}:{REDIS_PORT}"),
                        )
                        .env("RUST_LOG", "info"),
                    dir.join(format!("{name}.log")),
                )
                .expect("spawn relay");
            Some(p)
        })
        .collect();

    let tx = TX_IPS
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let name = format!("tx{}", i + 1);
            net.spawn(
                &name,
                &name,
                Command::new(binaries::path("transceiver"))
                    .args(["--signal-listen", &format!("{ip}:{SIGNAL_PORT}")])
                    .args(["--media-listen", &format!("0.0.0.0:{MEDIA_PORT}")])
                    .args(["--internal-ip", ip])
                    .args(["--advertise", &format!("{VIP}:{RELAY_PORT}")])
                    .args([
                        "--relays",
                        &RELAY_IPS.map(|ip| format!("{ip}/32")).join(","),
                    ])
                    .args(["--grpc-listen", &format!("{ip}:{GRPC_PORT}")])
                    .args(["--loops", "2", "--no-pin"])
                    .args(["--drain-timeout-secs", &DRAIN_TIMEOUT_SECS.to_string()])
                    .env("VOXGATE_FLEET_KEY_FILE", key)
                    .env("VOXGATE_TOKEN", SIGNAL_TOKEN)
                    .env("VOXGATE_GRPC_TOKEN", GRPC_TOKEN)
                    .env("RUST_LOG", "info"),
                dir.join(format!("{name}.log")),
            )
            .expect("spawn transceiver")
        })
        .collect();

    let grpc_urls = TX_IPS
        .map(|ip| format!("http://{ip}:{GRPC_PORT}"))
        .join(",");
    let bot = net
        .spawn(
            "backend",
            "echo-bot",
            Command::new(binaries::path("echo-bot"))
                .args(["--transceiver", &grpc_urls])
                .args(["--worker-id", "fleet-bot"])
                .args(["--capacity", "200"])
                // 16 kHz PCM: a third of the bridge's work at 48 kHz, ample for the tones.
                .args(["--sample-rate", "16000"])
                .args(["--silence-ms", &BOT_SILENCE_MS.to_string()])
                .args(["--max-utterance-secs", &BOT_MAX_UTTERANCE_SECS.to_string()])
                .arg("--continuous")
                .env("VOXGATE_ECHO_TOKEN", GRPC_TOKEN)
                .env("RUST_LOG", "info"),
            dir.join("echo-bot.log"),
        )
        .expect("spawn echo-bot");

    Processes {
        redis,
        relays,
        tx,
        bot,
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

// ---- HTTP from the client host ------------------------------------------------------------

fn http_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http client")
}

fn get(http: &reqwest::blocking::Client, url: &str) -> Option<(u16, String)> {
    let r = http.get(url).bearer_auth(SIGNAL_TOKEN).send().ok()?;
    let status = r.status().as_u16();
    Some((status, r.text().unwrap_or_default()))
}

fn tx_url(tx: usize) -> String {
    format!("http://{}:{SIGNAL_PORT}", TX_IPS[tx])
}

fn relay_metrics(http: &reqwest::blocking::Client, relay: usize) -> String {
    get(
        http,
        &format!("http://{}:{RELAY_METRICS_PORT}/metrics", RELAY_IPS[relay]),
    )
    .map(|(_, body)| body)
    .unwrap_or_default()
}

fn relay_metric(http: &reqwest::blocking::Client, relay: usize, name: &str) -> f64 {
    metrics_text::sum(&relay_metrics(http, relay), name).unwrap_or(0.0)
}

/// The non-zero samples of every running relay, for failure messages.
fn relay_diagnostics(http: &reqwest::blocking::Client) -> String {
    (0..RELAY_IPS.len())
        .map(|r| {
            let text = relay_metrics(http, r);
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.ends_with(" 0") && !l.contains("_created"))
                .filter(|l| !l.contains("bytes_") && !l.contains("_batches"))
                .collect();
            format!("--- relay{} metrics ---\n{}", r + 1, lines.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each transceiver's drop counters and session gauges, for failure messages.
fn tx_diagnostics(http: &reqwest::blocking::Client) -> String {
    (0..TX_IPS.len())
        .map(|tx| {
            let text = get(http, &format!("{}/metrics", tx_url(tx)))
                .map(|(_, b)| b)
                .unwrap_or_default();
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("voxgate_dropped") || l.starts_with("voxgate_sessions"))
                .filter(|l| !l.ends_with(" 0"))
                .collect();
            format!("--- tx{} metrics ---\n{}", tx + 1, lines.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tx_metric(http: &reqwest::blocking::Client, tx: usize, name: &str) -> f64 {
    get(http, &format!("{}/metrics", tx_url(tx)))
        .and_then(|(_, body)| metrics_text::sum(&body, name))
        .unwrap_or(0.0)
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(50), ok)
}

// ---- audio -----------------------------------------------------------------------------------

/// Session i's tone: 300, 320, 340 ... Hz, so a reply can only be the caller's own audio.
fn tone(i: usize) -> f32 {
    300.0 + 20.0 * i as f32
}

fn level_dbfs(frame: &[i16]) -> f32 {
    20.0 * (signal::rms(frame).max(1e-3) / 32768.0).log10()
}

fn is_loud(frame: &[i16]) -> bool {
    level_dbfs(frame) > LOUD_DBFS
}

/// The loud 20 ms frames of `pcm`, concatenated.
fn loud_audio(pcm: &[i16]) -> Vec<i16> {
    pcm.chunks_exact(signal::FRAME_SAMPLES)
        .filter(|f| is_loud(f))
        .flatten()
        .copied()
        .collect()
}

fn loud_frames(pcm: &[i16]) -> usize {
    pcm.chunks_exact(signal::FRAME_SAMPLES)
        .filter(|f| is_loud(f))
        .count()
}

/// Every caller in `callers` speaks a 1 s burst of its tone; the echo-bot plays back what it
/// heard as speech after the silence. Asserts each caller hears most of a second of audio at
/// its own frequency (0.6-1.2 s: the bot's VAD trims the onset).
fn echo_round(fleet: &mut Fleet, callers: &[usize], tones: &[f32], label: &str) {
    let burst = Duration::from_secs(1);
    assert!(
        settle(fleet, callers, Duration::from_secs(10)),
        "{label}: replies still playing before the round"
    );
    let start: Vec<usize> = callers
        .iter()
        .map(|&i| fleet.session(i).received_pcm().len())
        .collect();
    // Packet counts are cheap to poll; the audio itself is analysed once, at the end.
    let arrivals: Vec<usize> = callers
        .iter()
        .map(|&i| fleet.session(i).arrival_times().len())
        .collect();
    let now = Instant::now();
    for &i in callers {
        fleet.session_mut(i).start_audio(now, burst);
    }
    let heard_all = fleet.run_until(now + burst + Duration::from_secs(8), |f| {
        callers
            .iter()
            .zip(&arrivals)
            .all(|(&i, &n)| f.session(i).arrival_times().len() >= n + 30)
    });
    fleet.run_for(Duration::from_millis(300));
    // Analysing 60 seconds of audio takes a while in a debug build: do it on another thread
    // while this one keeps the sessions alive (consent checks, RTCP).
    let heard: Vec<Vec<i16>> = callers
        .iter()
        .zip(&start)
        .map(|(&i, &s)| fleet.session(i).received_pcm()[s..].to_vec())
        .collect();
    let analysis = std::thread::spawn(move || {
        heard
            .iter()
            .map(|pcm| {
                let hz = signal::dominant_frequency(&loud_audio(pcm), signal::SAMPLE_RATE);
                let peak = pcm
                    .chunks_exact(signal::FRAME_SAMPLES)
                    .map(level_dbfs)
                    .fold(f32::NEG_INFINITY, f32::max);
                (loud_frames(pcm), hz, peak)
            })
            .collect::<Vec<_>>()
    });
    fleet.run_until(Instant::now() + Duration::from_secs(120), |_| {
        analysis.is_finished()
    });
    let results = analysis.join().expect("audio analysis");
    let mut bad = Vec::new();
    if !heard_all {
        for (&i, &n) in callers.iter().zip(&arrivals) {
            let got = fleet.session(i).arrival_times().len() - n;
            if got < 30 {
                bad.push(format!("session {i}: only {got} reply packets"));
            }
        }
    }
    let mut worst_hz = 0.0f32;
    for ((&i, &(loud, hz, peak)), &s) in callers.iter().zip(&results).zip(&start) {
        worst_hz = worst_hz.max((hz - tones[i]).abs());
        if !(30..=60).contains(&loud) || (hz - tones[i]).abs() > 8.0 {
            let server = fleet
                .server_state(i)
                .map(|v| format!("{} {}", v["counters"], v["bridge"]))
                .unwrap_or_else(|e| e.to_string());
            bad.push(format!(
                "session {i}: {loud} loud frames at {hz:.1} Hz (sent {} Hz), loudest frame \
                 {peak:.1} dBFS, connected {}, {} new samples, downlink {:?}, server {server}",
                tones[i],
                fleet.session(i).is_connected(),
                fleet.session(i).received_pcm().len() - s,
                fleet.session(i).downlink_counters(),
            ));
        }
    }
    assert!(
        heard_all && bad.is_empty(),
        "{label}: {} of {} callers did not hear their own tone back:\n{}",
        bad.len(),
        callers.len(),
        bad.join("\n")
    );
    println!(
        "{label}: {} callers heard their own tone back (worst frequency error {worst_hz:.1} Hz) \
         in {:.1} s",
        callers.len(),
        now.elapsed().as_secs_f32()
    );
}

// ---- the test --------------------------------------------------------------------------------

#[test]
fn sixty_sessions_survive_relay_failover_and_transceiver_drain() {
    let started = Instant::now();
    voxgate_fleet_tests::netns::check_privileges().unwrap_or_else(|e| panic!("{e}"));
    // Built before the network, so a build never runs under the lock.
    for (b, _) in binaries::BINARIES {
        assert!(binaries::path(b).is_file());
    }
    let net = Network::create(&hosts()).unwrap_or_else(|e| panic!("{e}"));
    route_vip_per_client_group(&net);
    let dir = log_dir();
    let key = voxgate_fleet_tests::fleet_key::write(&dir);
    let mut procs = start_processes(&net, &dir, &key);

    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            net.enter("client").expect("enter the client host");
            scenario(&net, &mut procs)
        })
        .join()
    });
    if let Err(panic) = outcome {
        // Debugging aid: keep the failed fleet up for inspection (`ip netns exec vgft-...`).
        if let Some(secs) = std::env::var("FLEET_NETNS_HOLD_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            eprintln!("FLEET_NETNS_HOLD_SECS: holding the failed fleet for {secs} s");
            std::thread::sleep(Duration::from_secs(secs));
        }
        eprintln!(
            "process logs (full logs in {}):\n{}",
            dir.display(),
            procs.tails()
        );
        std::panic::resume_unwind(panic);
    }
    println!(
        "fleet test done in {:.1} s",
        started.elapsed().as_secs_f32()
    );
    // procs drop first (SIGTERM), then the network (namespaces deleted).
    drop(procs);
    drop(net);
}

fn scenario(net: &Network, procs: &mut Processes) {
    let http = http_client();

    // ---- the fleet comes up ----
    for tx in 0..TX_IPS.len() {
        let ready = wait_until(Duration::from_secs(20), || {
            get(&http, &format!("{}/readyz", tx_url(tx))).is_some_and(|(s, _)| s == 200)
        });
        assert!(ready, "tx{} not ready\n{}", tx + 1, procs.tx[tx].tail(20));
    }
    for r in 0..RELAY_IPS.len() {
        let up = wait_until(Duration::from_secs(10), || {
            relay_metric(&http, r, "voxgate_relay_redis_connected") >= 1.0
        });
        assert!(up, "relay{} not up with Redis\n{}", r + 1, procs.tails());
    }
    assert!(
        procs
            .bot
            .wait_for_log("registered", TX_IPS.len(), Duration::from_secs(20)),
        "echo-bot did not register with every transceiver\n{}",
        procs.bot.tail(30)
    );

    // ---- 60 sessions: round robin over transceivers, alternating client groups/relays ----
    let tones: Vec<f32> = (0..CALLERS).map(tone).collect();
    let mut fleet = Fleet::new().expect("fleet");
    let t_open = Instant::now();
    for (i, &tone) in tones.iter().enumerate().take(SESSIONS) {
        let idx = fleet
            .open(caller_config(i % TX_IPS.len(), i, tone))
            .unwrap_or_else(|e| panic!("session {i} POST to tx{}: {e}", i % 3 + 1));
        assert_eq!(idx, i);
    }
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        (0..SESSIONS).all(|i| f_connected(f, i))
    });
    if !connected {
        let down: Vec<String> = (0..SESSIONS)
            .filter(|&i| !f_connected(&fleet, i))
            .map(|i| format!("{i} (tx{}, relay{})", i % 3 + 1, i % 2 + 1))
            .collect();
        panic!(
            "{} of {SESSIONS} sessions connected; not: {}\n{}\n{}",
            fleet.connected_count(),
            down.join(", "),
            relay_diagnostics(&http),
            tx_diagnostics(&http)
        );
    }
    println!(
        "{SESSIONS} sessions signaled and connected through the relays in {:.1} s",
        t_open.elapsed().as_secs_f32()
    );
    let attached = procs
        .bot
        .wait_for_log("session attached", SESSIONS, Duration::from_secs(15));
    assert!(attached, "echo-bot attached fewer than {SESSIONS} sessions");

    // Clients only ever talk to the VIP; every transceiver holds a third of the sessions and
    // sees each caller's true address; each relay carries its half of the flows.
    let vip: SocketAddr = format!("{VIP}:{RELAY_PORT}").parse().expect("vip");
    for i in 0..SESSIONS {
        let dest = fleet.session(i).destinations();
        assert!(
            dest.iter().all(|d| *d == vip),
            "session {i} sent to {dest:?}, not only the VIP"
        );
        let state = fleet.server_state(i).expect("GET session");
        let local = fleet.session(i).local_addr().to_string();
        let addrs = state["client_addrs"].to_string();
        assert!(
            addrs.contains(&local),
            "tx saw {addrs} for session {i}, not the caller's {local}"
        );
    }
    for tx in 0..TX_IPS.len() {
        let active = tx_metric(&http, tx, "voxgate_sessions_active");
        assert_eq!(active, 20.0, "tx{} holds {active} sessions", tx + 1);
    }
    for r in 0..RELAY_IPS.len() {
        let ok = wait_until(Duration::from_secs(3), || {
            relay_metric(&http, r, "voxgate_relay_flows_active") == (SESSIONS / 2) as f64
        });
        assert!(
            ok,
            "relay{} has {} flows, not {}",
            r + 1,
            relay_metric(&http, r, "voxgate_relay_flows_active"),
            SESSIONS / 2
        );
    }

    let all: Vec<usize> = (0..SESSIONS).collect();
    echo_round(&mut fleet, &all, &tones, "audio end to end");

    // ---- relay1 dies while its callers talk and hear a reply ----
    relay_failover(net, procs, &http, &mut fleet);
    echo_round(&mut fleet, &all, &tones, "audio after the failover");

    // ---- tx3 drains ----
    drain_tx3(procs, &http, &mut fleet, &tones);

    for i in 0..fleet.len() {
        if fleet.session(i).is_connected() {
            let _ = fleet.delete(i);
        }
    }
}

fn f_connected(fleet: &Fleet, i: usize) -> bool {
    fleet.session(i).is_connected() && fleet.session(i).channel_open()
}

fn caller_config(tx: usize, caller: usize, tone_hz: f32) -> SessionConfig {
    SessionConfig {
        base_url: tx_url(tx),
        token: Some(SIGNAL_TOKEN.to_owned()),
        bind_ip: IpAddr::V4(client_ip(caller)),
        tone_hz,
        amplitude: 0.3,
        send_for: Duration::ZERO,
        data_channel: true,
        precoded_uplink: true,
        keep_pcm: Duration::from_secs(120),
        ..SessionConfig::default()
    }
}

/// Server-side uplink audio packets of each session in `sessions` (GET /v1/sessions/{id}).
fn uplink_packets(fleet: &Fleet, sessions: &[usize]) -> Vec<u64> {
    sessions
        .iter()
        .map(|&i| {
            let state = fleet
                .server_state(i)
                .unwrap_or_else(|e| panic!("GET session {i}: {e}"));
            state["counters"]["audio_packets_in"]
                .as_u64()
                .unwrap_or_else(|| panic!("session {i}: no counters.audio_packets_in in {state}"))
        })
        .collect()
}

fn relay_failover(
    net: &Network,
    procs: &mut Processes,
    http: &reqwest::blocking::Client,
    fleet: &mut Fleet,
) {
    let moved: Vec<usize> = (0..SESSIONS).filter(|i| i % 2 == 0).collect();
    let ids: Vec<String> = (0..SESSIONS)
        .map(|i| fleet.session(i).session_id().to_owned())
        .collect();
    let installed_before = relay_metric(http, 1, "voxgate_relay_routes_installed_total");
    let established_before = relay_metric(http, 1, "voxgate_relay_flows_established_total");
    let created_before: f64 = (0..TX_IPS.len())
        .map(|tx| tx_metric(http, tx, "voxgate_sessions_created_total"))
        .sum();
    let arrivals_before: Vec<usize> = (0..SESSIONS)
        .map(|i| fleet.session(i).arrival_times().len())
        .collect();

    // Relay1's callers talk on; the bot plays their speech back piece by piece, so from
    // BOT_MAX_UTTERANCE_SECS on each of them hears an unbroken reply while still talking.
    let now = Instant::now();
    for &i in &moved {
        fleet.session_mut(i).start_audio(now, Duration::MAX);
    }
    let replying =
        |f: &Fleet, i: usize| f.session(i).arrival_times().len() >= arrivals_before[i] + 10;
    let all_replying = fleet
        .run_until(now + Duration::from_secs(BOT_MAX_UTTERANCE_SECS + 8), |f| {
            moved.iter().all(|&i| replying(f, i))
        });
    let deaf: Vec<usize> = moved
        .iter()
        .copied()
        .filter(|&i| !replying(fleet, i))
        .collect();
    assert!(
        all_replying,
        "relay1's callers {deaf:?} heard no reply while talking\n{}",
        tx_diagnostics(http)
    );
    // Uplink as the transceivers count it, then a moment for the fleet to catch up (the GETs
    // paused it) so arrival times around the kill are true.
    let uplink_before = uplink_packets(fleet, &moved);
    fleet.run_for(Duration::from_millis(500));

    let relay1 = procs.relays[0].as_mut().expect("relay1 runs");
    relay1.kill();
    let t_kill = Instant::now();
    move_vip_next_hop(net, 0, 1);
    let t_switch = Instant::now();
    procs.relays[0] = None;

    // The callers talk on until every one of them hears the reply again through relay2 (or
    // the deadline passes), then one more second.
    let resumed = |f: &Fleet, i: usize| {
        f.session(i)
            .arrival_times()
            .last()
            .is_some_and(|t| *t >= t_switch)
    };
    fleet.run_until(t_switch + Duration::from_secs(10), |f| {
        moved.iter().all(|&i| resumed(f, i))
    });
    fleet.run_for(Duration::from_secs(1));
    for &i in &moved {
        fleet.session_mut(i).stop_audio();
    }

    // The downlink gap of every moved caller: its last packet before the kill to its first
    // after the switch. The reply never pauses while the caller talks, so the gap is the
    // outage, not where the kill fell in a reply.
    let mut gaps = Vec::new();
    let mut stuck = Vec::new();
    for &i in &moved {
        let times = &fleet.session(i).arrival_times()[arrivals_before[i]..];
        let last = times
            .iter()
            .filter(|t| **t <= t_kill)
            .max()
            .expect("a replying caller has downlink before the kill");
        match times.iter().filter(|t| **t >= t_switch).min() {
            Some(first) => gaps.push((*first - *last, i)),
            None => stuck.push(i),
        }
    }
    assert!(
        stuck.is_empty(),
        "no downlink after the failover for sessions {stuck:?}\n{}",
        relay_diagnostics(http)
    );
    gaps.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (min, median, max) = (gaps[0].0, gaps[gaps.len() / 2].0, gaps[gaps.len() - 1].0);
    // The downlink follows the uplink to relay2 with its first media packet (a trusted relay
    // moves the reply path on media that authenticates), not at the caller's next consent
    // check, which comes seconds apart.
    assert!(
        max < Duration::from_secs(1),
        "a moved caller heard nothing for {:.0} ms (session {}): the downlink waited for a \
         consent check",
        ms(max),
        gaps[gaps.len() - 1].1
    );

    // The replies end; the next round starts from quiet.
    assert!(
        settle(
            fleet,
            &moved,
            Duration::from_secs(BOT_MAX_UTTERANCE_SECS + 6)
        ),
        "the bot's replies did not end"
    );
    // Uplink: every moved caller's audio reached its transceiver through relay2.
    let uplink_after = uplink_packets(fleet, &moved);
    let short: Vec<String> = moved
        .iter()
        .zip(uplink_before.iter().zip(&uplink_after))
        .filter(|(_, (b, a))| **a < **b + 40)
        .map(|(i, (b, a))| format!("{i}: {} packets", a - b))
        .collect();
    assert!(
        short.is_empty(),
        "uplink audio did not resume through relay2 for {}\n{}",
        short.join(", "),
        relay_diagnostics(http)
    );

    let installed =
        relay_metric(http, 1, "voxgate_relay_routes_installed_total") - installed_before;
    let established =
        relay_metric(http, 1, "voxgate_relay_flows_established_total") - established_before;
    let created_after: f64 = (0..TX_IPS.len())
        .map(|tx| tx_metric(http, tx, "voxgate_sessions_created_total"))
        .sum();
    println!(
        "relay failover: {} callers moved to relay2; uplink resumed for all; downlink gap at the \
         client (last packet before the kill to first after the switch, {} callers) min {:.0} ms, median {:.0} ms, max {:.0} ms (session {}); kill → switch took \
         {:.1} ms; relay2 restored {installed} routes from Redis, the rest by their hint",
        moved.len(),
        gaps.len(),
        ms(min),
        ms(median),
        ms(max),
        gaps[gaps.len() - 1].1,
        ms(t_switch - t_kill)
    );

    for (i, id) in ids.iter().enumerate() {
        let s = fleet.session(i);
        assert!(s.is_connected(), "session {i} lost after the failover");
        assert_eq!(s.session_id(), id, "session {i} was re-signaled");
        assert_eq!(s.report().ice_restarts, 0, "session {i} ICE-restarted");
    }
    assert_eq!(
        created_after, created_before,
        "sessions were created during the failover"
    );
    // Every moved flow is back on relay2, and no new session was signaled. A flow is restored
    // either from the Redis route on its first RTP packet or by the hint in a binding request
    // that reaches relay2 first. Which comes first is the client's timing, not the product's:
    // a client whose checks went unanswered through the dead relay re-checks at once, and on a
    // loaded machine its check often leaves before its next RTP packet (beside a build, many
    // or all of the flows came back by hint, relay2 then making no Redis lookup at all). Both
    // are as fast, so the outcome asked here is that every moved flow came back; the split is
    // reported above, and the relay's own tests prove a restore from Redis alone, with no
    // binding request (`route_cache.rs`).
    assert!(
        established >= moved.len() as f64,
        "relay2 re-established only {established} flows for {} moved callers\n{}",
        moved.len(),
        relay_diagnostics(http)
    );
    // The uplink resumes from the Redis route at once (checked above). The downlink follows
    // the session's reply path, which moves to relay2 only when the transceiver answers an
    // authenticated binding request through it (issue 11: no unauthenticated datagram may move
    // it). A client re-checks at once when its checks went unanswered through the dead relay,
    // or else at its next consent check: the gap is tens of ms or up to one consent interval.
    // RFC 7675 spaces consent checks 4-6 s apart at most.
    assert!(
        median < Duration::from_secs(6),
        "the downlink took {:.0} ms (median) to resume, more than a consent interval\n{}",
        ms(median),
        relay_diagnostics(http)
    );
}

/// Drives the fleet until none of `sessions` has received downlink audio for 600 ms.
fn settle(fleet: &mut Fleet, sessions: &[usize], timeout: Duration) -> bool {
    fleet.run_until(Instant::now() + timeout, |f| {
        let now = Instant::now();
        sessions.iter().all(|&i| {
            f.session(i)
                .arrival_times()
                .last()
                .is_none_or(|t| now.saturating_duration_since(*t) > Duration::from_millis(600))
        })
    })
}

fn drain_tx3(
    procs: &mut Processes,
    http: &reqwest::blocking::Client,
    fleet: &mut Fleet,
    tones: &[f32],
) {
    const TX3: usize = 2;
    let on_tx3: Vec<usize> = (0..SESSIONS).filter(|i| i % 3 == TX3).collect();
    procs.tx[TX3].signal(libc::SIGTERM).expect("SIGTERM tx3");
    let t_term = Instant::now();

    let unready = wait_until(Duration::from_secs(3), || {
        get(http, &format!("{}/readyz", tx_url(TX3))).is_some_and(|(s, _)| s == 503)
    });
    assert!(unready, "tx3 /readyz is not 503 after SIGTERM");

    // A POST with a valid offer is refused with 503 + Retry-After.
    let cfg = caller_config(TX3, 0, 440.0);
    let (_session, offer) = ClientSession::new(
        &cfg,
        SocketAddr::new(IpAddr::V4(client_ip(0)), 9),
        Instant::now(),
    )
    .expect("offer");
    let resp = http
        .post(format!("{}/v1/sessions", tx_url(TX3)))
        .bearer_auth(SIGNAL_TOKEN)
        .header("content-type", "application/sdp")
        .body(offer)
        .send()
        .expect("POST to tx3");
    assert_eq!(resp.status().as_u16(), 503, "POST to a draining tx3");
    assert!(
        resp.headers().contains_key("retry-after"),
        "503 without Retry-After"
    );

    // New sessions, signaled round robin with retry on 503 (as a signaling load balancer
    // would): none lands on tx3.
    let mut new = Vec::new();
    let mut refused = 0;
    for k in 0..CALLERS - SESSIONS {
        let i = SESSIONS + k;
        let mut landed = None;
        for attempt in 0..TX_IPS.len() {
            let tx = (k + attempt) % TX_IPS.len();
            match fleet.open(caller_config(tx, i, tones[i])) {
                Ok(idx) => {
                    assert_eq!(idx, i);
                    landed = Some(tx);
                    break;
                }
                Err(e) if e.status() == Some(503) => {
                    assert_eq!(tx, TX3, "tx{} refused a session: {e}", tx + 1);
                    refused += 1;
                }
                Err(e) => panic!("new session {k} on tx{}: {e}", tx + 1),
            }
        }
        let tx = landed.expect("no transceiver took a new session");
        assert_ne!(tx, TX3, "a new session landed on the draining tx3");
        new.push(i);
    }
    assert_eq!(
        refused, 2,
        "tx3 should have refused exactly the 2 POSTs aimed at it"
    );
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(15), |f| {
        new.iter().all(|&i| f.session(i).is_connected())
    });
    assert!(connected, "new sessions did not connect");
    assert!(
        procs.bot.wait_for_log(
            "session attached",
            SESSIONS + new.len(),
            Duration::from_secs(10)
        ),
        "echo-bot did not attach the new sessions"
    );

    // tx3's calls go on during the drain, as do the new ones elsewhere.
    let mut callers = on_tx3.clone();
    callers.extend(&new);
    echo_round(
        fleet,
        &callers,
        tones,
        "during tx3's drain (its calls + 6 new)",
    );
    assert!(procs.tx[TX3].is_running(), "tx3 exited with calls up");

    // Its calls end; it exits 0 at once, long before the drain timeout.
    for &i in &on_tx3 {
        fleet
            .delete(i)
            .unwrap_or_else(|e| panic!("DELETE session {i}: {e}"));
    }
    let t_deleted = Instant::now();
    let status = procs.tx[TX3].wait_exit(Duration::from_secs(15));
    let exit_after = t_deleted.elapsed();
    let status = status.unwrap_or_else(|| {
        panic!(
            "tx3 still runs 15 s after its last session ended\n{}",
            procs.tx[TX3].tail(30)
        )
    });
    assert!(
        status.success(),
        "tx3 ended with {}\n{}",
        describe(status),
        procs.tx[TX3].tail(30)
    );
    assert!(
        t_term.elapsed() < Duration::from_secs(DRAIN_TIMEOUT_SECS),
        "tx3 waited for the drain timeout"
    );
    println!(
        "drain: tx3 refused new sessions (readyz 503, POST 503 + Retry-After, {refused} retried \
         elsewhere), kept {} calls working, exited 0 {:.0} ms after the last one ended \
         ({:.1} s after SIGTERM)",
        on_tx3.len(),
        exit_after.as_secs_f64() * 1000.0,
        t_term.elapsed().as_secs_f32()
    );

    let lost: HashSet<usize> = (0..fleet.len())
        .filter(|i| !on_tx3.contains(i) && !fleet.session(*i).is_connected())
        .collect();
    assert!(
        lost.is_empty(),
        "sessions on other transceivers lost: {lost:?}"
    );
}
