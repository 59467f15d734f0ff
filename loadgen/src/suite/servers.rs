//! Starting the servers under test, each a fresh process on free loopback ports, on the
//! server's cores: the transceiver, the relay, the bare forwarder (this binary) and coturn.
//! Each returns once the server answers.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::codec_floor::EncoderSettings;
use crate::suite::process::{free_tcp_port, free_udp_ports, wait_http, wait_tcp, which, Proc};
use crate::suite::runner::{Ledger, Runner};

/// A running transceiver and its URLs.
pub struct Transceiver {
    pub proc: Proc,
    pub signal: String,
    pub grpc: String,
}

/// A running relay and its addresses.
pub struct Relay {
    pub proc: Proc,
    pub public: SocketAddr,
    pub metrics: SocketAddr,
}

/// Where and how a transceiver runs.
pub struct TransceiverOpts<'a> {
    pub ip: IpAddr,
    pub netns: Option<&'a str>,
    /// The relay to advertise, and the fleet key shared with it.
    pub relay: Option<(SocketAddr, &'a str)>,
    /// Its downlink encoder (`--opus-bitrate`, `--opus-complexity`, `--opus-application`).
    pub encoder: EncoderSettings,
    /// Further flags, e.g. [`crate::scenarios::cost::COALESCED`].
    pub flags: &'a [&'a str],
}

impl Default for TransceiverOpts<'_> {
    fn default() -> Self {
        TransceiverOpts {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
            relay: None,
            encoder: EncoderSettings::BENCH,
            flags: &[],
        }
    }
}

impl<R: Ledger> Runner<'_, R> {
    pub fn start_transceiver(
        &mut self,
        name: &str,
        o: &TransceiverOpts,
    ) -> anyhow::Result<Transceiver> {
        let bin = self.args.bin_dir.join("transceiver");
        // Ports are probed on loopback: an address inside a namespace cannot be bound here,
        // and the namespace holds nothing else, so a port free here is free there.
        let probe = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let signal = SocketAddr::new(o.ip, free_tcp_port(probe)?);
        let grpc = SocketAddr::new(o.ip, free_tcp_port(probe)?);
        let media = SocketAddr::new(o.ip, free_udp_ports(probe, self.args.loops as u16)?);
        let mut cmd = self.server_command(o.netns, &bin);
        cmd.arg("--signal-listen")
            .arg(signal.to_string())
            .arg("--media-listen")
            .arg(media.to_string())
            .arg("--grpc-listen")
            .arg(grpc.to_string())
            .arg("--loops")
            .arg(self.args.loops.to_string())
            .args(["--max-sessions", "5000", "--connect-timeout-secs", "30"])
            // The load comes from one address: per-client limits would measure themselves.
            .args(["--post-rate-per-ip", "0", "--max-sessions-per-ip", "0"])
            // Inside a namespace of its own the address is not loopback; nobody else is there.
            .arg("--insecure-no-auth")
            .arg("--opus-bitrate")
            .arg(o.encoder.bitrate.to_string())
            .arg("--opus-complexity")
            .arg(o.encoder.complexity.to_string())
            .args(["--opus-application", o.encoder.application.as_arg()])
            .args(o.flags)
            // Stopped with SIGTERM between runs: exit at once rather than drain.
            .env("VOXGATE_DRAIN_TIMEOUT_SECS", "0")
            .env("RUST_LOG", "warn");
        if let Some((relay, key)) = o.relay {
            // The relay forwards from its internal socket on the same IP as its public one
            // (see `start_relay`): only its framed datagrams are believed.
            cmd.arg("--advertise")
                .arg(relay.to_string())
                .arg("--relays")
                .arg(relay.ip().to_string())
                .arg("--fleet-key")
                .arg(key);
        }
        let log = self.log_path(name);
        let proc = Proc::spawn("transceiver", cmd, &log)?;
        let signal_url = format!("http://{signal}");
        wait_http(&format!("{signal_url}/healthz"), Duration::from_secs(15))
            .with_context(|| format!("transceiver did not start (log: {})", log.display()))?;
        wait_tcp(grpc, Duration::from_secs(5))?;
        Ok(Transceiver {
            proc,
            signal: signal_url,
            grpc: format!("http://{grpc}"),
        })
    }

    pub fn start_relay(&mut self, key: &str) -> anyhow::Result<(Proc, SocketAddr)> {
        self.start_relay_with(key, &[]).map(|r| (r.proc, r.public))
    }

    /// A relay with `extra` flags, on loopback with one worker.
    pub fn start_relay_with(&mut self, key: &str, extra: &[&str]) -> anyhow::Result<Relay> {
        let bin = self.args.bin_dir.join("relay");
        if !bin.exists() {
            bail!("no relay binary at {}", bin.display());
        }
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let public = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let internal = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let metrics = SocketAddr::new(ip, free_tcp_port(ip)?);
        let mut cmd = self.server_command(None, &bin);
        cmd.arg("--listen")
            .arg(public.to_string())
            .arg("--internal-listen")
            .arg(internal.to_string())
            .arg("--metrics-listen")
            .arg(metrics.to_string())
            .args(["--workers", "1"])
            .args(extra)
            .env("VOXGATE_RELAY_FLEET_KEY", key)
            .env("RUST_LOG", "warn");
        let log = self.log_path("relay");
        let p = Proc::spawn("relay", cmd, &log)?;
        wait_tcp(metrics, Duration::from_secs(10))
            .with_context(|| format!("relay did not start (log: {})", log.display()))?;
        Ok(Relay {
            proc: p,
            public,
            metrics,
        })
    }

    pub fn start_forwarder(
        &mut self,
        loadgen: &Path,
    ) -> anyhow::Result<(Proc, SocketAddr, SocketAddr)> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let listen = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let sink = SocketAddr::new(ip, free_udp_ports(ip, 1)?);
        let mut cmd = self.server_command(None, Path::new(loadgen));
        cmd.arg("forwarder")
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--to")
            .arg(sink.to_string())
            .args(["--cpu", "0"]);
        let log = self.log_path("forwarder");
        let p = Proc::spawn("forwarder", cmd, &log)?;
        // The forwarder prints its addresses once bound.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if fs::read_to_string(&log).is_ok_and(|s| s.contains("forwarder:")) {
                return Ok((p, listen, sink));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("forwarder did not start (log: {})", log.display())
    }

    pub fn start_coturn(&mut self) -> anyhow::Result<(Proc, SocketAddr)> {
        let bin =
            which("turnserver").context("coturn's turnserver is not installed (apt coturn)")?;
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let port = free_udp_ports(ip, 1)?;
        let relay_base = free_udp_ports(ip, 1)?.clamp(20_000, 60_000);
        let mut cmd = self.server_command(None, &bin);
        cmd.args([
            "-n",
            "--no-auth",
            "--listening-ip",
            "127.0.0.1",
            "--relay-ip",
            "127.0.0.1",
            "--allow-loopback-peers",
            "--no-cli",
            "--no-tls",
            "--no-dtls",
            "--no-stun-backward-compatibility",
            "-m",
            "1",
            "--log-file",
            "stdout",
            "--simple-log",
            "--userdb",
        ]);
        cmd.arg(self.args.work_dir.join("turndb.sqlite"))
            .arg("-p")
            .arg(port.to_string())
            .arg("--min-port")
            .arg(relay_base.to_string())
            .arg("--max-port")
            .arg((relay_base + 3000).to_string());
        let log = self.log_path("coturn");
        let p = Proc::spawn("coturn", cmd, &log)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if fs::read_to_string(&log)
                .is_ok_and(|s| s.contains("Total General servers") || s.contains("IO method"))
            {
                std::thread::sleep(Duration::from_millis(300));
                return Ok((p, SocketAddr::new(ip, port)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("coturn did not start (log: {})", log.display())
    }
}
