use clap::Parser;

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

#[test]
fn tcp_connections_are_tentative_until_answered_and_capped_per_ipv6_prefix_by_default() {
    let tcp = parse(&[]).unwrap().tcp.unwrap();
    assert_eq!(tcp.max_tentative, 2_500);
    assert_eq!(tcp.tentative_timeout, Duration::from_secs(5));
    assert_eq!(tcp.max_per_56, 256);
    assert_eq!(tcp.max_per_48, 1024);
    for zero in [
        "--tcp-max-tentative",
        "--tcp-tentative-timeout-secs",
        "--tcp-max-per-56",
        "--tcp-max-per-48",
    ] {
        assert!(parse(&[zero, "0"]).is_err(), "{zero} 0");
    }
}
