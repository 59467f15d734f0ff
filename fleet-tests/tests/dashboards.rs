//! The dashboard and the alerting rules of deploy/ run against the real thing (issue 39,
//! item 5): a relay, a transceiver and the echo-bot on loopback, three callers talking through
//! the relay, one offer refused at capacity, one signaling request with a wrong token, one
//! backend with a wrong gRPC credential and one call hung up, all scraped every second by a
//! real Prometheus server that also loads deploy/prometheus/alerts.yaml. Then every dashboard
//! query, and every alert's signal (its expression without the threshold), must return data
//! through `/api/v1/query`, finite numbers only; Prometheus must evaluate every rule without
//! error; `promtool check rules` must pass and `promtool check metrics` must find nothing to
//! say about either `/metrics`.
//!
//! Needs `prometheus` and `promtool` (Debian's `prometheus` package; scripts/setup installs it).

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use voxgate_fleet_tests::prometheus::{Job, Prometheus};
use voxgate_fleet_tests::promql::{self, AlertRule, PanelQuery};
use voxgate_fleet_tests::{binaries, metrics_text, Proc};
use voxgate_testkit::{Fleet, SessionConfig};

const TOKEN: &str = "dashboards-token";
/// A made-up key for this test's fleet only.
const FLEET_KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f05f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// Admission's cap: the fourth caller is refused.
const MAX_SESSIONS: usize = 3;

/// Metrics the dashboard and the rules already query but no binary exposes yet (another
/// change adds them). Their queries are not required to return data; the test fails once a
/// metric here appears in the transceiver's `/metrics`, so delete its line then and its
/// queries are checked like every other.
const NOT_YET_EXPOSED: &[&str] = &[];

fn deploy(path: &str) -> PathBuf {
    binaries::workspace_root().join("deploy").join(path)
}

fn work_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dashboards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("work dir");
    dir
}

/// A loopback port free for both UDP and TCP a moment ago.
fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let port = udp.local_addr().expect("addr").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client")
}

fn get(http: &reqwest::blocking::Client, url: &str) -> Option<String> {
    let r = http.get(url).send().ok()?;
    r.status().is_success().then(|| r.text().ok()).flatten()
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(200), ok)
}

/// The relay, the transceiver behind it and its backends, with their addresses.
struct Stack {
    relay: Proc,
    tx: Proc,
    bots: Vec<Proc>,
    relay_metrics: SocketAddr,
    signal: SocketAddr,
}

impl Stack {
    fn tails(&self) -> String {
        std::iter::once(&self.relay)
            .chain(std::iter::once(&self.tx))
            .chain(&self.bots)
            .map(|p| p.tail(30))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn start_stack(dir: &Path) -> Stack {
    let (relay_port, relay_metrics, signal, media, grpc) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let relay = Proc::spawn(
        "relay",
        None,
        Command::new(binaries::path("relay"))
            .args(["--listen", &addr(relay_port).to_string()])
            .args(["--internal-listen", "127.0.0.1:0"])
            .args(["--workers", "1"])
            .args(["--transceivers", "127.0.0.0/8"])
            .args(["--metrics-listen", &addr(relay_metrics).to_string()])
            .args(["--metrics-interval-ms", "100"])
            .env("VOXGATE_RELAY_FLEET_KEY", FLEET_KEY)
            .env("RUST_LOG", "info"),
        dir.join("relay.log"),
    )
    .expect("spawn relay");
    let tx = Proc::spawn(
        "transceiver",
        None,
        Command::new(binaries::path("transceiver"))
            .args(["--signal-listen", &addr(signal).to_string()])
            .args(["--media-listen", &addr(media).to_string()])
            .args(["--grpc-listen", &addr(grpc).to_string()])
            .args(["--loops", "1", "--no-pin"])
            .args(["--advertise", &addr(relay_port).to_string()])
            .args(["--relays", "127.0.0.0/8"])
            .args(["--max-sessions", &MAX_SESSIONS.to_string()])
            .env("VOXGATE_FLEET_KEY", FLEET_KEY)
            .env("VOXGATE_TOKEN", TOKEN)
            // Stopped with SIGTERM on drop: exit at once rather than drain.
            .env("VOXGATE_DRAIN_TIMEOUT_SECS", "0")
            .env("RUST_LOG", "info"),
        dir.join("transceiver.log"),
    )
    .expect("spawn transceiver");
    let bot = |name: &str, token: &str| {
        Proc::spawn(
            name,
            None,
            Command::new(binaries::path("echo-bot"))
                .args(["--transceiver", &format!("http://{}", addr(grpc))])
                .args(["--capacity", "10", "--silence-ms", "300"])
                .env("VOXGATE_ECHO_TOKEN", token)
                .env("RUST_LOG", "info"),
            dir.join(format!("{name}.log")),
        )
        .expect("spawn echo-bot")
    };
    // The second presents a wrong credential: gRPC refusals by reason get a series.
    let bots = vec![
        bot("echo-bot", TOKEN),
        bot("echo-bot-bad-token", "not-the-token"),
    ];
    Stack {
        relay,
        tx,
        bots,
        relay_metrics: addr(relay_metrics),
        signal: addr(signal),
    }
}

/// `promtool ARGS` with `stdin`; its exit status and everything it printed.
fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup installs it)");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input
            .write_all(text.as_bytes())
            .expect("write promtool stdin");
    }
    drop(input);
    let out = child.wait_with_output().expect("promtool output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// One query the test requires data from: where it comes from and the PromQL.
struct Check {
    origin: String,
    expr: String,
}

fn checks(panels: &[PanelQuery], rules: &[AlertRule]) -> (Vec<Check>, Vec<Check>) {
    let all = panels
        .iter()
        .map(|q| Check {
            origin: format!("panel {:?}", q.panel),
            expr: q.expr.clone(),
        })
        .chain(rules.iter().flat_map(|r| {
            promql::signals(&r.expr).into_iter().map(|s| Check {
                origin: format!("alert {}", r.name),
                expr: s,
            })
        }));
    all.partition(|c| !NOT_YET_EXPOSED.iter().any(|m| c.expr.contains(m)))
}

/// The checks whose query does not (yet) return data, with what it returned.
fn without_data(prom: &Prometheus, checks: &[Check]) -> Vec<String> {
    checks
        .iter()
        .filter_map(|c| match prom.query(&c.expr) {
            Ok(samples) if samples.is_empty() => {
                Some(format!("{}: {} → no data", c.origin, c.expr))
            }
            Ok(samples) if samples.iter().any(|s| !s.value.is_finite()) => {
                Some(format!("{}: {} → {samples:?}", c.origin, c.expr))
            }
            Ok(_) => None,
            Err(e) => Some(format!("{}: {e}", c.origin)),
        })
        .collect()
}

#[test]
fn every_dashboard_query_and_alert_signal_returns_data_from_a_real_relay_and_transceiver() {
    let panels = promql::dashboard_queries(
        &std::fs::read_to_string(deploy("grafana/voxgate.json")).expect("dashboard"),
    )
    .expect("dashboard JSON");
    let alerts_file = deploy("prometheus/alerts.yaml");
    let rules = promql::alert_rules(&std::fs::read_to_string(&alerts_file).expect("rules"))
        .expect("rules YAML");
    assert!(
        panels.len() >= 30,
        "only {} dashboard queries",
        panels.len()
    );
    assert!(rules.len() >= 10, "only {} alerts", rules.len());
    for r in &rules {
        assert!(r.for_.is_some(), "alert {} has no `for:`", r.name);
        assert!(
            r.has_summary && r.has_description,
            "alert {} lacks annotations",
            r.name
        );
    }
    let (ok, out) = promtool(&["check", "rules", &alerts_file.to_string_lossy()], None);
    assert!(ok, "promtool check rules: {out}");
    let (ok, out) = promtool(
        &[
            "check",
            "config",
            &deploy("prometheus/prometheus.yml").to_string_lossy(),
        ],
        None,
    );
    assert!(ok, "promtool check config: {out}");

    let dir = work_dir();
    let stack = start_stack(&dir);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&stack, &dir, &panels, &rules, &alerts_file)
    }));
    if let Err(panic) = outcome {
        eprintln!("--- logs ---\n{}", stack.tails());
        std::panic::resume_unwind(panic);
    }
}

fn run(stack: &Stack, dir: &Path, panels: &[PanelQuery], rules: &[AlertRule], alerts: &Path) {
    let http = http();
    let tx_metrics_url = format!("http://{}/metrics", stack.signal);
    let relay_metrics_url = format!("http://{}/metrics", stack.relay_metrics);
    let ready = wait_until(Duration::from_secs(60), || {
        get(&http, &relay_metrics_url).is_some()
            && get(&http, &tx_metrics_url)
                .and_then(|t| metrics_text::sum(&t, "voxgate_backend_workers"))
                .is_some_and(|n| n >= 1.0)
    });
    assert!(ready, "relay, transceiver or echo-bot did not come up");

    // Both /metrics are clean for promtool (classic text without an Accept header), and
    // Prometheus's own Accept header gets OpenMetrics.
    for url in [&tx_metrics_url, &relay_metrics_url] {
        let text = get(&http, url).expect("scrape");
        let (ok, out) = promtool(&["check", "metrics"], Some(&text));
        assert!(
            ok && out.trim().is_empty(),
            "promtool check metrics {url}:\n{out}"
        );
        for family in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
        ] {
            assert!(
                metrics_text::sum(&text, family).is_some_and(|v| v > 0.0),
                "{url}: {family}"
            );
        }
        let om = http
            .get(url.as_str())
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
            )
            .send()
            .expect("scrape as OpenMetrics");
        let ctype = om.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            ctype.starts_with("application/openmetrics-text"),
            "{url}: {ctype}"
        );
        assert!(om.text().expect("body").ends_with("# EOF\n"), "{url}");
    }
    let tx_text = get(&http, &tx_metrics_url).expect("scrape");
    for m in NOT_YET_EXPOSED {
        assert!(
            !tx_text.contains(m),
            "{m} is exposed now: delete it from NOT_YET_EXPOSED so its queries are checked"
        );
    }

    let prom = Prometheus::start(
        &dir.join("prometheus"),
        &[
            Job {
                name: "voxgate-transceiver",
                targets: vec![stack.signal],
            },
            Job {
                name: "voxgate-relay",
                targets: vec![stack.relay_metrics],
            },
        ],
        &[alerts.to_path_buf()],
    )
    .expect("start prometheus");
    let up = wait_until(Duration::from_secs(60), || {
        prom.targets()
            .is_ok_and(|t| t.len() == 2 && t.iter().all(|(_, h)| h == "up"))
    });
    assert!(
        up,
        "targets not up: {:?}\n{}",
        prom.targets(),
        prom.tail(30)
    );

    // The load: callers through the relay, a refusal at capacity, a rejected token, a hang-up.
    let mut fleet = Fleet::new().expect("fleet");
    let caller = |tone_hz: f32| SessionConfig {
        base_url: format!("http://{}", stack.signal),
        token: Some(TOKEN.into()),
        tone_hz,
        send_for: Duration::MAX,
        data_channel: false,
        ..Default::default()
    };
    for i in 0..MAX_SESSIONS {
        let mut config = caller(300.0 + 110.0 * i as f32);
        if i == MAX_SESSIONS - 1 {
            // This caller pauses, so the echo-bot answers it: downlink audio brings the sender
            // reports whose receiver reports give the call-quality panels an RTT.
            config.send_for = Duration::from_secs(2);
        }
        fleet.open(config).expect("open caller");
    }
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(30), |f| {
        f.all_connected()
    });
    assert!(
        connected,
        "{}/{MAX_SESSIONS} callers connected",
        fleet.connected_count()
    );
    let refused = fleet
        .open(caller(880.0))
        .expect_err("a caller past --max-sessions");
    assert_eq!(refused.status(), Some(503), "{refused}");
    let wrong_token = http
        .post(format!("http://{}/v1/sessions", stack.signal))
        .bearer_auth("not-the-token")
        .header("content-type", "application/sdp")
        .body("v=0\r\n")
        .send()
        .expect("POST with a wrong token");
    assert_eq!(wrong_token.status().as_u16(), 401);
    fleet.run_for(Duration::from_secs(3));
    fleet.delete(0).expect("hang up caller 0");

    // Every query must return data while the remaining callers talk; on a busy machine the
    // first scrapes after each event can take a few seconds, so poll.
    let (required, pending) = checks(panels, rules);
    let mut missing = Vec::new();
    let mut next_check = Instant::now() + Duration::from_secs(5);
    let all_data = fleet.run_until(Instant::now() + Duration::from_secs(120), |_| {
        if Instant::now() < next_check {
            return false;
        }
        next_check = Instant::now() + Duration::from_secs(2);
        missing = without_data(&prom, &required);
        missing.is_empty()
    });
    assert!(
        all_data,
        "{} of {} queries without data:\n{}",
        missing.len(),
        required.len(),
        missing.join("\n")
    );
    eprintln!(
        "{} dashboard and alert queries returned data; {} wait for metrics not exposed yet",
        required.len(),
        pending.len()
    );

    // Prometheus evaluated every rule of the file, none with an error.
    let evaluated = wait_until(Duration::from_secs(30), || {
        prom.rules()
            .is_ok_and(|r| r.len() == rules.len() && r.iter().all(|s| s.health == "ok"))
    });
    assert!(evaluated, "rules not all healthy: {:?}", prom.rules());
    // The callers that still talk kept the relay forwarding both ways: their audio towards the
    // transceiver (50 packets/s each), and towards them consent answers and RTCP only, since
    // the echo-bot plays a caller back after the caller pauses and these callers never do.
    let forwarded = prom
        .query("sum by (direction) (rate(voxgate_relay_packets_forwarded_total[30s]))")
        .expect("query");
    let rate = |direction: &str| {
        forwarded
            .iter()
            .find(|s| s.labels.get("direction").is_some_and(|d| d == direction))
            .map(|s| s.value)
    };
    assert!(
        rate("to_transceiver").is_some_and(|r| r > 10.0),
        "{forwarded:?}"
    );
    assert!(rate("to_client").is_some_and(|r| r > 0.0), "{forwarded:?}");
}
