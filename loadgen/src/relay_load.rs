//! Relay-shaped UDP load: many flows of RTP-sized datagrams, through the voxgate relay, the
//! bare forwarder, coturn, or straight to the sink, with the middle process's CPU read from
//! the OS.
//!
//! ```text
//!  flow sockets (one per flow) ──► relay public port   ──► sink (relay header stripped)
//!                              ──► bare forwarder      ──►
//!                              ──► coturn (ChannelData)──► (plain UDP from relayed ports)
//!                              ──────────── direct ───────►
//! ```
//!
//! * **Relay flows** start like ICE: each flow's first datagram is a STUN Binding request
//!   whose USERNAME carries a routing hint minted under the relay's fleet key naming the sink
//!   as the "transceiver loop". The sink answers it through the relay (relay header,
//!   direction to-client), which makes the flow established; then media flows.
//! * **coturn flows** Allocate (no auth) and ChannelBind to the sink, then send ChannelData.
//! * **Payload**: an RTP-looking header (version 2), the flow id, a sequence number and the
//!   sender's CLOCK_REALTIME at `sendmmsg`. The sink's socket stamps arrivals in the kernel
//!   (`SO_TIMESTAMPNS`), so one-way latency excludes the sink's own scheduling.
//! * **Pacing**: `rate` datagrams/s spread round-robin over the flows in small bursts every
//!   ~100 µs; `rate = 0` sends as fast as the generator can.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use voxgate_proto::rfc4571;
use voxgate_proto::{
    is_relay_framed, looks_like_stun, mint, Direction, FleetKey, MintTime, RelayHeader, RoutingHint,
};
use voxgate_udp_batch::{stamp_arrivals, RecvBatch, SendBatch, DEFAULT_SLOT};

use crate::addr_arg::parse_addr;
use crate::proc_stat;
use crate::socket_buffers::set_buffers;
use crate::stats::{cdf_points, Summary};
use crate::stun_probe::binding_request;
use crate::turn;

/// Datagrams per `sendmmsg` per flow socket.
const BURST: usize = 8;
/// Bytes the payload needs for its fields.
const MIN_SIZE: usize = 28;
/// Marker in the payload's SSRC field.
const MARK: u32 = 0x5EED_F10E;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum FlowTarget {
    Relay,
    /// The relay's TCP listener (ICE over TCP, RFC 4571 frames): one connection per flow.
    RelayTcp,
    Forwarder,
    Coturn,
    Direct,
}

#[derive(clap::Args, Debug, Clone)]
pub struct FlowsArgs {
    #[arg(long, value_enum)]
    pub target: FlowTarget,
    /// The middle hop's ingress (relay public port, forwarder or coturn listen address).
    #[arg(long, value_parser = parse_addr)]
    pub to: Option<SocketAddr>,
    /// Where the sink binds (for the forwarder: the forwarder's --to).
    #[arg(long, value_parser = parse_addr, default_value = "127.0.0.1:0")]
    pub sink: SocketAddr,
    /// The relay's fleet key (64 hex characters), to mint routing hints.
    #[arg(long, env = "LOADGEN_FLEET_KEY", hide_env_values = true)]
    pub fleet_key: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub fleet_key_id: u8,
    #[arg(long, default_value_t = 200)]
    pub flows: usize,
    /// Datagrams per second over all flows; 0 = as fast as possible.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Measurement seconds (after a 0.5 s warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Datagram size in bytes (an Opus voice packet in SRTP is about 100–160).
    #[arg(long, default_value_t = 120)]
    pub size: usize,
    /// PID of the middle process, to read its CPU time.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Pin the generator and the sink to this core.
    #[arg(long)]
    pub cpu: Option<usize>,
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// What a flow run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowResult {
    pub target: Option<FlowTarget>,
    pub flows: usize,
    pub size: usize,
    /// Asked rate (0 = as fast as possible).
    pub offered_pps: f64,
    pub secs: f64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// Generator datagrams its own socket refused.
    pub send_drops: u64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub server_cpu_secs: f64,
    /// Cores the middle process used.
    pub server_cores: f64,
    /// Datagrams delivered per CPU-second of the middle process.
    pub pps_per_core: f64,
    /// CPU of the middle process per delivered datagram, in µs.
    pub us_per_packet: f64,
    /// Sender → sink socket, µs.
    pub latency_us: Summary,
    pub latency_cdf: Vec<(f64, f64)>,
    /// Per flow, ms: the first STUN round trip through the middle hop (relay targets; for
    /// TCP, connect included).
    pub setup_ms: Summary,
}

#[derive(Default)]
struct SinkState {
    received: AtomicU64,
    recording: AtomicBool,
    stop: AtomicBool,
    latencies: Mutex<Vec<f64>>,
}

/// Nanoseconds since the epoch on the wall clock, the clock of the sink socket's kernel
/// receive stamps (`SO_TIMESTAMPNS`).
fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn realtime_ns() -> u64 {
    unix_ns(SystemTime::now())
}

fn payload(buf: &mut [u8], flow: u32, seq: u16) {
    buf[0] = 0x80;
    buf[1] = 0x6f;
    buf[2..4].copy_from_slice(&seq.to_be_bytes());
    buf[4..8].copy_from_slice(&flow.to_be_bytes());
    buf[8..12].copy_from_slice(&MARK.to_be_bytes());
    buf[12..20].copy_from_slice(&realtime_ns().to_be_bytes());
}

/// Send time of a payload written by [`payload`], if it is one.
fn payload_sent_ns(p: &[u8]) -> Option<u64> {
    if p.len() < 20 || p[0] != 0x80 || p[8..12] != MARK.to_be_bytes() {
        return None;
    }
    Some(u64::from_be_bytes(p[12..20].try_into().ok()?))
}

fn sink_loop(socket: UdpSocket, state: Arc<SinkState>, cpu: Option<usize>) {
    if let Some(c) = cpu {
        proc_stat::pin_current_thread(c);
    }
    let v6_socket = socket.local_addr().is_ok_and(|a| a.is_ipv6());
    let mut batch = RecvBatch::with_arrival_times(64, DEFAULT_SLOT);
    let mut replies = SendBatch::new(64, DEFAULT_SLOT, v6_socket);
    let mut local: Vec<f64> = Vec::with_capacity(1 << 16);
    let wait = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    while !state.stop.load(Ordering::Relaxed) {
        let n = batch.recv(&socket).unwrap_or(0);
        if n == 0 {
            let mut readable = [rustix::event::PollFd::new(
                &socket,
                rustix::event::PollFlags::IN,
            )];
            let _ = rustix::event::poll(&mut readable, Some(&wait));
            if !local.is_empty() {
                state
                    .latencies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(&mut local);
            }
            continue;
        }
        let recording = state.recording.load(Ordering::Relaxed);
        let mut media = 0;
        for datagram in batch.iter() {
            let mut p = datagram.bytes;
            if is_relay_framed(p) {
                let Ok((h, inner)) = RelayHeader::decode(p) else {
                    continue;
                };
                if looks_like_stun(inner) && inner.len() >= 20 {
                    // Answer the flow's first check through the relay: a Binding success
                    // with the same transaction id, framed back to the client.
                    let reply = RelayHeader {
                        direction: Direction::ToClient,
                        ..h
                    };
                    let mut txid = [0u8; 12];
                    txid.copy_from_slice(&inner[8..20]);
                    // A full batch drops the answer; the flow's check is retried.
                    let _ = replies.push_with(datagram.from, reply.encoded_len() + 20, 0, |b| {
                        let n = reply.encode(b).unwrap_or(0);
                        b[n..n + 2].copy_from_slice(&0x0101u16.to_be_bytes());
                        b[n + 2..n + 4].copy_from_slice(&[0, 0]);
                        b[n + 4..n + 8].copy_from_slice(&voxgate_proto::MAGIC_COOKIE.to_be_bytes());
                        b[n + 8..n + 20].copy_from_slice(&txid);
                    });
                    continue;
                }
                p = inner;
            }
            if let Some(sent) = payload_sent_ns(p) {
                media += 1;
                if recording {
                    if let Some(arrived) = datagram.arrived {
                        local.push(unix_ns(arrived).saturating_sub(sent) as f64 / 1e3);
                    }
                }
            }
        }
        if !replies.is_empty() {
            replies.flush(&socket, |_, _| {});
        }
        state.received.fetch_add(media, Ordering::Relaxed);
        if local.len() >= 1 << 15 {
            state
                .latencies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .append(&mut local);
        }
    }
    state
        .latencies
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .append(&mut local);
}

/// A flow socket and what goes in front of each payload.
struct Flow {
    socket: UdpSocket,
    /// For [`FlowTarget::RelayTcp`]: the connection the flow's frames go through instead.
    tcp: Option<std::net::TcpStream>,
    to: SocketAddr,
    prefix: Option<[u8; 4]>,
}

/// A hint naming `sink`, minted now under `key`, unique per flow.
fn flow_ufrag(key: &FleetKey, sink: SocketAddr, i: usize) -> String {
    let hint = RoutingHint {
        cluster_id: 0,
        loop_addr: sink,
    };
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
    nonce[8..].copy_from_slice(&std::process::id().to_be_bytes());
    let minted = MintTime::from_system_time(std::time::SystemTime::now());
    mint(key, &hint, minted, nonce)
}

/// Connects to the relay's TCP port and completes the first STUN round trip over RFC 4571
/// frames; returns the connection (non-blocking) and how long connect + check took.
fn open_tcp_flow(
    to: SocketAddr,
    probe: &[u8],
    txid: [u8; 12],
) -> anyhow::Result<(std::net::TcpStream, Duration)> {
    let t0 = Instant::now();
    let mut c = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(3))?;
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(Duration::from_secs(3)))?;
    rfc4571::write_frame(&mut c, probe)?;
    let answer = rfc4571::read_frame(&mut c)?;
    let setup = t0.elapsed();
    if answer.len() < 20 || answer[8..20] != txid {
        bail!("unexpected answer to the TCP flow's STUN check");
    }
    c.set_nonblocking(true)?;
    Ok((c, setup))
}

fn recv_timeout(s: &UdpSocket, buf: &mut [u8], t: Duration) -> std::io::Result<usize> {
    s.set_read_timeout(Some(t))?;
    s.recv(buf)
}

fn open_flows(
    a: &FlowsArgs,
    sink: SocketAddr,
    setup_ms: &mut Vec<f64>,
) -> anyhow::Result<Vec<Flow>> {
    let to = match a.target {
        FlowTarget::Direct => sink,
        _ => a.to.context("--to is required for this target")?,
    };
    let key = match a.target {
        FlowTarget::Relay | FlowTarget::RelayTcp => Some(FleetKey::from_hex(
            a.fleet_key_id,
            a.fleet_key
                .as_deref()
                .context("--fleet-key is required for the relay")?,
        )?),
        _ => None,
    };
    let mut flows = Vec::with_capacity(a.flows);
    let mut buf = [0u8; 1500];
    for i in 0..a.flows {
        let s = UdpSocket::bind(SocketAddr::new(sink.ip(), 0))?;
        s.connect(to)?;
        set_buffers(&s, 1 << 20);
        let mut txid = [0u8; 12];
        txid[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
        let mut tcp = None;
        let prefix = match a.target {
            FlowTarget::Relay => {
                let ufrag = flow_ufrag(key.as_ref().context("relay key")?, sink, i);
                let probe = binding_request(format!("{ufrag}:lg{i}").as_bytes(), txid);
                let mut ok = false;
                let t0 = Instant::now();
                for _ in 0..5 {
                    s.send(&probe)?;
                    if let Ok(n) = recv_timeout(&s, &mut buf, Duration::from_millis(300)) {
                        if n >= 20 && buf[8..20] == txid {
                            ok = true;
                            break;
                        }
                    }
                }
                if !ok {
                    bail!("relay flow {i} was not established (no answer to its STUN check)");
                }
                setup_ms.push(t0.elapsed().as_secs_f64() * 1e3);
                None
            }
            FlowTarget::RelayTcp => {
                let ufrag = flow_ufrag(key.as_ref().context("relay key")?, sink, i);
                let probe = binding_request(format!("{ufrag}:lg{i}").as_bytes(), txid);
                let (c, setup) = open_tcp_flow(to, &probe, txid)
                    .with_context(|| format!("relay TCP flow {i}"))?;
                setup_ms.push(setup.as_secs_f64() * 1e3);
                tcp = Some(c);
                None
            }
            FlowTarget::Coturn => {
                let req = turn::allocate_request(txid);
                let mut ok = Err(anyhow::anyhow!("no answer"));
                for _ in 0..5 {
                    s.send(&req)?;
                    if let Ok(n) = recv_timeout(&s, &mut buf, Duration::from_millis(300)) {
                        ok = turn::check_response(&buf[..n], turn::ALLOCATE_METHOD, txid)
                            .map_err(anyhow::Error::from);
                        break;
                    }
                }
                ok.with_context(|| format!("coturn Allocate of flow {i}"))?;
                txid[11] = 1;
                let req = turn::channel_bind_request(txid, turn::FIRST_CHANNEL, sink);
                let mut ok = Err(anyhow::anyhow!("no answer"));
                for _ in 0..5 {
                    s.send(&req)?;
                    if let Ok(n) = recv_timeout(&s, &mut buf, Duration::from_millis(300)) {
                        ok = turn::check_response(&buf[..n], turn::CHANNEL_BIND_METHOD, txid)
                            .map_err(anyhow::Error::from);
                        break;
                    }
                }
                ok.with_context(|| format!("coturn ChannelBind of flow {i}"))?;
                Some(turn::channel_data_header(turn::FIRST_CHANNEL, a.size))
            }
            FlowTarget::Forwarder | FlowTarget::Direct => None,
        };
        s.set_nonblocking(true)?;
        flows.push(Flow {
            socket: s,
            tcp,
            to,
            prefix,
        });
    }
    Ok(flows)
}

/// Sends for `dur` at `rate` (0 = flat out); returns (sent, refused by the socket).
fn generate(flows: &[Flow], size: usize, rate: f64, dur: Duration, seq: &mut [u16]) -> (u64, u64) {
    let v6_socket = flows
        .first()
        .and_then(|f| f.socket.local_addr().ok())
        .is_some_and(|a| a.is_ipv6());
    let mut batch = SendBatch::new(BURST, DEFAULT_SLOT, v6_socket);
    let start = Instant::now();
    let (mut sent, mut drops) = (0u64, 0u64);
    let mut k = 0usize;
    loop {
        let now = Instant::now();
        let elapsed = now.duration_since(start);
        if elapsed >= dur {
            break;
        }
        let mut due = BURST as f64;
        if rate > 0.0 {
            due = rate * elapsed.as_secs_f64() - sent as f64;
            if due < 1.0 {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
        }
        let n = (due as usize).clamp(1, BURST);
        let f = &flows[k];
        if let Some(tcp) = &f.tcp {
            let (ok, dropped) = write_frames(tcp, size, n, k, &mut seq[k]);
            sent += ok;
            drops += dropped;
            k = (k + 1) % flows.len();
            continue;
        }
        let dst = f.to;
        for _ in 0..n {
            let s = &mut seq[k];
            *s = s.wrapping_add(1);
            let sq = *s;
            let pushed = batch.push_with(
                dst,
                size + f.prefix.map_or(0, |p| p.len()),
                0,
                |b| match f.prefix {
                    Some(p) => {
                        b[..4].copy_from_slice(&p);
                        payload(&mut b[4..], k as u32, sq);
                    }
                    None => payload(b, k as u32, sq),
                },
            );
            // Too large for a slot or of the wrong family: refused like a full socket.
            if pushed.is_err() {
                drops += 1;
            }
        }
        let losses = batch.flush(&f.socket, |_, _| sent += 1);
        drops += losses.buffer_full + losses.failed;
        k = (k + 1) % flows.len();
    }
    (sent, drops)
}

/// Writes `n` RFC 4571 frames of `size` bytes in one `write`; a frame the socket does not
/// take whole is counted as refused (the rest of the burst too), like a full UDP buffer.
fn write_frames(
    tcp: &std::net::TcpStream,
    size: usize,
    n: usize,
    k: usize,
    seq: &mut u16,
) -> (u64, u64) {
    use std::io::Write as _;
    let mut buf = [0u8; BURST * (rfc4571::PREFIX_LEN + 1500)];
    let per = rfc4571::PREFIX_LEN + size;
    let Ok(prefix) = rfc4571::length_prefix(size) else {
        return (0, n as u64);
    };
    let n = n.min(buf.len() / per);
    for j in 0..n {
        *seq = seq.wrapping_add(1);
        let (head, body) = buf[j * per..(j + 1) * per].split_at_mut(rfc4571::PREFIX_LEN);
        head.copy_from_slice(&prefix);
        payload(body, k as u32, *seq);
    }
    let (mut w, total, mut written) = (tcp, n * per, 0);
    while written < total {
        match w.write(&buf[written..total]) {
            Ok(0) => break,
            Ok(m) => written += m,
            // A partly written frame must be finished, or the stream loses its framing.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && written % per != 0 => {
                std::thread::yield_now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // At a frame boundary: the rest of the burst is refused.
            Err(_) => break,
        }
    }
    let ok = (written / per) as u64;
    (ok, n as u64 - ok)
}

/// Runs one flow measurement.
pub fn run(a: &FlowsArgs) -> anyhow::Result<FlowResult> {
    if a.size < MIN_SIZE {
        bail!("--size must be at least {MIN_SIZE}");
    }
    if a.flows == 0 {
        bail!("--flows must be at least 1");
    }
    // A datagram is the payload behind at most a 4-byte prefix (TURN ChannelData), in one
    // send slot.
    if a.size + 4 > DEFAULT_SLOT {
        bail!("--size must be at most {}", DEFAULT_SLOT - 4);
    }
    proc_stat::raise_nofile_limit()?;
    if let Some(c) = a.cpu {
        proc_stat::pin_current_thread(c);
    }
    let sink_socket = UdpSocket::bind(a.sink).with_context(|| format!("bind sink {}", a.sink))?;
    let sink = sink_socket.local_addr()?;
    sink_socket.set_nonblocking(true)?;
    set_buffers(&sink_socket, 4 << 20);
    stamp_arrivals(&sink_socket)?;
    let state = Arc::new(SinkState::default());
    let sink_thread = {
        let (state, cpu) = (state.clone(), a.cpu);
        std::thread::Builder::new()
            .name("sink".into())
            .spawn(move || sink_loop(sink_socket, state, cpu))?
    };
    let mut setup_ms = Vec::new();
    let result = (|| {
        let flows = open_flows(a, sink, &mut setup_ms)?;
        let mut seq = vec![0u16; flows.len()];
        generate(&flows, a.size, a.rate, Duration::from_millis(500), &mut seq);
        std::thread::sleep(Duration::from_millis(50));
        let r0 = state.received.load(Ordering::Relaxed);
        let cpu0 = a.server_pid.map(proc_stat::cpu_time).transpose()?;
        state.recording.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        let (sent, drops) = generate(
            &flows,
            a.size,
            a.rate,
            Duration::from_secs_f64(a.secs),
            &mut seq,
        );
        let secs = t0.elapsed().as_secs_f64();
        // Let what is in flight land before counting.
        std::thread::sleep(Duration::from_millis(100));
        state.recording.store(false, Ordering::Relaxed);
        let cpu1 = a.server_pid.map(proc_stat::cpu_time).transpose()?;
        let received = state.received.load(Ordering::Relaxed) - r0;
        Ok::<_, anyhow::Error>((sent, drops, received, secs, cpu0, cpu1))
    })();
    state.stop.store(true, Ordering::Relaxed);
    let _ = sink_thread.join();
    let (sent, drops, received, secs, cpu0, cpu1) = result?;
    let lat = std::mem::take(&mut *state.latencies.lock().unwrap_or_else(|e| e.into_inner()));
    let mut r = FlowResult {
        target: Some(a.target),
        flows: a.flows,
        size: a.size,
        offered_pps: a.rate,
        secs,
        sent,
        received,
        lost: sent.saturating_sub(received),
        send_drops: drops,
        tx_pps: sent as f64 / secs,
        rx_pps: received as f64 / secs,
        latency_us: Summary::of(&lat),
        latency_cdf: cdf_points(&lat, 300),
        setup_ms: Summary::of(&setup_ms),
        ..FlowResult::default()
    };
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        let cpu = c1.saturating_sub(c0).as_secs_f64();
        r.server_cpu_secs = cpu;
        r.server_cores = cpu / secs;
        if cpu > 0.0 {
            r.pps_per_core = received as f64 / cpu;
        }
        if received > 0 {
            r.us_per_packet = cpu * 1e6 / received as f64;
        }
    }
    Ok(r)
}

pub fn run_cli(a: &FlowsArgs) -> anyhow::Result<()> {
    let r = run(a)?;
    crate::json_out::write_json(&r, a.out.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_carries_its_send_time() {
        let mut b = [0u8; 120];
        let before = realtime_ns();
        payload(&mut b, 7, 9);
        let t = payload_sent_ns(&b).unwrap();
        assert!(t >= before && t - before < 1_000_000_000);
        assert_eq!(payload_sent_ns(&[0u8; 120]), None);
        assert!(!is_relay_framed(&b), "payload must not look relay-framed");
    }

    #[test]
    fn direct_flows_reach_the_sink_and_are_counted() {
        let a = FlowsArgs {
            target: FlowTarget::Direct,
            to: None,
            sink: "127.0.0.1:0".parse().unwrap(),
            fleet_key: None,
            fleet_key_id: 1,
            flows: 4,
            rate: 2000.0,
            secs: 0.3,
            size: 100,
            server_pid: None,
            cpu: None,
            out: None,
        };
        let r = run(&a).unwrap();
        assert!(r.sent > 300, "{r:?}");
        assert!(r.received > 0 && r.received <= r.sent, "{r:?}");
        assert!(r.latency_us.count > 0);
    }
}
