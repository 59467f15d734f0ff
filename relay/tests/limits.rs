//! A real relay's limits on who may open flows, with real sockets: hints naming a loop
//! outside `--transceivers`, expired and future hints, a tentative flood from many IPv4
//! sources (the global tentative cap), and an IPv6 /64 flood inside a network namespace.
//! Each refusal must create no flow, reach nobody, and be counted by reason; legitimate
//! clients must keep their flows and new ones must still get one.

mod common;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::*;

const HOUR: Duration = Duration::from_secs(3600);

/// Sends a check for `ufrag` from `client` and says whether `lp` received it (as a framed
/// datagram naming that client) within the loop's read timeout, skipping anything else.
fn reaches(relay: &RelayProcess, lp: &FakeLoop, client: &UdpSocket, ufrag: &str) -> bool {
    let me = client.local_addr().unwrap();
    client
        .send_to(&binding_request(ufrag), relay.public)
        .unwrap();
    while let Some(got) = lp.recv() {
        if got.header.client == me {
            return true;
        }
    }
    false
}

/// Opens and establishes a flow for `client` through `lp`; returns the relay worker's
/// internal address the loop answers to.
fn establish(relay: &RelayProcess, lp: &FakeLoop, client: &UdpSocket) -> SocketAddr {
    let me = client.local_addr().unwrap();
    client
        .send_to(&binding_request(&hint(0, lp.addr())), relay.public)
        .unwrap();
    let got = std::iter::from_fn(|| lp.recv())
        .find(|g| g.header.client == me)
        .expect("the check reaches the loop");
    lp.reply(got.from, me, b"welcome");
    let (_, back) = recv(client).expect("the reply reaches the client");
    assert_eq!(back, b"welcome");
    got.from
}

/// Both directions of an established flow still work.
fn round_trip(relay: &RelayProcess, lp: &FakeLoop, client: &UdpSocket, worker: SocketAddr) {
    let me = client.local_addr().unwrap();
    let payload = dtls_like(7);
    client.send_to(&payload, relay.public).unwrap();
    let got = std::iter::from_fn(|| lp.recv())
        .find(|g| g.header.client == me)
        .unwrap_or_else(|| panic!("{me}'s datagram did not reach the loop"));
    assert_eq!(got.payload, payload);
    lp.reply(worker, me, b"still here");
    let (_, back) = recv(client).unwrap_or_else(|| panic!("no reply reached {me}"));
    assert_eq!(back, b"still here");
}

fn drops(relay: &RelayProcess, reason: &str, at_least: f64) -> f64 {
    relay.wait_metric(
        "voxgate_relay_drops_total",
        &[("reason", reason)],
        Duration::from_secs(5),
        |v| v >= at_least,
    )
}

#[test]
fn hint_naming_a_loop_outside_the_transceiver_networks_is_dropped_and_counted() {
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(&ports, 1, &["--transceivers", "127.0.0.1/32"]);
    let inside = FakeLoop::new();
    // A loopback address, but not in --transceivers: what an attacker would aim the relay at.
    let outside = FakeLoop {
        sock: udp_on("127.0.0.2", 300),
    };
    let client = udp(500);
    assert!(!reaches(
        &relay,
        &outside,
        &client,
        &hint(0, outside.addr())
    ));
    assert_eq!(drops(&relay, "hint_destination", 1.0), 1.0);
    assert_eq!(relay.metric("voxgate_relay_flows_active", &[]), 0.0);
    // The same client with a hint naming an allowed loop gets its flow.
    assert!(reaches(&relay, &inside, &client, &hint(0, inside.addr())));
}

#[test]
fn expired_and_future_hints_are_dropped_and_counted_and_fresh_ones_route() {
    let ports = RelayPorts::new(1);
    // One hour, so a hint minted two hours ago is expired whatever the skew allowance.
    let relay = RelayProcess::start(&ports, 1, &["--hint-max-age-secs", "3600"]);
    let lp = FakeLoop::new();
    let key = fleet_key();
    let now = SystemTime::now();

    let old = udp(500);
    let expired = hint_minted(&key, 0, lp.addr(), now - 2 * HOUR);
    assert!(!reaches(&relay, &lp, &old, &expired));
    assert_eq!(drops(&relay, "hint_expired", 1.0), 1.0);

    let early = udp(500);
    let future = hint_minted(&key, 0, lp.addr(), now + HOUR);
    assert!(!reaches(&relay, &lp, &early, &future));
    assert_eq!(drops(&relay, "hint_from_future", 1.0), 1.0);
    assert_eq!(relay.metric("voxgate_relay_flows_active", &[]), 0.0);

    // Within the max age, and a little ahead (transceiver clock 1 min fast): both route.
    let recent = udp(500);
    assert!(reaches(
        &relay,
        &lp,
        &recent,
        &hint_minted(&key, 0, lp.addr(), now - HOUR / 2)
    ));
    let skewed = udp(500);
    assert!(reaches(
        &relay,
        &lp,
        &skewed,
        &hint_minted(&key, 0, lp.addr(), now + Duration::from_secs(60))
    ));
}

#[test]
fn a_tentative_flood_from_many_ipv4_sources_evicts_oldest_first_and_spares_established_flows() {
    const FLOOD: usize = 400;
    const TENTATIVE_CAP: f64 = 20.0; // 20 % of --max-flows 100
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start(
        &ports,
        1,
        &[
            "--max-flows",
            "100",
            "--max-tentative-percent",
            "20",
            "--max-tentative-per-ip",
            "2",
            "--tentative-timeout-secs",
            "120",
            "--metrics-interval-ms",
            "20",
        ],
    );
    let lp = FakeLoop::new();
    let legit: Vec<UdpSocket> = (0..10).map(|_| udp(1000)).collect();
    let workers: Vec<SocketAddr> = legit.iter().map(|c| establish(&relay, &lp, c)).collect();

    // The flood: one valid check from each of 400 addresses of 127.1.0.0/16; nobody ever
    // answers them, so they all stay tentative.
    let flooders: Vec<UdpSocket> = (0..FLOOD)
        .map(|i| {
            let ip = format!("127.1.{}.{}", i / 250, 1 + i % 250);
            udp_on(&ip, 50)
        })
        .collect();
    // Aimed at a loop of its own: the flood must not fill the legitimate loop's socket
    // buffer, which would drop the round trips below before the relay is even involved.
    let sink = FakeLoop::new();
    flood(&relay, &sink, &flooders);
    // Most of the flood reached the relay (a busy machine may drop some at its socket).
    let created = relay.wait_metric(
        "voxgate_relay_flows_created_total",
        &[],
        Duration::from_secs(10),
        |v| v >= (10 + FLOOD) as f64,
    );
    assert!(
        created >= (10 + FLOOD / 2) as f64,
        "only {created} flows created"
    );
    // One eviction per flood flow past the cap, oldest first.
    let evicted = relay.metric("voxgate_relay_flows_evicted_total", &[]);
    assert_eq!(evicted, created - 10.0 - TENTATIVE_CAP);
    assert_eq!(
        relay.metric("voxgate_relay_flows_tentative", &[]),
        TENTATIVE_CAP
    );
    assert_eq!(
        relay.metric("voxgate_relay_flows_active", &[]),
        10.0 + TENTATIVE_CAP
    );
    // Nothing was refused: the flood only displaced itself.
    assert_eq!(
        relay.metric("voxgate_relay_drops_total", &[("reason", "table_full")]),
        0.0
    );

    // Established flows are untouched, both ways.
    for (c, w) in legit.iter().zip(&workers) {
        round_trip(&relay, &lp, c, *w);
    }
    // A new legitimate client still gets a flow, and it is established by the reply.
    let newcomer = udp(1000);
    let w = establish(&relay, &lp, &newcomer);
    round_trip(&relay, &lp, &newcomer, w);
}

/// One valid check from each flooder, paced so the relay's socket buffer is not the limit.
fn flood(relay: &RelayProcess, lp: &FakeLoop, flooders: &[UdpSocket]) {
    for (i, f) in flooders.iter().enumerate() {
        f.send_to(&binding_request(&hint(0, lp.addr())), relay.public)
            .unwrap();
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A network namespace of our own, deleted on drop.
struct Netns(String);

impl Netns {
    fn create() -> Self {
        let name = format!("vg-relay-v6-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let created = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip(8) must be installed (iproute2)");
        assert!(created.success(), "cannot create network namespace {name}");
        let ns = Netns(name);
        ns.ip(&["link", "set", "lo", "up"]);
        // Two /64s of clients ("any-IP": every address of the prefix is local), so a socket
        // can bind any of their 2^64 addresses without adding each one.
        for prefix in ["2001:db8:66::/64", "2001:db8:77::/64"] {
            ns.ip(&["-6", "route", "add", "local", prefix, "dev", "lo"]);
        }
        // IPv6 binds only configured addresses unless non-local binds are allowed (a
        // per-namespace setting: nothing outside changes).
        let status = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sh", "-c"])
            .arg("echo 1 > /proc/sys/net/ipv6/ip_nonlocal_bind")
            .status()
            .expect("ip netns exec");
        assert!(
            status.success(),
            "cannot allow non-local IPv6 binds in {}",
            ns.0
        );
        ns
    }

    fn ip(&self, args: &[&str]) {
        let status = Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .status()
            .expect("ip(8) must be installed (iproute2)");
        assert!(status.success(), "ip -n {} {args:?} failed", self.0);
    }

    /// Moves the calling thread into the namespace: its sockets and the processes it
    /// spawns live there.
    fn enter(&self) {
        let path = format!("/var/run/netns/{}", self.0);
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        use std::os::fd::AsRawFd as _;
        // SAFETY: setns on a valid namespace fd affects only the calling thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn an_ipv6_64_flood_is_capped_per_prefix_and_other_clients_still_get_flows() {
    let ns = Netns::create();
    // Everything below runs on a thread inside the namespace (setns is per thread).
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter();
            ipv6_flood_inside_the_namespace();
        })
        .join()
    });
    drop(ns);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn ipv6_flood_inside_the_namespace() {
    const FLOOD: usize = 300;
    const CAP: usize = 4;
    let ip: IpAddr = "::1".parse().unwrap();
    let ports = RelayPorts::new(1);
    let relay = RelayProcess::start_on(
        ip,
        &ports,
        1,
        &[
            "--max-tentative-per-ip",
            &CAP.to_string(),
            "--max-flows",
            "1000",
            "--tentative-timeout-secs",
            "120",
            "--metrics-interval-ms",
            "20",
        ],
    );
    let lp = FakeLoop {
        sock: udp_on("::1", 300),
    };
    // 300 addresses of one /64, one check each: only CAP get a (tentative) flow.
    let flooders: Vec<UdpSocket> = (0..FLOOD)
        .map(|i| {
            udp_on(
                &format!("2001:db8:66::{:x}:{:x}", 1 + i / 100, 1 + i % 100),
                50,
            )
        })
        .collect();
    flood(&relay, &lp, &flooders);
    let capped = relay.wait_metric(
        "voxgate_relay_drops_total",
        &[("reason", "tentative_cap")],
        Duration::from_secs(10),
        |v| v >= (FLOOD - CAP) as f64,
    );
    // Most of the flood reached the relay (a busy machine may drop some at its socket), and
    // all but CAP of what did were refused.
    assert!(capped >= (FLOOD / 2) as f64, "only {capped} refused");
    assert_eq!(
        relay.metric("voxgate_relay_flows_created_total", &[]),
        CAP as f64
    );
    assert_eq!(
        relay.metric("voxgate_relay_flows_tentative", &[]),
        CAP as f64
    );
    // Another /64, and ::1 itself, are different sources: each still gets a flow.
    for addr in ["2001:db8:77::1", "2001:db8:77::2", "::1"] {
        let client = udp_on(addr, 1000);
        let w = establish(&relay, &lp, &client);
        round_trip(&relay, &lp, &client, w);
    }
}
