//! Request-steered relay ingress and trusted proxies (issue 13) against the real transceiver
//! process: which relay addresses an answer advertises for a request, and whose word counts.
//!
//! Clients bind distinct loopback addresses (127.0.0.1 is the "load balancer", the trusted
//! proxy; 127.0.0.2 and 127.0.0.3 are callers reaching signaling directly). The ingress
//! addresses are loopback addresses nothing listens on: these tests only read answers, the
//! session JSON and the metrics (media through a relay is in `relay/tests/steered_ingress.rs`).

mod support;

use std::collections::BTreeSet;

use support::{client_from, metric_sum, metrics, ServerProcess, AUDIO_OFFER};

const EU: &str = "127.0.10.1:3478";
const US_V4: &str = "127.0.20.1:3478";
const US_V6: &str = "[::1]:3478";

/// A transceiver (one loop) with the ingresses `eu` = [`EU`] and `us` = `us_addrs`, plus
/// `rules`.
fn two_ingress_server(us_addrs: &str, rules: &[&str]) -> ServerProcess {
    let eu = format!("eu={EU}");
    let us = format!("us={us_addrs}");
    let mut args = vec!["--loops", "1", "--ingress", &eu, "--ingress", &us];
    args.extend_from_slice(rules);
    ServerProcess::start(&args)
}

/// eu (default) and us (v4 + v6); CF-IPCountry from the trusted proxy 127.0.0.1;
/// 127.0.0.3 → us.
fn steered_server(extra: &[&str]) -> ServerProcess {
    let mut rules = vec![
        "--ingress-header",
        "CF-IPCountry",
        "--ingress-country",
        "DE=eu,US=us",
        "--ingress-cidr",
        "127.0.0.3/32=us",
        "--trusted-proxies",
        "127.0.0.1/32",
    ];
    rules.extend_from_slice(extra);
    two_ingress_server(&format!("{US_V4},{US_V6}"), &rules)
}

/// One answered POST: the answer's candidate addresses, the session JSON, the response's
/// ingress headers.
struct Answered {
    candidates: BTreeSet<String>,
    session: serde_json::Value,
    ingress_header: Option<String>,
    reason_header: Option<String>,
}

fn post(server: &ServerProcess, from: &str, headers: &[(&str, &str)]) -> Answered {
    let client = client_from(from);
    let mut rb = client
        .post(server.url("/v1/sessions"))
        .header("Content-Type", "application/sdp")
        .body(AUDIO_OFFER);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.send().expect("POST /v1/sessions");
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let location = header("location");
    let (ingress_header, reason_header) = (
        header("x-voxgate-ingress"),
        header("x-voxgate-ingress-reason"),
    );
    let answer = resp.text().expect("answer body");
    assert_eq!(status, 201, "POST from {from} {headers:?}: {answer}");
    let location = location.expect("201 has a Location");
    let session = support::http_get_json(&server.url(&location));
    Answered {
        candidates: candidate_addrs(&answer),
        session,
        ingress_header,
        reason_header,
    }
}

/// `IP:PORT` of every `a=candidate` line (IPv6 in brackets, as the flags write them).
fn candidate_addrs(sdp: &str) -> BTreeSet<String> {
    sdp.lines()
        .filter_map(|l| l.trim().strip_prefix("a=candidate:"))
        .map(|c| {
            let f: Vec<&str> = c.split_whitespace().collect();
            assert!(f.len() >= 6, "short candidate line {c:?}");
            let ip: std::net::IpAddr = f[4].parse().expect("candidate IP");
            std::net::SocketAddr::new(ip, f[5].parse().expect("candidate port")).to_string()
        })
        .collect()
}

fn set(addrs: &[&str]) -> BTreeSet<String> {
    addrs.iter().map(|a| a.to_string()).collect()
}

fn assert_steered(a: &Answered, ingress: &str, reason: &str, addrs: &[&str]) {
    assert_eq!(a.candidates, set(addrs), "candidates of {}", a.session);
    assert_eq!(a.session["ingress"], ingress, "{}", a.session);
    assert_eq!(a.session["ingress_reason"], reason, "{}", a.session);
    assert_eq!(a.ingress_header.as_deref(), Some(ingress));
    assert_eq!(a.reason_header.as_deref(), Some(reason));
}

/// `voxgate_untrusted_header_total{header}`.
fn untrusted(text: &str, header: &str) -> u64 {
    metric_sum(
        text,
        "voxgate_untrusted_header_total",
        &[&format!("header=\"{header}\"")],
    )
}

fn selected(text: &str, ingress: &str, reason: &str) -> u64 {
    metric_sum(
        text,
        "voxgate_ingress_selected_total",
        &[
            &format!("ingress=\"{ingress}\""),
            &format!("reason=\"{reason}\""),
        ],
    )
}

#[test]
fn a_trusted_proxys_header_picks_the_ingress_and_anyone_elses_is_ignored_and_counted() {
    let server = steered_server(&[]);

    // The load balancer (trusted) says the caller is in the US: both us addresses, v4 and v6.
    let a = post(&server, "127.0.0.1", &[("CF-IPCountry", "US")]);
    assert_steered(&a, "us", "header", &[US_V4, US_V6]);
    let a = post(&server, "127.0.0.1", &[("cf-ipcountry", "de")]);
    assert_steered(&a, "eu", "header", &[EU]);

    // A caller writing the header itself is not believed: the default, and counted.
    let a = post(&server, "127.0.0.2", &[("CF-IPCountry", "US")]);
    assert_steered(&a, "eu", "default", &[EU]);
    let text = metrics(&server);
    assert_eq!(untrusted(&text, "cf-ipcountry"), 1, "{text}");

    // A country without a rule falls through (to the default here) and is counted.
    let a = post(&server, "127.0.0.1", &[("CF-IPCountry", "FR")]);
    assert_steered(&a, "eu", "default", &[EU]);

    let text = metrics(&server);
    assert_eq!(selected(&text, "us", "header"), 1, "{text}");
    assert_eq!(selected(&text, "eu", "header"), 1, "{text}");
    assert_eq!(selected(&text, "eu", "default"), 2, "{text}");
    assert_eq!(
        metric_sum(&text, "voxgate_ingress_header_unmatched_total", &[]),
        1
    );
}

#[test]
fn the_client_cidr_rule_and_the_default_both_work_with_forwarded_clients() {
    let server = steered_server(&[]);
    // A caller from the us network, straight to signaling.
    let a = post(&server, "127.0.0.3", &[]);
    assert_steered(&a, "us", "cidr", &[US_V4, US_V6]);
    // Anyone else without a header: the default (the first ingress).
    let a = post(&server, "127.0.0.2", &[]);
    assert_steered(&a, "eu", "default", &[EU]);
    // Through the trusted proxy, the forwarded client address is what the CIDR rule sees:
    // the rightmost hop that is not a trusted proxy.
    let a = post(
        &server,
        "127.0.0.1",
        &[("X-Forwarded-For", "127.0.0.2, 127.0.0.3, 127.0.0.1")],
    );
    assert_steered(&a, "us", "cidr", &[US_V4, US_V6]);
    // A forwarded address from an untrusted peer is not: its own address decides.
    let a = post(&server, "127.0.0.2", &[("X-Forwarded-For", "127.0.0.3")]);
    assert_steered(&a, "eu", "default", &[EU]);
    let text = metrics(&server);
    assert_eq!(untrusted(&text, "x-forwarded-for"), 1, "{text}");
    assert_eq!(selected(&text, "us", "cidr"), 2, "{text}");

    // --ingress-default overrides the first ingress.
    let server = steered_server(&["--ingress-default", "us"]);
    let a = post(&server, "127.0.0.2", &[]);
    assert_steered(&a, "us", "default", &[US_V4, US_V6]);
}

#[test]
fn a_header_naming_the_ingress_directly_and_advertise_as_the_default_ingress() {
    let server = two_ingress_server(
        US_V4,
        &[
            "--ingress-header",
            "X-Edge-Ingress",
            "--ingress-header-mode",
            "name",
            "--trusted-proxies",
            "127.0.0.0/30",
        ],
    );
    let a = post(&server, "127.0.0.2", &[("X-Edge-Ingress", "us")]);
    assert_steered(&a, "us", "header", &[US_V4]);

    // --advertise still works: it is the single ingress "default".
    let server = ServerProcess::start(&["--loops", "1", "--advertise", EU]);
    let a = post(&server, "127.0.0.2", &[]);
    assert_steered(&a, "default", "default", &[EU]);

    // Direct mode: the loop's own socket, no ingress.
    let server = ServerProcess::start(&["--loops", "1"]);
    let a = post(&server, "127.0.0.2", &[]);
    let own = format!("127.0.0.1:{}", server.media_base_port);
    assert_eq!(a.candidates, set(&[&own]));
    assert!(a.session["ingress"].is_null(), "{}", a.session);
    assert!(a.ingress_header.is_none());
}

fn post_status(server: &ServerProcess, from: &str, forwarded_for: Option<&str>) -> u16 {
    let mut rb = client_from(from)
        .post(server.url("/v1/sessions"))
        .header("Content-Type", "application/sdp")
        .body(AUDIO_OFFER);
    if let Some(xff) = forwarded_for {
        rb = rb.header("X-Forwarded-For", xff);
    }
    rb.send().expect("POST").status().as_u16()
}

#[test]
fn per_ip_limits_use_the_forwarded_client_only_from_trusted_proxies() {
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--max-sessions-per-ip",
        "2",
        "--trusted-proxies",
        "127.0.0.1/32",
    ]);
    // Behind the trusted load balancer, each caller has its own cap...
    for _ in 0..2 {
        assert_eq!(post_status(&server, "127.0.0.1", Some("192.0.2.1")), 201);
    }
    assert_eq!(
        post_status(&server, "127.0.0.1", Some("192.0.2.1")),
        429,
        "the third session of one forwarded client is refused"
    );
    // ...so the balancer's other callers are not refused with it.
    assert_eq!(post_status(&server, "127.0.0.1", Some("192.0.2.2")), 201);
    assert_eq!(post_status(&server, "127.0.0.1", Some("192.0.2.2")), 201);

    // An untrusted peer cannot dodge its cap by naming other clients.
    assert_eq!(post_status(&server, "127.0.0.2", Some("192.0.2.7")), 201);
    assert_eq!(post_status(&server, "127.0.0.2", Some("192.0.2.8")), 201);
    assert_eq!(post_status(&server, "127.0.0.2", Some("192.0.2.9")), 429);

    // A malformed list from the proxy counts against the proxy's own address, and is counted.
    assert_eq!(post_status(&server, "127.0.0.1", Some("192.0.2.1,,x")), 201);
    let text = metrics(&server);
    assert_eq!(
        metric_sum(&text, "voxgate_forwarded_for_malformed_total", &[]),
        1,
        "{text}"
    );
    assert_eq!(untrusted(&text, "x-forwarded-for"), 3);
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_sessions_refused_total",
            &["reason=\"per_ip_sessions\""]
        ),
        2,
        "{text}"
    );
}

#[test]
fn bad_ingress_configuration_stops_start_up_with_a_precise_error() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--ingress",
                "eu=127.0.10.1:3478",
                "--ingress-cidr",
                "10.0.0.0/8=ap",
            ],
            "--ingress-cidr \"10.0.0.0/8=ap\" names ingress \"ap\", which no --ingress defines",
        ),
        (
            &[
                "--ingress",
                "eu=127.0.10.1:3478",
                "--ingress",
                "EU=127.0.10.2:3478",
            ],
            "ingress \"EU\" is given more than once",
        ),
        (
            &[
                "--ingress",
                "eu=127.0.10.1:3478",
                "--advertise",
                "127.0.10.2:3478",
            ],
            "--advertise and --ingress cannot both be given",
        ),
        (&["--ingress-cidr", "10.0.0.0/33=eu"], "is not a CIDR"),
        (&["--trusted-proxies", "proxy.example"], "neither a CIDR"),
        (
            &["--ingress-default", "eu"],
            "--ingress-default needs --ingress",
        ),
        (
            &[
                "--ingress",
                "eu=127.0.10.1:3478",
                "--ingress-header",
                "CF-IPCountry",
            ],
            "needs at least one --ingress-country",
        ),
    ];
    for (args, expected) in cases {
        let out = support::run_with_timeout(
            std::process::Command::new(support::transceiver_bin())
                .args([
                    "--signal-listen",
                    "127.0.0.1:0",
                    "--grpc-listen",
                    "127.0.0.1:0",
                ])
                .args(["--media-listen", "127.0.0.1:0", "--loops", "1"])
                .args(*args)
                .env("NO_COLOR", "1"),
            std::time::Duration::from_secs(20),
        );
        assert!(
            !out.success() && !out.timed_out,
            "{args:?} started\n{}",
            out.describe()
        );
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains(expected),
            "{args:?}: wanted {expected:?}\n{said}"
        );
    }
}
