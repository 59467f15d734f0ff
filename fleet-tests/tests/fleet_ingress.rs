//! Request-steered relay ingress across two "regions" (issue 13), on hosts made of network
//! namespaces (prefix `vgi-`, addresses 10.232.0.0/24: it runs beside `fleet_netns.rs`).
//!
//! ```text
//!   client host                         eu region (cluster 1)           us region (cluster 2)
//!     .40  geo load balancer (trusted)    relay-eu .11:3478 ──┐            relay-us .12:3478
//!     .64  caller A (media)               │                   │ internal      │ --peer-cluster
//!     .130 caller B (signaling + media)   tx .21 (cluster 1) ◄┘               │ 1=relay-eu
//!                                         echo-bot (in tx)     ◄── global tier┘
//! ```
//!
//! The transceiver knows two ingresses, `eu` = relay-eu and `us` = relay-us (the default),
//! trusts the load balancer's `X-Geo-Ingress` header, and sends 10.232.0.128/25 to `us`.
//! - Caller A signals through the load balancer, whose header names `eu`: its answer carries
//!   relay-eu, and its media goes caller → relay-eu → tx.
//! - Caller B signals directly and writes `X-Geo-Ingress: eu` itself: not believed (counted);
//!   its CIDR rule names `us`, so its media goes caller → relay-us → (the hint names cluster 1)
//!   relay-eu → tx, the global tier forwarding to the transceiver's cluster.
//!
//! Both hear the echo-bot answer their tone. Needs root (network namespaces).

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use voxgate_fleet_tests::metrics_text;
use voxgate_fleet_tests::netns::HostSpec;
use voxgate_fleet_tests::{binaries, Network, Proc};
use voxgate_testkit::{ClientSession, CreatedSession, Fleet, SessionConfig, SessionResource};

const PREFIX: &str = "vgi-";
const RELAY_EU: &str = "10.232.0.11";
const RELAY_US: &str = "10.232.0.12";
const TX: &str = "10.232.0.21";
const LOAD_BALANCER: &str = "10.232.0.40";
const CALLER_A: &str = "10.232.0.64";
const CALLER_B: &str = "10.232.0.130";
const RELAY_PORT: u16 = 3478;
const RELAY_INTERNAL_PORT: u16 = 3578;
const RELAY_METRICS_PORT: u16 = 9478;
const SIGNAL_PORT: u16 = 8080;
const TOKEN: &str = "fleet-ingress-token";
/// The steering header the load balancer sets.
const GEO_HEADER: &str = "X-Geo-Ingress";
/// Downlink packets a caller must receive (half a second of echo).
const HEARD_PACKETS: u64 = 25;

fn hosts() -> Vec<HostSpec> {
    let cidr = |ip: &str| format!("{ip}/24");
    vec![
        HostSpec::new("relayeu", &[&cidr(RELAY_EU)]),
        HostSpec::new("relayus", &[&cidr(RELAY_US)]),
        HostSpec::new("tx", &[&cidr(TX)]),
        HostSpec::new(
            "client",
            &[&cidr(LOAD_BALANCER), &cidr(CALLER_A), &cidr(CALLER_B)],
        ),
    ]
}

fn log_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fleet-ingress");
    std::fs::create_dir_all(&dir).expect("log dir");
    dir
}

fn relay(net: &Network, dir: &Path, host: &str, ip: &str, cluster: &str, extra: &[&str]) -> Proc {
    net.spawn(
        host,
        host,
        Command::new(binaries::path("relay"))
            .args(["--listen", &format!("{ip}:{RELAY_PORT}")])
            .args(["--internal-listen", &format!("{ip}:{RELAY_INTERNAL_PORT}")])
            .args(["--workers", "1"])
            .args(["--transceivers", &format!("{TX}/32")])
            .args(["--cluster-id", cluster])
            .args(["--metrics-listen", &format!("{ip}:{RELAY_METRICS_PORT}")])
            .args(["--metrics-interval-ms", "100"])
            .args(extra)
            .env("VOXGATE_RELAY_FLEET_KEY", FLEET_KEY)
            .env("RUST_LOG", "info"),
        dir.join(format!("{host}.log")),
    )
    .expect("spawn relay")
}

/// A made-up key for this test's fleet only.
const FLEET_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

struct Fleetwide {
    relay_eu: Proc,
    relay_us: Proc,
    tx: Proc,
    bot: Proc,
}

impl Fleetwide {
    fn tails(&self) -> String {
        [&self.relay_eu, &self.relay_us, &self.tx, &self.bot]
            .iter()
            .map(|p| p.tail(25))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn start(net: &Network, dir: &Path) -> Fleetwide {
    // Each names the other as the relay of its cluster (a relay accepts relay-framed
    // datagrams on its public port only from its peers).
    let to_us = format!("2={RELAY_US}:{RELAY_PORT}");
    let relay_eu = relay(
        net,
        dir,
        "relayeu",
        RELAY_EU,
        "1",
        &["--peer-cluster", &to_us],
    );
    let to_eu = format!("1={RELAY_EU}:{RELAY_PORT}");
    let relay_us = relay(
        net,
        dir,
        "relayus",
        RELAY_US,
        "2",
        &["--peer-cluster", &to_eu],
    );
    let eu = format!("eu={RELAY_EU}:{RELAY_PORT}");
    let us = format!("us={RELAY_US}:{RELAY_PORT}");
    let tx = net
        .spawn(
            "tx",
            "tx",
            Command::new(binaries::path("transceiver"))
                .args(["--signal-listen", &format!("{TX}:{SIGNAL_PORT}")])
                .args(["--media-listen", &format!("{TX}:40000")])
                .args(["--grpc-listen", "127.0.0.1:50051"])
                .args(["--loops", "1", "--no-pin", "--cluster-id", "1"])
                // Only the cluster's own relay forwards to it; relay-us goes through relay-eu.
                .args(["--relays", &format!("{RELAY_EU}/32")])
                .args(["--ingress", &eu, "--ingress", &us])
                .args(["--ingress-default", "us"])
                .args([
                    "--ingress-header",
                    GEO_HEADER,
                    "--ingress-header-mode",
                    "name",
                ])
                .args(["--ingress-cidr", "10.232.0.128/25=us"])
                .args(["--trusted-proxies", &format!("{LOAD_BALANCER}/32")])
                .env("VOXGATE_FLEET_KEY", FLEET_KEY)
                .env("VOXGATE_TOKEN", TOKEN)
                .env("RUST_LOG", "info"),
            dir.join("tx.log"),
        )
        .expect("spawn transceiver");
    let bot = net
        .spawn(
            "tx",
            "echo-bot",
            Command::new(binaries::path("echo-bot"))
                .args(["--transceiver", "http://127.0.0.1:50051"])
                .args(["--capacity", "10", "--silence-ms", "300"])
                // The transceiver takes its signaling token on gRPC (it has no --grpc-token).
                .env("VOXGATE_ECHO_TOKEN", TOKEN)
                .env("RUST_LOG", "info"),
            dir.join("echo-bot.log"),
        )
        .expect("spawn echo-bot");
    Fleetwide {
        relay_eu,
        relay_us,
        tx,
        bot,
    }
}

fn http_from(ip: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .local_address(ip.parse::<IpAddr>().expect("ip"))
        .build()
        .expect("http client")
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(100), ok)
}

fn get_text(http: &reqwest::blocking::Client, url: &str) -> Option<String> {
    let r = http.get(url).bearer_auth(TOKEN).send().ok()?;
    r.status().is_success().then(|| r.text().ok()).flatten()
}

/// Opens a caller whose media socket is on `media_ip` and whose offer is POSTed from
/// `signal_from` with `headers`; returns its index in `fleet` and the answer SDP.
fn open_caller(
    fleet: &mut Fleet,
    media_ip: &str,
    signal_from: &str,
    headers: &[(&str, &str)],
    tone_hz: f32,
) -> (usize, String) {
    let base = format!("http://{TX}:{SIGNAL_PORT}");
    let cfg = SessionConfig {
        base_url: base.clone(),
        token: Some(TOKEN.into()),
        bind_ip: media_ip.parse().expect("ip"),
        tone_hz,
        send_for: Duration::from_millis(1500),
        data_channel: false,
        ..Default::default()
    };
    let socket = std::net::UdpSocket::bind(SocketAddr::new(cfg.bind_ip, 0)).expect("bind");
    let (mut session, offer) =
        ClientSession::new(&cfg, socket.local_addr().expect("addr"), Instant::now())
            .expect("offer");
    let url = format!("{base}/v1/sessions");
    let mut rb = http_from(signal_from)
        .post(&url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/sdp")
        .body(offer);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().expect("POST /v1/sessions");
    assert_eq!(resp.status().as_u16(), 201, "POST from {signal_from}");
    let location = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("Location")
        .to_string();
    let answer = resp.text().expect("answer");
    let resource_url = reqwest::Url::parse(&url)
        .and_then(|u| u.join(&location))
        .expect("resource URL");
    let created = CreatedSession {
        session_id: location.rsplit('/').next().unwrap_or_default().to_string(),
        location,
        resource_url: resource_url.clone(),
        answer_sdp: answer.clone(),
        resume_credential: None,
    };
    session
        .accept_created(Instant::now(), &created)
        .expect("accept answer");
    let index = fleet
        .add(
            session,
            socket,
            Some(SessionResource {
                url: resource_url,
                token: Some(TOKEN.into()),
                resume_credential: None,
            }),
        )
        .expect("add session");
    (index, answer)
}

fn relay_metric(http: &reqwest::blocking::Client, ip: &str, name: &str) -> f64 {
    get_text(http, &format!("http://{ip}:{RELAY_METRICS_PORT}/metrics"))
        .and_then(|t| metrics_text::sum(&t, name))
        .unwrap_or(0.0)
}

#[test]
fn callers_steered_to_two_regional_ingresses_reach_one_cluster_through_their_own_relay() {
    let net = Network::create_with_prefix(PREFIX, &hosts()).unwrap_or_else(|e| {
        panic!("cannot build the network namespaces (root and iproute2 needed): {e}")
    });
    let dir = log_dir();
    let procs = start(&net, &dir);

    // Everything below lives in the client host.
    let net_ref = &net;
    let outcome = std::thread::scope(|s| {
        s.spawn(move || {
            net_ref.enter("client").expect("enter client host");
            run_callers()
        })
        .join()
    });
    if let Err(panic) = outcome {
        eprintln!("--- fleet logs ---\n{}", procs.tails());
        std::panic::resume_unwind(panic);
    }
}

/// The test proper, on a thread inside the client host.
fn run_callers() {
    let http = http_from(LOAD_BALANCER);
    let tx_url = format!("http://{TX}:{SIGNAL_PORT}");
    let up = wait_until(Duration::from_secs(15), || {
        get_text(&http, &format!("{tx_url}/healthz")).is_some()
            && [RELAY_EU, RELAY_US].iter().all(|ip| {
                get_text(&http, &format!("http://{ip}:{RELAY_METRICS_PORT}/metrics")).is_some()
            })
    });
    assert!(up, "transceiver or relays did not come up");
    let bot_ready = wait_until(Duration::from_secs(15), || {
        get_text(&http, &format!("{tx_url}/metrics"))
            .and_then(|t| metrics_text::sum(&t, "voxgate_backend_workers"))
            .is_some_and(|n| n >= 1.0)
    });
    assert!(bot_ready, "the echo-bot did not subscribe");

    let mut fleet = Fleet::new().expect("fleet");
    let (a, answer_a) = open_caller(
        &mut fleet,
        CALLER_A,
        LOAD_BALANCER,
        &[(GEO_HEADER, "eu"), ("X-Forwarded-For", CALLER_A)],
        440.0,
    );
    let (b, answer_b) = open_caller(&mut fleet, CALLER_B, CALLER_B, &[(GEO_HEADER, "eu")], 660.0);
    let eu_public: SocketAddr = format!("{RELAY_EU}:{RELAY_PORT}").parse().unwrap();
    let us_public: SocketAddr = format!("{RELAY_US}:{RELAY_PORT}").parse().unwrap();
    assert!(
        answer_a.contains(&format!("{RELAY_EU} {RELAY_PORT} typ host")),
        "{answer_a}"
    );
    assert!(!answer_a.contains(RELAY_US), "{answer_a}");
    assert!(
        answer_b.contains(&format!("{RELAY_US} {RELAY_PORT} typ host")),
        "{answer_b}"
    );
    assert!(!answer_b.contains(RELAY_EU), "{answer_b}");

    let connected = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        f.all_connected()
    });
    assert!(connected, "{}/2 callers connected", fleet.connected_count());
    let heard = fleet.run_until(Instant::now() + Duration::from_secs(20), |f| {
        (0..f.len()).all(|i| f.report(i).audio_packets_received >= HEARD_PACKETS)
    });
    assert!(
        heard,
        "callers without their echo: A {} B {} packets",
        fleet.report(a).audio_packets_received,
        fleet.report(b).audio_packets_received
    );

    // Each caller only ever talked to its own ingress's relay.
    assert_eq!(
        fleet.session(a).remote_addrs_seen(),
        &HashSet::from([eu_public])
    );
    assert_eq!(
        fleet.session(b).remote_addrs_seen(),
        &HashSet::from([us_public])
    );

    // The transceiver says where each was steered and why, and saw the true client address
    // through the relays (caller B's through two of them).
    let relay_eu_internal = format!("{RELAY_EU}:{RELAY_INTERNAL_PORT}");
    for (i, ingress, reason, client) in [(a, "eu", "header", CALLER_A), (b, "us", "cidr", CALLER_B)]
    {
        let snap = fleet.server_state(i).expect("GET session");
        assert_eq!(snap["ingress"], ingress, "{snap}");
        assert_eq!(snap["ingress_reason"], reason, "{snap}");
        let addr = snap["client_addrs"][0].as_str().unwrap_or_default();
        assert!(addr.starts_with(&format!("{client}:")), "{snap}");
        assert_eq!(snap["relays"][0], relay_eu_internal.as_str(), "{snap}");
        assert!(
            snap["counters"]["audio_packets_in"].as_u64().unwrap_or(0) >= HEARD_PACKETS,
            "{snap}"
        );
    }

    // relay-us carried B's flow on to relay-eu (the global tier); relay-eu both flows.
    assert!(relay_metric(&http, RELAY_US, "voxgate_relay_flows_created_total") >= 1.0);
    assert!(relay_metric(&http, RELAY_EU, "voxgate_relay_flows_created_total") >= 2.0);
    let tx_metrics = get_text(&http, &format!("{tx_url}/metrics")).expect("tx metrics");
    let selected = |ingress: &str, reason: &str| {
        let (i, r) = (
            format!("ingress=\"{ingress}\""),
            format!("reason=\"{reason}\""),
        );
        tx_metrics
            .lines()
            .filter(|l| l.starts_with("voxgate_ingress_selected_total{"))
            .filter(|l| l.contains(&i) && l.contains(&r))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(selected("eu", "header"), 1.0, "{tx_metrics}");
    assert_eq!(selected("us", "cidr"), 1.0, "{tx_metrics}");
    assert_eq!(
        metrics_text::sum_with_label(
            &tx_metrics,
            "voxgate_untrusted_header_total",
            "header=\"x-geo-ingress\""
        ),
        1.0,
        "caller B's own header was counted, not believed"
    );
    for i in [a, b] {
        fleet.delete(i).expect("DELETE");
    }
}
