//! Shared helpers of the relay integration tests: the real `relay` binary, a real
//! `redis-server`, hand-built STUN checks carrying real hints, and /metrics scraping.
#![allow(dead_code)] // each test binary uses a different subset

pub mod netns;
pub mod stack;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use voxgate_proto::{
    mint, Direction, FleetKey, MintTime, RelayHeader, RoutingHint, MAX_HEADER_LEN,
};

/// The fleet key of every test (never a production key).
pub const FLEET_KEY_HEX: &str = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

pub fn fleet_key() -> FleetKey {
    FleetKey::from_hex(1, FLEET_KEY_HEX).unwrap()
}

/// A real routing hint (server ufrag) for `loop_addr` in `cluster_id`.
pub fn hint(cluster_id: u32, loop_addr: SocketAddr) -> String {
    hint_with(&fleet_key(), cluster_id, loop_addr)
}

pub fn hint_with(key: &FleetKey, cluster_id: u32, loop_addr: SocketAddr) -> String {
    hint_minted(key, cluster_id, loop_addr, std::time::SystemTime::now())
}

/// A real routing hint minted at wall-clock time `at` (in the past to test expiry).
pub fn hint_minted(
    key: &FleetKey,
    cluster_id: u32,
    loop_addr: SocketAddr,
    at: std::time::SystemTime,
) -> String {
    mint(
        key,
        &RoutingHint {
            cluster_id,
            loop_addr,
        },
        MintTime::from_system_time(at),
        rand::random(),
    )
}

/// A STUN binding request as an ICE agent sends it: header, USERNAME `server:client`,
/// PRIORITY, a dummy MESSAGE-INTEGRITY and FINGERPRINT.
pub fn binding_request(server_ufrag: &str) -> Vec<u8> {
    let username = format!("{server_ufrag}:tcli");
    let mut m = vec![0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42];
    m.extend_from_slice(&rand::random::<[u8; 12]>());
    let mut attr = |t: u16, v: &[u8]| {
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&(v.len() as u16).to_be_bytes());
        m.extend_from_slice(v);
        m.resize(m.len().next_multiple_of(4), 0);
    };
    attr(0x0006, username.as_bytes());
    attr(0x0024, &[0x6e, 0x00, 0x1e, 0xff]);
    attr(0x0008, &[0x77; 20]);
    attr(0x8028, &[0xde, 0xad, 0xbe, 0xef]);
    let len = (m.len() - 20) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// A DTLS-looking datagram (first byte 22), as a client sends after ICE.
pub fn dtls_like(n: u8) -> Vec<u8> {
    let mut d = vec![22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, n];
    d.extend_from_slice(&[n; 40]);
    d
}

pub fn frame(direction: Direction, client: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; MAX_HEADER_LEN];
    let n = RelayHeader::udp(direction, client)
        .encode(&mut out)
        .unwrap();
    out.truncate(n);
    out.extend_from_slice(payload);
    out
}

// Ports for the servers these tests start come from voxgate_testkit::ports: below the
// ephemeral range, claimed across test processes (a port picked with bind :0 was once taken by
// an outgoing connection before the relay bound it).
pub use voxgate_testkit::ports::{free_tcp_port, free_udp_and_tcp_port};

/// A base port with `n` consecutive ports on loopback free for UDP and for TCP (a transceiver's
/// media loop binds both on its port).
pub fn free_udp_range(n: u16) -> u16 {
    voxgate_testkit::ports::free_port_range(n, voxgate_testkit::ports::Protocols::UdpAndTcp)
}

/// A UDP socket on 127.0.0.1 with a read timeout.
pub fn udp(timeout_ms: u64) -> UdpSocket {
    udp_on("127.0.0.1", timeout_ms)
}

pub fn udp_on(ip: &str, timeout_ms: u64) -> UdpSocket {
    let s = UdpSocket::bind((ip, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .unwrap();
    s
}

/// Receives one datagram or `None` on timeout.
pub fn recv(sock: &UdpSocket) -> Option<(SocketAddr, Vec<u8>)> {
    let mut buf = [0u8; 4096];
    match sock.recv_from(&mut buf) {
        Ok((n, from)) => Some((from, buf[..n].to_vec())),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("recv: {e}"),
    }
}

/// A test transceiver loop: the destination named by the hints. It records what arrives
/// and answers through the relay with the header flipped, like the transceiver does.
pub struct FakeLoop {
    pub sock: UdpSocket,
}

/// One relayed datagram as the loop saw it.
#[derive(Debug, Clone)]
pub struct Relayed {
    /// The relay worker's internal socket (where replies go).
    pub from: SocketAddr,
    pub header: RelayHeader,
    pub payload: Vec<u8>,
}

impl FakeLoop {
    pub fn new() -> Self {
        Self { sock: udp(200) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    /// Next relayed datagram, or `None` on timeout. Panics on an unframed datagram.
    pub fn recv(&self) -> Option<Relayed> {
        let (from, bytes) = recv(&self.sock)?;
        let (header, payload) = RelayHeader::decode(&bytes)
            .unwrap_or_else(|e| panic!("loop got an unframed datagram ({e}): {bytes:?}"));
        Some(Relayed {
            from,
            header,
            payload: payload.to_vec(),
        })
    }

    /// Answers `to` (the relay worker) for `client`.
    pub fn reply(&self, to: SocketAddr, client: SocketAddr, payload: &[u8]) {
        self.sock
            .send_to(&frame(Direction::ToClient, client, payload), to)
            .unwrap();
    }

    /// Answers a relayed TCP frame: same client and connection id, direction flipped.
    pub fn reply_tcp(&self, to: &Relayed, payload: &[u8]) {
        let header = RelayHeader {
            direction: Direction::ToClient,
            ..to.header
        };
        self.sock
            .send_to(&frame_with(&header, payload), to.from)
            .unwrap();
    }
}

/// `payload` behind `header`.
pub fn frame_with(header: &RelayHeader, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; MAX_HEADER_LEN];
    let n = header.encode(&mut out).unwrap();
    out.truncate(n);
    out.extend_from_slice(payload);
    out
}

/// Waits (up to `timeout`) for the relay to close `stream` and asserts it sent nothing:
/// the read ends in EOF or a reset with zero bytes.
pub fn assert_closed_silently(stream: &mut TcpStream, timeout: Duration, what: &str) {
    stream.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: the relay answered {n} bytes: {:?}", &buf[..n]),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{what}: not closed within {timeout:?}: {e}"),
    }
}

/// A TCP connection to `to` from `from_ip` (any port), with a read timeout.
pub fn tcp_from(from_ip: IpAddr, to: SocketAddr, timeout_ms: u64) -> TcpStream {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    socket.bind(&SocketAddr::new(from_ip, 0).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .unwrap();
    stream
}

/// Path of the relay binary under test.
pub fn relay_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_relay"))
}

/// A running `relay` process, killed on drop.
pub struct RelayProcess {
    pub child: Child,
    pub public: SocketAddr,
    pub metrics: SocketAddr,
    pub log: PathBuf,
}

/// Ports a relay binds; reused to restart "the same" relay.
#[derive(Debug, Clone)]
pub struct RelayPorts {
    pub public: u16,
    pub internal_base: u16,
    pub metrics: u16,
}

impl RelayPorts {
    pub fn new(workers: u16) -> Self {
        Self {
            // The TCP listener takes the same port by default.
            public: free_udp_and_tcp_port(),
            internal_base: free_udp_range(workers),
            metrics: free_tcp_port(),
        }
    }
}

impl RelayProcess {
    /// Starts a relay with the test fleet key on `ports` plus `extra` flags, and waits until
    /// /metrics answers.
    pub fn start(ports: &RelayPorts, workers: u16, extra: &[&str]) -> Self {
        Self::start_on(Ipv4Addr::LOCALHOST.into(), ports, workers, extra)
    }

    /// As [`RelayProcess::start`], with the public and internal sockets on `ip` (e.g. `::1`);
    /// metrics stay on 127.0.0.1.
    pub fn start_on(ip: IpAddr, ports: &RelayPorts, workers: u16, extra: &[&str]) -> Self {
        let log = std::env::temp_dir().join(format!(
            "voxgate-relay-test-{}-{}.log",
            ports.public,
            rand::random::<u32>()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(relay_bin())
            .args([
                "--listen",
                &SocketAddr::new(ip, ports.public).to_string(),
                "--internal-listen",
                &SocketAddr::new(ip, ports.internal_base).to_string(),
                "--metrics-listen",
                &format!("127.0.0.1:{}", ports.metrics),
                "--workers",
                &workers.to_string(),
            ])
            .args(
                (!extra.contains(&"--metrics-interval-ms"))
                    .then_some(["--metrics-interval-ms", "100"])
                    .into_iter()
                    .flatten(),
            )
            .args(extra)
            .env("VOXGATE_RELAY_FLEET_KEY", FLEET_KEY_HEX)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("spawn relay");
        let relay = Self {
            child,
            public: SocketAddr::new(ip, ports.public),
            metrics: SocketAddr::from(([127, 0, 0, 1], ports.metrics)),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while http_get(relay.metrics, "/metrics").is_none() {
            assert!(
                Instant::now() < deadline,
                "relay did not come up; log:\n{}",
                relay.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        relay
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The current /metrics text.
    pub fn scrape(&self) -> String {
        http_get(self.metrics, "/metrics").expect("metrics endpoint")
    }

    /// Sum of the samples of `name` whose labels include every `k="v"` of `labels`.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_sum(&self.scrape(), name, labels)
    }

    /// Waits until `cond(metric)` holds (counters are published every 100 ms).
    pub fn wait_metric(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        timeout: Duration,
        cond: impl Fn(f64) -> bool,
    ) -> f64 {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.metric(name, labels);
            if cond(v) || Instant::now() >= deadline {
                return v;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| label_text.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// A plain HTTP/1.1 GET; the body, or `None` if nothing listens.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// A throwaway `redis-server` on a free port, killed on drop.
pub struct Redis {
    pub child: Child,
    pub port: u16,
}

impl Redis {
    pub fn start() -> Self {
        let port = free_tcp_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        let redis = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = redis.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return redis;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    pub fn get(&self, key: &str) -> Option<String> {
        let mut c = self.client().get_connection().ok()?;
        redis::cmd("GET").arg(key).query(&mut c).ok()?
    }

    pub fn ttl(&self, key: &str) -> i64 {
        let mut c = self.client().get_connection().unwrap();
        redis::cmd("TTL").arg(key).query(&mut c).unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for `cond` up to `timeout`.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resident memory of the relay process, KiB.
pub fn rss_kib(relay: &RelayProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", relay.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}
