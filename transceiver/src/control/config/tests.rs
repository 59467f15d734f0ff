use std::net::IpAddr;

use super::*;
use crate::media::audio_bridge::{CoarseTicks, OpusApplication};

fn parse(args: &[&str]) -> Config {
    let mut v = vec!["transceiver"];
    v.extend_from_slice(args);
    Config::try_parse_from(v).expect("valid args")
}

#[test]
fn loops_bind_consecutive_ports() {
    let c = parse(&["--media-listen", "127.0.0.1:5000", "--loops", "3"]);
    assert_eq!(c.loop_count().unwrap(), 3);
    assert_eq!(c.listen.loop_listen(2), "127.0.0.1:5002".parse().unwrap());
}

#[test]
fn control_threads_default_to_one_per_two_loops() {
    assert_eq!(parse(&[]).media.control_threads(1), 1);
    assert_eq!(parse(&[]).media.control_threads(2), 1);
    assert_eq!(parse(&[]).media.control_threads(16), 8);
    assert_eq!(
        parse(&["--control-threads", "3"]).media.control_threads(1),
        3
    );
    assert!(Config::try_parse_from(["transceiver", "--control-threads", "0"]).is_err());
}

#[test]
fn coarse_ticks_default_to_two_grids_up_to_256_sessions() {
    assert_eq!(parse(&[]).media.coarse_ticks(), CoarseTicks::default());
    assert_eq!(
        parse(&[]).media.coarse_ticks(),
        CoarseTicks {
            up_to: 256,
            grids: 2
        }
    );
    let c = parse(&["--coarse-ticks-up-to", "0", "--coarse-tick-grids", "5"]);
    assert_eq!(c.media.coarse_ticks(), CoarseTicks { up_to: 0, grids: 5 });
    assert_eq!(
        parse(&["--coarse-tick-grids", "1"])
            .media
            .coarse_ticks()
            .grids,
        1
    );
}

#[test]
fn coarse_tick_grids_other_than_1_2_or_5_are_refused() {
    for bad in ["0", "3", "4", "10", "20", "-2", "two", ""] {
        // `=`, so that "-2" reaches the value parser instead of reading as a flag.
        let arg = format!("--coarse-tick-grids={bad}");
        let err = Config::try_parse_from(["transceiver", arg.as_str()])
            .expect_err(bad)
            .to_string();
        assert!(
            err.contains("--coarse-tick-grids") && err.contains("must be 1, 2 or 5"),
            "{bad:?}: {err}"
        );
    }
    let err = Config::try_parse_from(["transceiver", "--coarse-ticks-up-to=-1"])
        .expect_err("a session count is not negative")
        .to_string();
    assert!(err.contains("invalid value '-1'"), "{err}");
}

#[test]
fn port_range_overflow_is_an_error() {
    let c = parse(&["--media-listen", "127.0.0.1:65535", "--loops", "2"]);
    assert!(matches!(c.loop_count(), Err(ConfigError::PortOverflow(..))));
}

#[test]
fn wildcard_media_listen_needs_an_internal_ip() {
    let c = parse(&["--media-listen", "0.0.0.0:5000"]);
    assert!(matches!(c.internal_ip(), Err(ConfigError::NoInternalIp(_))));
    let c = parse(&[
        "--media-listen",
        "0.0.0.0:5000",
        "--internal-ip",
        "10.1.2.3",
    ]);
    assert_eq!(
        c.internal_ip().unwrap(),
        "10.1.2.3".parse::<IpAddr>().unwrap()
    );
}

#[test]
fn relays_take_a_cidr_list_and_default_to_none() {
    assert!(parse(&[]).routing.relays.is_empty());
    let c = parse(&["--relays", "10.0.0.0/8,::1/128,192.0.2.7"]);
    assert_eq!(c.routing.relays.len(), 3);
    assert_eq!(
        c.routing.relays[2],
        "192.0.2.7/32".parse::<ipnet::IpNet>().unwrap()
    );
    assert!(Config::try_parse_from(["transceiver", "--relays", "10.0.0.1:3478"]).is_err());
}

#[test]
fn opus_application_defaults_to_voip_and_takes_lowdelay() {
    assert_eq!(parse(&[]).encoder.opus_application, OpusApplication::Voip);
    let c = parse(&["--opus-application", "lowdelay"]);
    assert_eq!(c.encoder.opus_application, OpusApplication::Lowdelay);
    assert_eq!(
        c.encoder.opus_application.to_opus(),
        opus::Application::LowDelay
    );
    assert_eq!(
        parse(&["--opus-application", "audio"])
            .encoder
            .opus_application,
        OpusApplication::Audio
    );
    assert!(Config::try_parse_from(["transceiver", "--opus-application", "celt"]).is_err());
}

#[test]
fn advertise_takes_a_comma_list() {
    let c = parse(&["--advertise", "10.0.0.1:3478,[::1]:3478"]);
    assert_eq!(c.ingress.advertise.len(), 2);
}

#[test]
fn ingress_flags_build_a_selector_and_env_takes_semicolons() {
    let c = parse(&[
        "--ingress",
        "eu=198.51.100.10:3478,[2001:db8::10]:3478",
        "--ingress",
        "us=203.0.113.10:3478",
        "--ingress-tcp",
        "us=203.0.113.10:443",
        "--ingress-header",
        "CF-IPCountry",
        "--ingress-country",
        "DE=eu,US=us",
        "--ingress-cidr",
        "192.0.2.0/24=us",
        "--ingress-default",
        "us",
        "--trusted-proxies",
        "10.0.0.0/8",
    ]);
    let s = c.ingress.selector().unwrap().expect("an ingress map");
    assert_eq!(s.ingresses().len(), 2);
    assert_eq!(s.ingresses()[0].udp.len(), 2);
    assert_eq!(
        s.ingresses()[1].tcp,
        vec!["203.0.113.10:443".parse().unwrap()]
    );
    assert_eq!(&*s.default_ingress().name, "us");
    assert_eq!(s.header().map(|h| h.as_str()), Some("cf-ipcountry"));
    assert_eq!(c.ingress.trusted_proxies.len(), 1);
    // The environment twin separates entries with ';' (addresses use ',').
    let c = Config::try_parse_from([
        "transceiver",
        "--ingress",
        "eu=192.0.2.1:3478;us=192.0.2.2:3478,[::1]:3478",
    ])
    .unwrap();
    assert_eq!(c.ingress.ingresses.len(), 2);
    assert_eq!(c.ingress.ingresses[1].1.len(), 2);
}

#[test]
fn advertise_is_the_default_ingress_and_excludes_ingress() {
    let c = parse(&["--advertise", "192.0.2.1:3478"]);
    let s = c.ingress.selector().unwrap().unwrap();
    assert_eq!(&*s.default_ingress().name, "default");
    assert_eq!(s.default_ingress().tcp, s.default_ingress().udp);
    assert!(
        parse(&[]).ingress.selector().unwrap().is_none(),
        "direct mode"
    );
    let c = parse(&[
        "--advertise",
        "192.0.2.1:3478",
        "--ingress",
        "eu=192.0.2.2:3478",
    ]);
    let err = c.ingress.selector().unwrap_err().to_string();
    assert!(err.contains("--advertise and --ingress"), "{err}");
}

#[test]
fn advertise_tcp_is_the_tcp_of_the_advertise_ingress_only() {
    let c = parse(&[
        "--advertise",
        "192.0.2.1:3478",
        "--advertise-tcp",
        "192.0.2.1:443",
    ]);
    let s = c.ingress.selector().unwrap().unwrap();
    assert_eq!(
        s.default_ingress().tcp,
        vec!["192.0.2.1:443".parse().unwrap()]
    );
    let err = parse(&["--advertise-tcp", "192.0.2.1:443"])
        .ingress
        .selector()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--advertise-tcp needs --ingress"), "{err}");
    assert!(parse(&[]).ice_tcp.advertise_tcp_candidates());
    assert!(!parse(&["--no-advertise-tcp"])
        .ice_tcp
        .advertise_tcp_candidates());
}

#[test]
fn ingress_rule_errors_name_the_flag() {
    let err = parse(&[
        "--ingress",
        "eu=192.0.2.1:3478",
        "--ingress-cidr",
        "10.0.0.0/8=us",
    ])
    .ingress
    .selector()
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--ingress-cidr") && err.contains("\"us\""),
        "{err}"
    );
    let err = parse(&["--ingress-default", "eu"])
        .ingress
        .selector()
        .unwrap_err()
        .to_string();
    assert!(err.contains("--ingress-default needs --ingress"), "{err}");
    for bad in [
        ["--ingress", "eu"],
        ["--ingress-cidr", "10.0.0.0/40=eu"],
        ["--trusted-proxies", "10.0.0.0/40"],
        ["--ingress-country", "Germany=eu"],
        ["--ingress-header-mode", "city"],
    ] {
        let mut v = vec!["transceiver"];
        v.extend_from_slice(&bad);
        assert!(Config::try_parse_from(v).is_err(), "{bad:?}");
    }
}

#[test]
fn bad_fleet_key_is_rejected_without_echoing_it() {
    let c = parse(&["--fleet-key", "zz-not-hex-secret"]);
    let err = c.routing.fleet_key().unwrap_err().to_string();
    assert!(!err.contains("zz-not-hex-secret"), "{err}");
}

#[test]
fn an_empty_token_is_a_configuration_error() {
    let c = parse(&["--token", ""]);
    let err = c.check_auth().unwrap_err().to_string();
    assert!(
        err.contains("VOXGATE_TOKEN") && err.contains("empty"),
        "{err}"
    );
    let c = parse(&["--grpc-token", ""]);
    assert!(matches!(c.check_auth(), Err(ConfigError::EmptyToken(_))));
}

#[test]
fn a_public_bind_needs_a_token_unless_insecure_no_auth() {
    assert!(
        parse(&[]).check_auth().is_ok(),
        "loopback defaults are fine"
    );
    let c = parse(&["--signal-listen", "0.0.0.0:8080"]);
    let err = c.check_auth().unwrap_err().to_string();
    assert!(
        err.contains("not loopback") && err.contains("--insecure-no-auth"),
        "{err}"
    );
    let c = parse(&["--grpc-listen", "[::]:50051", "--token", "t"]);
    assert!(matches!(
        c.check_auth(),
        Err(ConfigError::PublicWithoutToken { .. })
    ));
    let c = parse(&["--signal-listen", "0.0.0.0:8080", "--token", "t"]);
    assert!(c.check_auth().is_ok());
    let c = parse(&["--signal-listen", "0.0.0.0:8080", "--insecure-no-auth"]);
    assert!(c.check_auth().is_ok());
}

#[test]
fn grpc_needs_a_credential_whenever_signaling_does() {
    let credential = |args: &[&str]| {
        parse(args)
            .grpc_admission()
            .map(|a| a.credential.map(|c| c.to_string()))
    };
    // Nothing configured (loopback): open, as before.
    assert_eq!(credential(&[]).unwrap(), None);
    // Its own token; else the signaling one.
    assert_eq!(
        credential(&["--grpc-token", "g", "--token", "s"]).unwrap(),
        Some("g".to_string())
    );
    assert_eq!(
        credential(&["--token", "s"]).unwrap(),
        Some("s".to_string())
    );
    // Per-call tokens alone leave nothing to fall back on: refused, naming --grpc-token, and
    // --insecure-no-auth is no way around it.
    for args in [
        &["--token-key-file", "/k"][..],
        &["--token-key-file", "/k", "--insecure-no-auth"][..],
    ] {
        let c = parse(args);
        let err = c.check_auth().unwrap_err();
        assert!(matches!(err, ConfigError::GrpcWithoutCredential), "{err}");
        assert!(err.to_string().contains("set --grpc-token"), "{err}");
    }
    let c = parse(&["--token-key-file", "/k", "--grpc-token", "g"]);
    assert!(c.check_auth().is_ok());
    // The registration caps and their defaults.
    let limits = parse(&[]).backend.worker_limits();
    assert_eq!((limits.per_connection, limits.total), (16, 1024));
}

#[test]
fn absent_fleet_key_is_random_per_process() {
    let c = parse(&[]);
    let (_, source) = c.routing.fleet_key().unwrap();
    assert_eq!(source, KeySource::RandomPerProcess);
}

#[test]
fn a_fleet_key_with_advertised_addresses_needs_relays_or_no_relays() {
    const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let err = parse(&["--fleet-key", KEY, "--advertise", "203.0.113.7:3478"])
        .check_relays()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--relays") && err.contains("--advertise") && err.contains("--no-relays"),
        "{err}"
    );
    let c = parse(&[
        "--fleet-key-file",
        "/k",
        "--ingress",
        "eu=198.51.100.10:3478",
    ]);
    assert!(matches!(
        c.check_relays(),
        Err(ConfigError::FleetKeyWithoutRelays {
            advertised: "--ingress"
        })
    ));
    for ok in [
        &[
            "--fleet-key",
            KEY,
            "--advertise",
            "203.0.113.7:3478",
            "--relays",
            "10.0.0.0/8",
        ][..],
        &[
            "--fleet-key",
            KEY,
            "--advertise",
            "203.0.113.7:3478",
            "--no-relays",
        ][..],
        &["--advertise", "203.0.113.7:3478"][..],
        &["--fleet-key", KEY][..],
    ] {
        assert!(parse(ok).check_relays().is_ok(), "{ok:?}");
    }
    assert!(
        Config::try_parse_from(["transceiver", "--relays", "10.0.0.0/8", "--no-relays"]).is_err()
    );
}

#[test]
fn ice_tcp_limits_default_to_the_documented_caps() {
    let limits = parse(&[]).ice_tcp.tcp_limits();
    assert_eq!(limits.max_conns, 4096);
    assert_eq!(limits.max_tentative, 1024);
    assert_eq!(limits.max_conns_per_session, 8);
    assert_eq!(limits.per_source.per_source, 16);
    assert_eq!(limits.per_source.per_56, 64);
    assert_eq!(limits.per_source.per_48, 256);
    let limits = parse(&["--tcp-max-conns-per-56", "5", "--tcp-max-tentative", "7"])
        .ice_tcp
        .tcp_limits();
    assert_eq!((limits.per_source.per_56, limits.max_tentative), (5, 7));
    for zero in [
        "--tcp-max-conns-per-56",
        "--tcp-max-conns-per-48",
        "--tcp-max-tentative",
        "--tcp-max-conns-per-session",
    ] {
        assert!(
            Config::try_parse_from(["transceiver", zero, "0"]).is_err(),
            "{zero} 0"
        );
    }
}

#[test]
fn resume_keys_are_shared_through_the_fleet_key_and_random_without_one() {
    use crate::auth::{Creator, ResumeClaims};
    let claims = ResumeClaims {
        call_id: 1,
        generation: 1,
        session_id: 1,
        worker: String::new(),
        creator: Creator::Anyone,
        expires_at: 100,
    };
    let c = parse(&[]);
    let fleet = [7u8; 32];
    let a = c.auth.authenticator(Some(&fleet)).unwrap().resume_key;
    let b = c.auth.authenticator(Some(&fleet)).unwrap().resume_key;
    assert_eq!(b.verify(&a.mint(&claims), 50), Ok(claims.clone()));
    // Without a shared secret each process draws its own: no pod accepts another's.
    let lone = c.auth.authenticator(None).unwrap().resume_key;
    assert!(lone.verify(&a.mint(&claims), 50).is_err());
    assert!(c
        .auth
        .authenticator(None)
        .unwrap()
        .resume_key
        .verify(&lone.mint(&claims), 50)
        .is_err());
}
