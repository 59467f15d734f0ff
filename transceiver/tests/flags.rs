//! The command line of both binaries (the transceiver's `Config`, the relay's `Args`), as
//! users see it.
//!
//! - Every flag keeps its name, environment twin and default: the tables below are the flags
//!   as they were before they were put in groups (issue 36); a rename, a lost twin or a
//!   changed default fails here. A flag added or changed on purpose changes its table too.
//! - `docs/FLAGS.md` is generated from the clap definitions: one section per binary, one table
//!   per help heading, each flag with its environment twin, its default and the first
//!   paragraph of its doc comment. The test renders it and fails when the file differs; with
//!   `VOXGATE_BLESS=1` it writes the file instead:
//!
//! ```text
//! VOXGATE_BLESS=1 cargo test -p voxgate-transceiver --test flags flags_doc
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use clap::{ArgAction, CommandFactory};
use voxgate_relay::config::Args as RelayArgs;
use voxgate_transceiver::control::config::Config as TransceiverConfig;

const BLESS: &str = "VOXGATE_BLESS=1 cargo test -p voxgate-transceiver --test flags flags_doc";

/// The transceiver's flags: long name, environment twin, default (`false` for a switch).
const TRANSCEIVER_FLAGS: &[(&str, &str, &str)] = &[
    ("signal-listen", "VOXGATE_SIGNAL_LISTEN", "127.0.0.1:8080"),
    ("media-listen", "VOXGATE_MEDIA_LISTEN", "127.0.0.1:40000"),
    ("loops", "VOXGATE_LOOPS", ""),
    ("control-threads", "VOXGATE_CONTROL_THREADS", ""),
    ("no-pin", "VOXGATE_NO_PIN", "false"),
    ("loop-priority", "VOXGATE_LOOP_PRIORITY", "rt"),
    ("read-window-us", "VOXGATE_READ_WINDOW_US", "0"),
    ("coarse-ticks-up-to", "VOXGATE_COARSE_TICKS_UP_TO", "256"),
    ("coarse-tick-grids", "VOXGATE_COARSE_TICK_GRIDS", "2"),
    ("advertise", "VOXGATE_ADVERTISE", ""),
    ("internal-ip", "VOXGATE_INTERNAL_IP", ""),
    ("public-url", "VOXGATE_PUBLIC_URL", ""),
    ("max-sessions", "VOXGATE_MAX_SESSIONS", "1000"),
    ("max-loop-busy", "VOXGATE_MAX_LOOP_BUSY", "0.85"),
    ("max-process-cpu", "VOXGATE_MAX_PROCESS_CPU", "0.85"),
    ("token", "VOXGATE_TOKEN", ""),
    ("fleet-key", "VOXGATE_FLEET_KEY", ""),
    ("fleet-key-file", "VOXGATE_FLEET_KEY_FILE", ""),
    ("fleet-key-id", "VOXGATE_FLEET_KEY_ID", "1"),
    ("cluster-id", "VOXGATE_CLUSTER_ID", "0"),
    ("connect-timeout-secs", "VOXGATE_CONNECT_TIMEOUT_SECS", "20"),
    ("grpc-listen", "VOXGATE_GRPC_LISTEN", "127.0.0.1:50051"),
    ("grpc-token", "VOXGATE_GRPC_TOKEN", ""),
    (
        "dispatch-timeout-secs",
        "VOXGATE_DISPATCH_TIMEOUT_SECS",
        "0",
    ),
    ("attach-timeout-secs", "VOXGATE_ATTACH_TIMEOUT_SECS", "5"),
    (
        "max-dispatch-attempts",
        "VOXGATE_MAX_DISPATCH_ATTEMPTS",
        "3",
    ),
    ("require-backend", "VOXGATE_REQUIRE_BACKEND", "false"),
    ("opus-bitrate", "VOXGATE_OPUS_BITRATE", "32000"),
    ("opus-complexity", "VOXGATE_OPUS_COMPLEXITY", "5"),
    ("opus-application", "VOXGATE_OPUS_APPLICATION", "voip"),
    ("drain-timeout-secs", "VOXGATE_DRAIN_TIMEOUT_SECS", "25"),
    ("max-body-bytes", "VOXGATE_MAX_BODY_BYTES", "65536"),
    ("relays", "VOXGATE_RELAYS", ""),
    ("no-relays", "VOXGATE_NO_RELAYS", "false"),
    ("max-taps", "VOXGATE_MAX_TAPS", "4"),
    ("log-format", "VOXGATE_LOG_FORMAT", "text"),
    ("insecure-no-auth", "VOXGATE_INSECURE_NO_AUTH", "false"),
    ("token-key-file", "VOXGATE_TOKEN_KEY_FILE", ""),
    ("resume-key-file", "VOXGATE_RESUME_KEY_FILE", ""),
    ("resume-ttl-secs", "VOXGATE_RESUME_TTL_SECS", "120"),
    ("post-rate-per-ip", "VOXGATE_POST_RATE_PER_IP", "20"),
    ("post-burst-per-ip", "VOXGATE_POST_BURST_PER_IP", "100"),
    ("restart-rate-per-ip", "VOXGATE_RESTART_RATE_PER_IP", "10"),
    ("restart-burst-per-ip", "VOXGATE_RESTART_BURST_PER_IP", "50"),
    ("max-sessions-per-ip", "VOXGATE_MAX_SESSIONS_PER_IP", "100"),
    ("max-session-secs", "VOXGATE_MAX_SESSION_SECS", "14400"),
    ("backend-stall-secs", "VOXGATE_BACKEND_STALL_SECS", "5"),
    (
        "grpc-write-coalescing",
        "VOXGATE_GRPC_WRITE_COALESCING",
        "false",
    ),
    ("grpc-keepalive-secs", "VOXGATE_GRPC_KEEPALIVE_SECS", "10"),
    (
        "grpc-keepalive-timeout-secs",
        "VOXGATE_GRPC_KEEPALIVE_TIMEOUT_SECS",
        "10",
    ),
    ("header-timeout-secs", "VOXGATE_HEADER_TIMEOUT_SECS", "10"),
    ("body-timeout-secs", "VOXGATE_BODY_TIMEOUT_SECS", "10"),
    ("ingress", "VOXGATE_INGRESS", ""),
    ("ingress-tcp", "VOXGATE_INGRESS_TCP", ""),
    ("ingress-header", "VOXGATE_INGRESS_HEADER", ""),
    ("ingress-header-mode", "VOXGATE_INGRESS_HEADER_MODE", ""),
    ("ingress-country", "VOXGATE_INGRESS_COUNTRY", ""),
    ("ingress-cidr", "VOXGATE_INGRESS_CIDR", ""),
    ("ingress-default", "VOXGATE_INGRESS_DEFAULT", ""),
    ("trusted-proxies", "VOXGATE_TRUSTED_PROXIES", ""),
    ("tcp-listen", "VOXGATE_TCP_LISTEN", "same"),
    ("advertise-tcp", "VOXGATE_ADVERTISE_TCP", ""),
    ("no-advertise-tcp", "VOXGATE_NO_ADVERTISE_TCP", "false"),
    ("tcp-max-conns", "VOXGATE_TCP_MAX_CONNS", "4096"),
    ("tcp-max-conns-per-ip", "VOXGATE_TCP_MAX_CONNS_PER_IP", "16"),
    // Issue 37: caps per IPv6 /56 and /48, on tentative connections and per session.
    ("tcp-max-conns-per-56", "VOXGATE_TCP_MAX_CONNS_PER_56", "64"),
    (
        "tcp-max-conns-per-48",
        "VOXGATE_TCP_MAX_CONNS_PER_48",
        "256",
    ),
    ("tcp-max-tentative", "VOXGATE_TCP_MAX_TENTATIVE", "1024"),
    (
        "tcp-max-conns-per-session",
        "VOXGATE_TCP_MAX_CONNS_PER_SESSION",
        "8",
    ),
    (
        "tcp-first-frame-timeout-secs",
        "VOXGATE_TCP_FIRST_FRAME_TIMEOUT_SECS",
        "5",
    ),
    (
        "tcp-idle-timeout-secs",
        "VOXGATE_TCP_IDLE_TIMEOUT_SECS",
        "30",
    ),
    // Issue 37: worker registrations capped per gRPC connection and in total.
    (
        "max-workers-per-connection",
        "VOXGATE_MAX_WORKERS_PER_CONNECTION",
        "16",
    ),
    ("max-workers", "VOXGATE_MAX_WORKERS", "1024"),
];

/// The relay's flags, as [`TRANSCEIVER_FLAGS`].
const RELAY_FLAGS: &[(&str, &str, &str)] = &[
    ("listen", "VOXGATE_RELAY_LISTEN", "127.0.0.1:3478"),
    (
        "internal-listen",
        "VOXGATE_RELAY_INTERNAL_LISTEN",
        "127.0.0.1:3578",
    ),
    ("workers", "VOXGATE_RELAY_WORKERS", ""),
    ("fleet-key", "VOXGATE_RELAY_FLEET_KEY", ""),
    ("fleet-key-file", "VOXGATE_RELAY_FLEET_KEY_FILE", ""),
    ("fleet-key-id", "VOXGATE_RELAY_FLEET_KEY_ID", "1"),
    ("previous-fleet-key", "VOXGATE_RELAY_PREVIOUS_FLEET_KEY", ""),
    (
        "previous-fleet-key-file",
        "VOXGATE_RELAY_PREVIOUS_FLEET_KEY_FILE",
        "",
    ),
    (
        "previous-fleet-key-id",
        "VOXGATE_RELAY_PREVIOUS_FLEET_KEY_ID",
        "0",
    ),
    ("cluster-id", "VOXGATE_RELAY_CLUSTER_ID", "0"),
    ("peer-cluster", "VOXGATE_RELAY_PEER_CLUSTERS", ""),
    (
        "transceivers",
        "VOXGATE_RELAY_TRANSCEIVERS",
        "127.0.0.0/8,::1/128",
    ),
    (
        "max-tentative-per-ip",
        "VOXGATE_RELAY_MAX_TENTATIVE_PER_IP",
        "16",
    ),
    ("max-flows", "VOXGATE_RELAY_MAX_FLOWS", "100000"),
    (
        "max-tentative-percent",
        "VOXGATE_RELAY_MAX_TENTATIVE_PERCENT",
        "25",
    ),
    (
        "hint-max-age-secs",
        "VOXGATE_RELAY_HINT_MAX_AGE_SECS",
        "86400",
    ),
    (
        "accept-untimed-hints",
        "VOXGATE_RELAY_ACCEPT_UNTIMED_HINTS",
        "false",
    ),
    (
        "tentative-timeout-secs",
        "VOXGATE_RELAY_TENTATIVE_TIMEOUT_SECS",
        "5",
    ),
    ("idle-timeout-secs", "VOXGATE_RELAY_IDLE_TIMEOUT_SECS", "30"),
    ("redis", "VOXGATE_RELAY_REDIS", ""),
    ("route-ttl-secs", "VOXGATE_RELAY_ROUTE_TTL_SECS", "120"),
    ("lookup-rate", "VOXGATE_RELAY_LOOKUP_RATE", "200"),
    (
        "lookup-negative-ttl-secs",
        "VOXGATE_RELAY_LOOKUP_NEGATIVE_TTL_SECS",
        "5",
    ),
    (
        "metrics-listen",
        "VOXGATE_RELAY_METRICS_LISTEN",
        "127.0.0.1:9478",
    ),
    (
        "metrics-interval-ms",
        "VOXGATE_RELAY_METRICS_INTERVAL_MS",
        "500",
    ),
    (
        "socket-buffer-bytes",
        "VOXGATE_RELAY_SOCKET_BUFFER_BYTES",
        "4194304",
    ),
    ("tcp-listen", "VOXGATE_RELAY_TCP_LISTEN", ""),
    (
        "tcp-internal-listen",
        "VOXGATE_RELAY_TCP_INTERNAL_LISTEN",
        "",
    ),
    ("tcp-max-per-ip", "VOXGATE_RELAY_TCP_MAX_PER_IP", "64"),
    // Issue 37: caps per IPv6 /56 and /48, and tentative connections.
    ("tcp-max-per-56", "VOXGATE_RELAY_TCP_MAX_PER_56", "256"),
    ("tcp-max-per-48", "VOXGATE_RELAY_TCP_MAX_PER_48", "1024"),
    (
        "tcp-max-connections",
        "VOXGATE_RELAY_TCP_MAX_CONNECTIONS",
        "10000",
    ),
    (
        "tcp-max-tentative",
        "VOXGATE_RELAY_TCP_MAX_TENTATIVE",
        "2500",
    ),
    (
        "tcp-tentative-timeout-secs",
        "VOXGATE_RELAY_TCP_TENTATIVE_TIMEOUT_SECS",
        "5",
    ),
    (
        "tcp-first-frame-timeout-secs",
        "VOXGATE_RELAY_TCP_FIRST_FRAME_TIMEOUT_SECS",
        "5",
    ),
    (
        "tcp-idle-timeout-secs",
        "VOXGATE_RELAY_TCP_IDLE_TIMEOUT_SECS",
        "30",
    ),
    (
        "tcp-max-frame-bytes",
        "VOXGATE_RELAY_TCP_MAX_FRAME_BYTES",
        "2048",
    ),
    (
        "tcp-write-queue-bytes",
        "VOXGATE_RELAY_TCP_WRITE_QUEUE_BYTES",
        "16384",
    ),
];

#[test]
fn transceiver_flags_keep_their_names_env_twins_and_defaults() {
    assert_eq!(
        flag_set(TransceiverConfig::command()),
        table(TRANSCEIVER_FLAGS)
    );
}

#[test]
fn relay_flags_keep_their_names_env_twins_and_defaults() {
    assert_eq!(flag_set(RelayArgs::command()), table(RELAY_FLAGS));
}

/// `(long name, environment twin, defaults joined by commas)` of every flag but help/version.
fn flag_set(mut command: clap::Command) -> BTreeSet<(String, String, String)> {
    command.build();
    command
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .map(|a| {
            let defaults: Vec<_> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy())
                .collect();
            (
                a.get_long().unwrap_or_default().to_owned(),
                a.get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                defaults.join(","),
            )
        })
        .collect()
}

fn table(rows: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    rows.iter()
        .map(|(long, env, default)| (long.to_string(), env.to_string(), default.to_string()))
        .collect()
}

#[test]
fn flags_doc_is_generated_from_the_clap_definitions() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/FLAGS.md");
    let rendered = render();
    if std::env::var_os("VOXGATE_BLESS").is_some_and(|v| v != "0") {
        std::fs::write(&path, &rendered).expect("writing docs/FLAGS.md");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != rendered {
        let first_difference = on_disk
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(rendered.lines().count()));
        panic!(
            "docs/FLAGS.md is stale (first difference at line {}): it no longer matches the \
             flags' clap definitions. Regenerate it with `{BLESS}` and commit it.",
            first_difference + 1
        );
    }
}

/// The whole of `docs/FLAGS.md`.
fn render() -> String {
    let mut out = String::from(
        "# Command-line flags\n\n\
         Every flag of the transceiver and the relay, by help heading, with its environment \
         variable and default. `--help` prints the same, with the longer explanations.\n\n",
    );
    let _ = writeln!(
        out,
        "Generated from the clap definitions (`transceiver/src/control/config/`, \
         `relay/src/config/flags.rs`) by `transceiver/tests/flags.rs`, which fails when \
         this file is stale: do not edit it by hand, change the flag's doc comment and run \
         `{BLESS}`.\n"
    );
    render_binary(&mut out, TransceiverConfig::command());
    render_binary(&mut out, RelayArgs::command());
    out
}

/// One binary's section: its name and about line, then a table per help heading, in the order
/// the headings first appear.
fn render_binary(out: &mut String, mut command: clap::Command) {
    command.build();
    let _ = writeln!(out, "## {}\n", command.get_name());
    if let Some(about) = command.get_about() {
        let _ = writeln!(out, "{}\n", sentence(&about.to_string()));
    }
    let flags: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| {
            !matches!(
                a.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
        })
        .collect();
    let mut headings: Vec<&str> = Vec::new();
    for flag in &flags {
        let heading = flag.get_help_heading().unwrap_or("Options");
        if !headings.contains(&heading) {
            headings.push(heading);
        }
    }
    for heading in headings {
        let _ = writeln!(out, "### {heading}\n");
        out.push_str("| Flag | Environment | Default | What it does |\n");
        out.push_str("| --- | --- | --- | --- |\n");
        for flag in flags
            .iter()
            .filter(|f| f.get_help_heading().unwrap_or("Options") == heading)
        {
            render_flag(out, flag);
        }
        out.push('\n');
    }
}

fn render_flag(out: &mut String, flag: &clap::Arg) {
    let long = flag.get_long().expect("every flag has a long name");
    let takes_value = flag.get_action().takes_values();
    let name = match flag.get_value_names() {
        Some([value, ..]) if takes_value => format!("`--{long} <{value}>`"),
        _ => format!("`--{long}`"),
    };
    let env = flag
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default();
    let defaults: Vec<String> = flag
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let default = if takes_value && !defaults.is_empty() {
        format!("`{}`", defaults.join(","))
    } else {
        String::new()
    };
    let mut what = flag
        .get_help()
        .map(|h| sentence(&h.to_string()))
        .unwrap_or_default();
    let choices: Vec<String> = flag
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if takes_value && !choices.is_empty() {
        let _ = write!(what, " One of {}.", choices.join(", "));
    }
    let _ = writeln!(out, "| {name} | {env} | {default} | {} |", cell(&what));
}

/// clap drops the final period of a one-paragraph help; a table of sentences wants it back.
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// Text fit for one table cell: on one line, with `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
