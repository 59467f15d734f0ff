//! ICE over TCP through a real relay process: RFC 4571 frames from real TCP clients on
//! loopback reach a fake transceiver loop as version 2 relay datagrams, replies come back
//! length-prefixed; bad input, floods and slow readers are closed, capped or dropped, with
//! nothing answered and every refusal counted.

mod common;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, SystemTime};

use common::*;
use voxgate_proto::rfc4571::{encode_frame, read_frame, write_frame};
use voxgate_proto::{Direction, RelayHeader, Transport};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn connect(relay: &RelayProcess) -> TcpStream {
    tcp_from(LOCAL, relay.public, 3000)
}

fn tcp_conn_of(r: &Relayed) -> u32 {
    match r.header.transport {
        Transport::Tcp { conn } => conn,
        Transport::Udp => panic!("a TCP frame arrived as UDP: {r:?}"),
    }
}

#[test]
fn tcp_frames_are_forwarded_both_ways_and_two_connections_never_cross() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &[]);
    let lp = FakeLoop::new();

    let mut clients: Vec<TcpStream> = (0..2).map(|_| connect(&relay)).collect();
    let mut relayed_of: HashMap<SocketAddr, Relayed> = HashMap::new();
    for c in &mut clients {
        let check = binding_request(&hint(0, lp.addr()));
        write_frame(c, &check).unwrap();
        let got = lp.recv().expect("first frame forwarded");
        assert_eq!(got.header.direction, Direction::ToTransceiver);
        assert_eq!(
            got.header.client,
            c.local_addr().unwrap(),
            "the TCP peer address"
        );
        assert_eq!(got.payload, check, "the frame, without its length prefix");
        relayed_of.insert(got.header.client, got);
    }
    let ids: Vec<u32> = relayed_of.values().map(tcp_conn_of).collect();
    assert_ne!(
        ids[0], ids[1],
        "two connections from one IP get distinct ids"
    );

    // Several frames in one write, and one frame split over writes: each arrives whole.
    for (i, c) in clients.iter_mut().enumerate() {
        let mut burst = encode_frame(&dtls_like(1)).unwrap();
        burst.extend(encode_frame(&dtls_like(2)).unwrap());
        c.write_all(&burst).unwrap();
        let split = encode_frame(&[0x80 + i as u8; 300]).unwrap();
        c.write_all(&split[..100]).unwrap();
        c.flush().unwrap();
        std::thread::sleep(Duration::from_millis(30));
        c.write_all(&split[100..]).unwrap();
    }
    let mut later: HashMap<SocketAddr, Vec<Vec<u8>>> = HashMap::new();
    for _ in 0..6 {
        let got = lp.recv().expect("later frames forwarded");
        let first = &relayed_of[&got.header.client];
        assert_eq!(got.header, first.header, "same client and connection id");
        assert_eq!(got.from, first.from, "from the TCP thread's socket");
        later
            .entry(got.header.client)
            .or_default()
            .push(got.payload);
    }
    for (i, c) in clients.iter().enumerate() {
        let got = &later[&c.local_addr().unwrap()];
        assert_eq!(
            got,
            &[dtls_like(1), dtls_like(2), vec![0x80 + i as u8; 300]]
        );
    }
    assert!(lp.recv().is_none(), "nothing else reaches the loop");

    // Replies, interleaved between the two connections, reach only their own client,
    // byte-exact behind the length prefix.
    for round in 0..20u8 {
        for (client, relayed) in &relayed_of {
            let payload = format!("reply {round} for {client}").into_bytes();
            lp.reply_tcp(relayed, &payload);
        }
    }
    for c in &mut clients {
        let me = c.local_addr().unwrap();
        for round in 0..20u8 {
            let got = read_frame(c).expect("reply reaches the client");
            assert_eq!(got, format!("reply {round} for {me}").into_bytes());
        }
    }

    let tcp = [("transport", "tcp")];
    let up = relay.wait_metric(
        "voxgate_relay_packets_forwarded_total",
        &[("transport", "tcp"), ("direction", "to_transceiver")],
        Duration::from_secs(5),
        |v| v >= 8.0,
    );
    assert_eq!(up, 8.0);
    let down = relay.wait_metric(
        "voxgate_relay_packets_forwarded_total",
        &[("transport", "tcp"), ("direction", "to_client")],
        Duration::from_secs(5),
        |v| v >= 40.0,
    );
    assert_eq!(down, 40.0);
    assert_eq!(relay.metric("voxgate_relay_drops_total", &tcp), 0.0);
    assert_eq!(relay.metric("voxgate_relay_flows_created_total", &tcp), 2.0);
    assert_eq!(relay.metric("voxgate_relay_tcp_connections_open", &[]), 2.0);

    // A client that closes is forgotten; a reply for it is dropped as an unknown connection.
    let gone = clients.pop().unwrap();
    let gone_relayed = relayed_of[&gone.local_addr().unwrap()].clone();
    drop(gone);
    relay.wait_metric(
        "voxgate_relay_tcp_connections_open",
        &[],
        Duration::from_secs(5),
        |v| v == 1.0,
    );
    lp.reply_tcp(&gone_relayed, b"too late");
    let unknown = relay.wait_metric(
        "voxgate_relay_drops_total",
        &[("transport", "tcp"), ("reason", "unknown_conn")],
        Duration::from_secs(5),
        |v| v >= 1.0,
    );
    assert_eq!(unknown, 1.0);
    assert_eq!(
        relay.metric(
            "voxgate_relay_tcp_connections_closed_total",
            &[("reason", "client_closed")]
        ),
        1.0
    );
}

#[test]
fn bad_tcp_input_is_closed_with_nothing_sent_and_nothing_forwarded() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--tcp-first-frame-timeout-secs", "1"]);
    let lp = FakeLoop::new();
    let outside: SocketAddr = "10.11.12.13:4000".parse().unwrap();
    let long_ago = SystemTime::now() - Duration::from_secs(3 * 86_400);
    let mut forged = binding_request(&hint(0, lp.addr()));
    forged[28] ^= 0x20; // a letter of the ufrag changes case: still ICE characters, MAC fails

    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "garbage",
            encode_frame(b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n").unwrap(),
        ),
        ("oversized length prefix", vec![0xFF, 0xFF, 1, 2, 3]),
        ("forged hint", encode_frame(&forged).unwrap()),
        (
            "expired hint",
            encode_frame(&binding_request(&hint_minted(
                &fleet_key(),
                0,
                lp.addr(),
                long_ago,
            )))
            .unwrap(),
        ),
        (
            "hint outside --transceivers",
            encode_frame(&binding_request(&hint(0, outside))).unwrap(),
        ),
    ];
    for (what, bytes) in &cases {
        let mut c = connect(&relay);
        c.write_all(bytes).unwrap();
        assert_closed_silently(&mut c, Duration::from_secs(5), what);
    }

    // Slow drip: a valid first frame, one byte every 100 ms, never completes in time.
    let mut c = connect(&relay);
    let check = encode_frame(&binding_request(&hint(0, lp.addr()))).unwrap();
    let started = std::time::Instant::now();
    for b in &check[..20] {
        if c.write_all(&[*b]).is_err() {
            break; // already closed
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_closed_silently(&mut c, Duration::from_secs(5), "slow drip");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the timeout"
    );

    assert!(lp.recv().is_none(), "the loop never heard of any of them");
    let closed = |reason: &str| {
        relay.wait_metric(
            "voxgate_relay_tcp_connections_closed_total",
            &[("reason", reason)],
            Duration::from_secs(5),
            |v| v > 0.0,
        )
    };
    assert_eq!(closed("first_frame_rejected"), 4.0);
    assert_eq!(closed("frame_too_long"), 1.0);
    assert_eq!(closed("first_frame_timeout"), 1.0);
    let drop = |reason: &str| {
        relay.metric(
            "voxgate_relay_drops_total",
            &[("transport", "tcp"), ("reason", reason)],
        )
    };
    assert_eq!(drop("bad_stun"), 1.0);
    assert_eq!(drop("bad_hint"), 1.0);
    assert_eq!(drop("hint_expired"), 1.0);
    assert_eq!(drop("hint_destination"), 1.0);
    let tcp = [("transport", "tcp")];
    assert_eq!(
        relay.metric("voxgate_relay_packets_forwarded_total", &tcp),
        0.0
    );
    assert_eq!(relay.metric("voxgate_relay_flows_created_total", &tcp), 0.0);
    assert_eq!(relay.metric("voxgate_relay_tcp_connections_open", &[]), 0.0);
}

#[test]
fn ten_thousand_connections_from_one_ip_hit_the_cap_and_another_client_still_gets_through() {
    let ports = RelayPorts::new(1);
    let cap = 32;
    let relay = RelayProcess::start(
        &ports,
        1,
        &[
            "--tcp-max-per-ip",
            &cap.to_string(),
            "--tcp-first-frame-timeout-secs",
            "120",
        ],
    );
    let lp = FakeLoop::new();

    // Hold a few more than the cap open (silent), then keep knocking.
    let mut held = Vec::new();
    let mut refused_seen = 0;
    for i in 0..10_000 {
        let mut c = match TcpStream::connect(relay.public) {
            Ok(c) => c,
            Err(e) => panic!("connect {i}: {e}"),
        };
        if i < 2 * cap {
            held.push(c);
        } else if i % 500 == 0 {
            assert_closed_silently(&mut c, Duration::from_secs(5), "past the per-IP cap");
            refused_seen += 1;
        }
    }
    assert!(refused_seen > 0);
    let refused = relay.wait_metric(
        "voxgate_relay_tcp_connections_refused_total",
        &[("reason", "per_ip_cap")],
        Duration::from_secs(10),
        |v| v >= 10_000.0 - cap as f64,
    );
    assert_eq!(refused, 10_000.0 - cap as f64);
    assert_eq!(
        relay.metric("voxgate_relay_tcp_connections_accepted_total", &[]),
        cap as f64
    );
    assert_eq!(
        relay.metric("voxgate_relay_tcp_connections_open", &[]),
        cap as f64
    );

    // Another source (127.0.0.2) is served at once.
    let mut other = tcp_from("127.0.0.2".parse().unwrap(), relay.public, 3000);
    write_frame(&mut other, &binding_request(&hint(0, lp.addr()))).unwrap();
    let got = lp.recv().expect("the other client's check is forwarded");
    assert_eq!(
        got.header.client.ip(),
        "127.0.0.2".parse::<IpAddr>().unwrap()
    );
    lp.reply_tcp(&got, b"welcome");
    assert_eq!(
        read_frame(&mut other).ok().as_deref(),
        Some(&b"welcome"[..])
    );
    assert!(lp.recv().is_none(), "the flood forwarded nothing");
    drop(held);
}

#[test]
fn a_client_that_stops_reading_loses_its_oldest_replies_and_its_neighbour_loses_none() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--tcp-write-queue-bytes", "16384"]);
    let lp = FakeLoop::new();
    let open = |lp: &FakeLoop| {
        // A small receive buffer, so the stalled client's kernel fills up quickly.
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&relay.public.into()).unwrap();
        let mut c: TcpStream = socket.into();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        write_frame(&mut c, &binding_request(&hint(0, lp.addr()))).unwrap();
        let relayed = lp.recv().expect("check forwarded");
        (c, relayed)
    };
    let (stalled, stalled_relayed) = open(&lp);
    let (mut reader, reader_relayed) = open(&lp);
    let rss_before = rss_kib(&relay);

    // Flood the stalled client until its queue drops (paced, so the UDP hop loses nothing).
    let payload = vec![0xAB; 1000];
    let mut sent = 0;
    let dropped = loop {
        for _ in 0..200 {
            lp.reply_tcp(&stalled_relayed, &payload);
        }
        sent += 200;
        std::thread::sleep(Duration::from_millis(20));
        let d = relay.metric(
            "voxgate_relay_drops_total",
            &[("transport", "tcp"), ("reason", "write_queue_full")],
        );
        if d > 0.0 {
            break d;
        }
        assert!(sent < 200_000, "no write-queue drop after {sent} replies");
    };
    assert!(dropped > 0.0);

    // The neighbour gets every reply, while the stalled client keeps being sent more.
    for i in 0..200u32 {
        lp.reply_tcp(&stalled_relayed, &payload);
        lp.reply_tcp(&reader_relayed, &i.to_be_bytes());
        assert_eq!(
            read_frame(&mut reader).ok().as_deref(),
            Some(&i.to_be_bytes()[..]),
            "reply {i} to the reading client"
        );
    }
    let rss_after = rss_kib(&relay);
    assert!(
        rss_after < rss_before + 8 * 1024,
        "relay memory grew from {rss_before} to {rss_after} KiB"
    );
    assert_eq!(
        relay.metric("voxgate_relay_tcp_connections_open", &[]),
        2.0,
        "a slow reader is not closed for being slow"
    );
    drop(stalled);
}

#[test]
fn tcp_replies_from_outside_the_transceivers_or_the_wrong_source_are_dropped() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--transceivers", "127.0.0.1/32"]);
    let lp = FakeLoop::new();
    let mut c = connect(&relay);
    write_frame(&mut c, &binding_request(&hint(0, lp.addr()))).unwrap();
    let relayed = lp.recv().expect("check forwarded");
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();

    let reply = frame_with(
        &RelayHeader {
            direction: Direction::ToClient,
            ..relayed.header
        },
        b"not from the loop",
    );
    let outsider = udp_on("127.0.0.2", 200);
    outsider.send_to(&reply, relayed.from).unwrap();
    let other_port = udp(200);
    other_port.send_to(&reply, relayed.from).unwrap();
    let udp_header = frame(Direction::ToClient, relayed.header.client, b"udp, not tcp");
    lp.sock.send_to(&udp_header, relayed.from).unwrap();
    assert_eq!(
        read_frame(&mut c).ok(),
        None,
        "none of them reaches the client"
    );

    let drop = |reason: &str| {
        relay.wait_metric(
            "voxgate_relay_drops_total",
            &[("transport", "tcp"), ("reason", reason)],
            Duration::from_secs(5),
            |v| v > 0.0,
        )
    };
    assert_eq!(drop("spoofed_return"), 1.0);
    assert_eq!(drop("wrong_source"), 1.0);
    assert_eq!(drop("bad_header"), 1.0);
    // The real loop still gets through.
    lp.reply_tcp(&relayed, b"from the loop");
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert_eq!(
        read_frame(&mut c).ok().as_deref(),
        Some(&b"from the loop"[..])
    );
}

#[test]
fn tcp_listen_off_leaves_the_port_closed() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--tcp-listen", "off"]);
    assert!(TcpStream::connect(relay.public).is_err());
}
