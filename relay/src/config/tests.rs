use std::collections::BTreeSet;

use clap::{CommandFactory, Parser};

use super::*;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn parse(extra: &[&str]) -> Result<Config, ConfigError> {
    let mut argv = vec!["relay", "--fleet-key", KEY];
    argv.extend_from_slice(extra);
    Config::from_args(Args::try_parse_from(argv).expect("clap accepts"))
}

#[test]
fn defaults_match_the_documented_values() {
    let c = parse(&["--workers", "2"]).unwrap();
    assert_eq!(c.listen, "127.0.0.1:3478".parse().unwrap());
    assert_eq!(c.internal_listen, "127.0.0.1:3578".parse().unwrap());
    assert_eq!(c.metrics_listen, "127.0.0.1:9478".parse().unwrap());
    assert_eq!(c.routing.cluster_id, 0);
    assert_eq!(c.routing.max_tentative_per_ip, 16);
    assert_eq!(c.routing.max_flows, 100_000);
    assert_eq!(c.routing.max_tentative, 25_000);
    assert_eq!(c.routing.hint_max_age, Duration::from_secs(86_400));
    assert!(!c.routing.accept_untimed_hints);
    assert_eq!(c.routing.tentative_timeout, Duration::from_secs(5));
    assert_eq!(c.routing.idle_timeout, Duration::from_secs(30));
    assert_eq!(c.route_ttl, Duration::from_secs(120));
    assert!(!c.routing.lookups);
    assert!(c.routing.is_transceiver("127.0.0.9".parse().unwrap()));
    assert!(c.routing.is_transceiver("::1".parse().unwrap()));
    assert!(!c.routing.is_transceiver("10.0.0.1".parse().unwrap()));
}

#[test]
fn peer_clusters_parse_repeated_and_comma_separated() {
    let c = parse(&[
        "--peer-cluster",
        "7=10.1.0.1:3478,8=10.2.0.1:3478",
        "--peer-cluster",
        "9=[2001:db8::1]:3478",
    ])
    .unwrap();
    assert_eq!(c.routing.peers.len(), 3);
    assert_eq!(
        c.routing.peer_for(8),
        Some("10.2.0.1:3478".parse().unwrap())
    );
    assert!(c.routing.is_peer_ip("2001:db8::1".parse().unwrap()));
    assert!(Args::try_parse_from(["relay", "--peer-cluster", "x=1.2.3.4:5"]).is_err());
}

#[test]
fn tentative_share_is_a_percentage_of_max_flows_and_never_zero() {
    let c = parse(&["--max-flows", "1000", "--max-tentative-percent", "10"]).unwrap();
    assert_eq!(c.routing.max_tentative, 100);
    let c = parse(&["--max-flows", "3", "--max-tentative-percent", "1"]).unwrap();
    assert_eq!(c.routing.max_tentative, 1);
    for bad in ["0", "101"] {
        let argv = ["relay", "--fleet-key", KEY, "--max-tentative-percent", bad];
        assert!(Args::try_parse_from(argv).is_err(), "{bad}");
    }
    assert!(matches!(
        parse(&["--hint-max-age-secs", "0"]),
        Err(ConfigError::OutOfRange(_))
    ));
}

#[test]
fn tcp_listens_beside_udp_by_default_and_can_be_turned_off() {
    let c = parse(&[]).unwrap();
    let tcp = c.tcp.expect("on by default");
    assert_eq!(tcp.listen, None, "same address as --listen");
    assert_eq!(tcp.max_per_ip, 64);
    assert_eq!(tcp.max_connections, 10_000);
    assert_eq!(tcp.first_frame_timeout, Duration::from_secs(5));
    assert_eq!(tcp.idle_timeout, Duration::from_secs(30));
    assert_eq!(tcp.max_frame, 2048);
    assert_eq!(tcp.write_queue_bytes, 16_384);
    let c = parse(&["--tcp-listen", "0.0.0.0:443"]).unwrap();
    assert_eq!(c.tcp.unwrap().listen, Some("0.0.0.0:443".parse().unwrap()));
    assert!(parse(&["--tcp-listen", "off"]).unwrap().tcp.is_none());
    assert!(Args::try_parse_from(["relay", "--tcp-listen", "nowhere"]).is_err());
    assert!(matches!(
        parse(&["--tcp-write-queue-bytes", "100"]),
        Err(ConfigError::OutOfRange(_))
    ));
    let c = parse(&["--internal-listen", "10.0.0.5:3578"]).unwrap();
    assert_eq!(
        c.tcp.unwrap().internal_listen,
        "10.0.0.5:0".parse().unwrap()
    );
    let c = parse(&["--tcp-internal-listen", "10.0.0.5:3600"]).unwrap();
    assert_eq!(
        c.tcp.unwrap().internal_listen,
        "10.0.0.5:3600".parse().unwrap()
    );
}

#[test]
fn own_cluster_as_peer_is_rejected() {
    assert!(matches!(
        parse(&["--cluster-id", "3", "--peer-cluster", "3=10.0.0.1:3478"]),
        Err(ConfigError::PeerIsSelf(3))
    ));
}

#[test]
fn missing_or_bad_key_is_rejected_without_echoing_it() {
    let args = Args::try_parse_from(["relay"]).unwrap();
    assert!(matches!(
        Config::from_args(args),
        Err(ConfigError::MissingFleetKey)
    ));
    let secret = "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    let args = Args::try_parse_from(["relay", "--fleet-key", secret]).unwrap();
    let err = Config::from_args(args).unwrap_err().to_string();
    assert!(!err.contains("0102030405"), "{err}");
}

#[test]
fn keys_are_read_from_files_with_their_ids() {
    let dir = std::env::temp_dir();
    let current = dir.join(format!("voxgate-relay-key-{}", std::process::id()));
    std::fs::write(&current, format!("{KEY}\n")).unwrap();
    let args = Args::try_parse_from([
        "relay",
        "--fleet-key-file",
        current.to_str().unwrap(),
        "--fleet-key-id",
        "7",
        "--previous-fleet-key",
        KEY,
        "--previous-fleet-key-id",
        "6",
    ])
    .unwrap();
    let c = Config::from_args(args).unwrap();
    std::fs::remove_file(&current).unwrap();
    assert_eq!(c.routing.keyring.current().id(), 7);
    let missing = Args::try_parse_from(["relay", "--fleet-key-file", "/nonexistent/key"]);
    assert!(matches!(
        Config::from_args(missing.unwrap()),
        Err(ConfigError::KeyFile { .. })
    ));
}

#[test]
fn config_debug_does_not_print_the_key() {
    let c = parse(&[
        "--previous-fleet-key",
        KEY,
        "--redis",
        "redis://:hunter2@10.0.0.9:6379",
    ])
    .unwrap();
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("hunter2"), "{dbg}");
    assert!(!dbg.contains("0102"), "{dbg}");
    assert!(!dbg.contains("[0, 1, 2"), "{dbg}");
}

/// Every flag with its environment twin and default, as they were before the flags were put
/// in groups: a flag renamed, an environment twin lost or a default changed fails
/// `flags_keep_their_names_env_twins_and_defaults`.
const FLAGS: &[(&str, &str, &str)] = &[
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
    (
        "tcp-max-connections",
        "VOXGATE_RELAY_TCP_MAX_CONNECTIONS",
        "10000",
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
fn flags_keep_their_names_env_twins_and_defaults() {
    let mut command = Args::command();
    command.build();
    let got: BTreeSet<(String, String, String)> = command
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
        .collect();
    let want: BTreeSet<(String, String, String)> = FLAGS
        .iter()
        .map(|(long, env, default)| (long.to_string(), env.to_string(), default.to_string()))
        .collect();
    assert_eq!(got, want);
}
