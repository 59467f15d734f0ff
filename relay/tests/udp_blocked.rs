//! Callers whose networks block UDP (issue 13), with an unmodified browser: headless Chromium
//! runs on a host of its own (a network namespace, see `common::netns`) whose UDP to the media
//! port is dropped by nftables, as a corporate firewall would. It must reach the echo-bot over
//! ICE-TCP — through the relay's TCP listener, and in direct mode through the transceiver
//! loop's own listener — speak through its fake microphone (espeak-ng speech) and hear the echo.
//! Chromium's `getStats()` must name a TCP pair as selected, and the nft counter shows that its
//! UDP checks really were sent and dropped. The same client with nothing blocked picks UDP.
//!
//! Needs root (network namespaces; CI runs as root), `scripts/setup` (Chromium, playwright-core,
//! nftables, sox, espeak-ng) and the workspace's binaries (`cargo build --workspace --bins`).

mod common;

use std::net::{IpAddr, SocketAddr};

use common::netns::{can_create_namespaces, NetnsPair, SERVER_IP};
use common::stack::{
    chromium_report, start_echo_bot_with_token, start_transceiver_with, Proc, Transceiver,
};
use common::{RelayPorts, RelayProcess};
use serde_json::Value;

const TOKEN: &str = "udp-blocked-test-token";

/// The namespaces, with this test's thread moved into the server one; `None` (after saying
/// why) when this process may not create namespaces.
fn server_host() -> Option<NetnsPair> {
    if let Err(why) = can_create_namespaces() {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let net = NetnsPair::create();
    net.enter_server();
    Some(net)
}

/// Direct mode on the server host: a transceiver (its answers name the loop's own UDP socket
/// and TCP listener, the same IP:port) and the echo-bot.
fn direct_mode() -> (Transceiver, Proc) {
    let t = transceiver(&[]);
    let bot = start_echo_bot_with_token(&t, Some(TOKEN));
    (t, bot)
}

/// A transceiver on the server host's veth address (signaling behind a token, as a public bind
/// must be), plus `args`.
fn transceiver(args: &[&str]) -> Transceiver {
    let ip = IpAddr::V4(SERVER_IP);
    start_transceiver_with(ip, ip, 1, args, &[("VOXGATE_TOKEN", TOKEN)])
}

/// Runs the Chromium client on the client host: speech in, the echo back, the selected pair
/// checked against `transport`. Returns its JSON report; on failure, panics with the
/// transceiver's log and `more_logs()`.
fn chromium(
    net: &NetnsPair,
    t: &Transceiver,
    transport: &str,
    more_logs: impl Fn() -> String,
) -> Value {
    chromium_report(
        net.client_command("node"),
        &[
            ("SIGNAL_URL", t.signal_url.as_str()),
            ("TOKEN", TOKEN),
            ("AUDIO", "speech"),
            ("EXPECT_ECHO", "1"),
            ("EXPECT_TRANSPORT", transport),
            ("HOLD_MS", "9000"),
        ],
        || format!("transceiver:\n{}\n{}", t.proc.log_text(), more_logs()),
    )
}

/// What every run must show: the selected pair is `transport` on both ends, nominated, its
/// remote end is `server`; the browser heard audio back; every path the server authenticated
/// is `transport`.
fn assert_selected(report: &Value, transport: &str, server: SocketAddr) {
    let pair = &report["selectedPair"];
    println!("selected pair: {pair}");
    println!(
        "inbound audio: {} packets, totalAudioEnergy {}; server paths {}",
        report["packetsReceived"], report["totalAudioEnergy"], report["server"]["client_paths"]
    );
    for end in ["local", "remote"] {
        assert_eq!(pair[end]["protocol"], transport, "{end} end: {report}");
    }
    assert_eq!(pair["nominated"], true, "{report}");
    assert_eq!(
        pair["remote"]["address"],
        server.ip().to_string(),
        "{report}"
    );
    assert_eq!(pair["remote"]["port"], server.port(), "{report}");
    if transport == "tcp" {
        // Chromium connects out (active) to the server's passive candidate.
        assert_eq!(pair["local"]["tcpType"], "active", "{report}");
    }
    assert!(
        report["totalAudioEnergy"].as_f64().unwrap_or(0.0) > 0.0,
        "no audio energy came back: {report}"
    );
    assert!(
        report["packetsReceived"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );
    let paths = report["server"]["client_paths"]
        .as_array()
        .unwrap_or_else(|| panic!("no client_paths: {report}"));
    assert!(!paths.is_empty(), "{report}");
    assert!(
        paths.iter().all(|p| p["transport"] == transport),
        "the server authenticated a path that is not {transport}: {report}"
    );
}

fn transceiver_metric(t: &Transceiver, name: &str) -> f64 {
    let text = reqwest::blocking::get(format!("{}/metrics", t.signal_url))
        .and_then(|r| r.text())
        .unwrap_or_default();
    common::metric_sum(&text, name, &[])
}

/// Direct mode: the answer's candidates are the loop's own UDP socket and TCP listener (same
/// IP:port); with UDP to that port dropped, Chromium's active TCP candidate is the only way in.
#[test]
fn chromium_with_udp_blocked_reaches_the_echo_bot_over_tcp_in_direct_mode() {
    let Some(net) = server_host() else { return };
    let (t, _bot) = direct_mode();
    let media = t.media;
    net.block_udp_to(media);

    let report = chromium(&net, &t, "tcp", String::new);
    assert_selected(&report, "tcp", media);
    let dropped = net.udp_dropped();
    println!("nft dropped {dropped} UDP datagrams to {media}");
    assert!(
        dropped > 0,
        "Chromium never tried UDP: the block proved nothing"
    );
    assert!(transceiver_metric(&t, "voxgate_tcp_frames_in_total") > 0.0);
    assert!(transceiver_metric(&t, "voxgate_tcp_frames_out_total") > 0.0);
}

/// Through the relay: the answer advertises the relay's public address for UDP and TCP (its TCP
/// listener shares the UDP IP:port); with UDP to it dropped, the relay carries the call over
/// TCP to the loop's UDP socket (v2 headers) and back.
#[test]
fn chromium_with_udp_blocked_reaches_the_echo_bot_over_tcp_through_the_relay() {
    let Some(net) = server_host() else { return };
    let ip = IpAddr::V4(SERVER_IP);
    // Relay and transceiver trust each other's address on the server host (both default to
    // loopback only).
    let host = format!("{SERVER_IP}/32");
    let relay = RelayProcess::start_on(ip, &RelayPorts::new(2), 2, &["--transceivers", &host]);
    let t = transceiver(&["--advertise", &relay.public.to_string(), "--relays", &host]);
    let _bot = start_echo_bot_with_token(&t, Some(TOKEN));
    net.block_udp_to(relay.public);

    let report = chromium(&net, &t, "tcp", || {
        format!("relay:\n{}\n{}", relay.log_text(), relay.scrape())
    });
    assert_selected(&report, "tcp", relay.public);
    let paths = report["server"]["client_paths"].as_array().unwrap();
    assert!(
        paths.iter().all(|p| p["via"].is_string()),
        "a path bypassed the relay: {report}"
    );
    let dropped = net.udp_dropped();
    println!("nft dropped {dropped} UDP datagrams to {}", relay.public);
    assert!(
        dropped > 0,
        "Chromium never tried UDP: the block proved nothing"
    );

    let tcp = |direction: &str| {
        relay.metric(
            "voxgate_relay_packets_forwarded_total",
            &[("direction", direction), ("transport", "tcp")],
        )
    };
    let (up, down) = (tcp("to_transceiver"), tcp("to_client"));
    println!("relay forwarded over TCP: {up} to the transceiver, {down} to the client");
    let counters = &report["server"]["counters"];
    assert!(
        up >= counters["audio_packets_in"].as_f64().unwrap_or(f64::MAX),
        "the transceiver got audio the relay's TCP path did not carry: {report}"
    );
    assert!(down > 0.0, "nothing came back over TCP");
    assert!(relay.metric("voxgate_relay_tcp_connections_accepted_total", &[]) >= 1.0);
    assert_eq!(
        relay.metric(
            "voxgate_relay_packets_forwarded_total",
            &[("transport", "udp")]
        ),
        0.0,
        "UDP got through the block"
    );
}

/// The control: the same client on the same hosts with nothing blocked selects UDP (the TCP
/// candidates rank below), so the tests above owe their TCP pair to the block.
#[test]
fn chromium_with_udp_open_selects_udp_in_direct_mode() {
    let Some(net) = server_host() else { return };
    let (t, _bot) = direct_mode();
    let report = chromium(&net, &t, "udp", String::new);
    assert_selected(&report, "udp", t.media);
}
