//! Server processes of a run and the ports they listen on: spawned with their output in a
//! log, stopped on drop; free ports probed by binding; readiness waited for on HTTP or TCP.

use std::fs;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use voxgate_testkit::ports;

/// A server process, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Proc {
    child: Child,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Proc> {
        let f = fs::File::create(log).with_context(|| format!("log {}", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({cmd:?})"))?;
        Ok(Proc {
            child,
            name: name.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        if let Some(pid) = i32::try_from(self.child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A TCP port free on `ip`. On loopback it comes from voxgate_testkit::ports: below the
/// ephemeral range, so no outgoing connection takes it before the server binds it, and claimed
/// across processes, so a benchmark beside the test suite cannot pick it either.
pub fn free_tcp_port(ip: IpAddr) -> anyhow::Result<u16> {
    if ip.is_loopback() {
        return Ok(ports::free_tcp_port());
    }
    Ok(TcpListener::bind((ip, 0))?.local_addr()?.port())
}

/// A base port P with P..P+n free for UDP and for TCP on `ip`: the relay and the transceiver
/// listen for ICE-TCP on their UDP ports by default, and a port the kernel hands out free for
/// UDP can still be held for TCP (a connection in TIME_WAIT after the relay's TCP runs).
pub fn free_udp_ports(ip: IpAddr, n: u16) -> anyhow::Result<u16> {
    if ip.is_loopback() {
        return Ok(ports::free_port_range(n, ports::Protocols::UdpAndTcp));
    }
    for _ in 0..100 {
        let first = UdpSocket::bind((ip, 0))?;
        let base = first.local_addr()?.port();
        if base.checked_add(n).is_none() {
            continue;
        }
        let rest: Result<Vec<_>, _> = (1..n).map(|i| UdpSocket::bind((ip, base + i))).collect();
        // std's TcpListener sets SO_REUSEADDR, as the servers' listeners do.
        let tcp: Result<Vec<_>, _> = (0..n).map(|i| TcpListener::bind((ip, base + i))).collect();
        if rest.is_ok() && tcp.is_ok() {
            return Ok(base);
        }
    }
    bail!("no port range free for both UDP and TCP")
}

pub fn wait_http(url: &str, timeout: Duration) -> anyhow::Result<()> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(1))
        .no_proxy()
        .build()?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if http.get(url).send().is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{url} did not answer within {timeout:?}")
}

pub fn wait_tcp(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{addr} did not accept within {timeout:?}")
}

/// The first `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}
