//! Hosts made of network namespaces, joined by one bridge.
//!
//! ```text
//!   ns <prefix>net:   br0 ── v-<host> ...           (the "switch"; no address)
//!                              │ veth
//!   ns <prefix><host>:       eth0 (the host's addresses), lo up
//! ```
//!
//! Every name this module creates starts with [`PREFIX`], inside namespaces it creates itself;
//! the caller's namespace is never touched. [`Network::create`] takes an exclusive lock (so
//! concurrent runs wait for each other), removes leftovers of a run that crashed (killing the
//! processes still inside them), and builds the hosts. Dropping the [`Network`] kills whatever
//! still runs inside and deletes every namespace, also while unwinding from a failed test.

use std::fs::{self, File};
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

use crate::process::Proc;

/// Prefix of every namespace created here ("voxgate fleet test"), unless a test asks for its
/// own with [`Network::create_with_prefix`] (so it runs beside the main fleet test).
pub const PREFIX: &str = "vgft-";
/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";
/// The bridge namespace's short name.
const SWITCH: &str = "net";

/// Why the network could not be built.
#[derive(Debug)]
pub enum NetworkError {
    /// Not running as root.
    NotRoot,
    /// `ip` (iproute2) is missing.
    NoIproute2(io::Error),
    /// An `ip` command failed.
    Command {
        /// The command line.
        cmd: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Lock file, namespace file or spawn failure.
    Io(io::Error),
}

impl std::fmt::Display for NetworkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetworkError::NotRoot => write!(
                f,
                "this test builds hosts from network namespaces (ip netns, veth) and must run \
                 as root (euid 0); run it as root, e.g. `sudo -E cargo test -p voxgate-fleet-tests`"
            ),
            NetworkError::NoIproute2(e) => {
                write!(
                    f,
                    "`ip` (iproute2) not found: {e}; apt-get install iproute2"
                )
            }
            NetworkError::Command { cmd, stderr } => write!(f, "`{cmd}` failed: {stderr}"),
            NetworkError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for NetworkError {}

impl From<io::Error> for NetworkError {
    fn from(e: io::Error) -> Self {
        NetworkError::Io(e)
    }
}

/// One host: a short name (namespace `PREFIX + name`) and its eth0 addresses in CIDR form
/// (`10.0.0.2/24`), plus addresses for its loopback (`/32`, e.g. a VIP it serves).
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Short name, at most 10 characters (interface names are limited to 15).
    pub name: String,
    /// eth0 addresses, CIDR.
    pub addrs: Vec<String>,
    /// Loopback addresses, CIDR.
    pub loopback: Vec<String>,
}

impl HostSpec {
    /// A host with eth0 addresses only.
    pub fn new(name: &str, addrs: &[&str]) -> Self {
        HostSpec {
            name: name.to_owned(),
            addrs: addrs.iter().map(|s| (*s).to_owned()).collect(),
            loopback: Vec::new(),
        }
    }

    /// Adds a loopback address (a VIP served by this host).
    pub fn with_loopback(mut self, cidr: &str) -> Self {
        self.loopback.push(cidr.to_owned());
        self
    }
}

/// The namespaces of one run; deleted on drop.
pub struct Network {
    prefix: &'static str,
    namespaces: Vec<String>,
    _lock: File,
}

/// Whether this process can build the network: root, with `ip` installed.
pub fn check_privileges() -> Result<(), NetworkError> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(NetworkError::NotRoot);
    }
    Command::new("ip")
        .arg("-V")
        .output()
        .map_err(NetworkError::NoIproute2)?;
    Ok(())
}

impl Network {
    /// Builds the switch and `hosts`. Fails with [`NetworkError::NotRoot`] unless root.
    pub fn create(hosts: &[HostSpec]) -> Result<Network, NetworkError> {
        Self::create_with_prefix(PREFIX, hosts)
    }

    /// As [`Network::create`], with namespace names starting with `prefix` (for example
    /// `vgi-`): runs with different prefixes neither share names nor wait for each other, and
    /// leftovers are cleaned up per prefix.
    pub fn create_with_prefix(
        prefix: &'static str,
        hosts: &[HostSpec],
    ) -> Result<Network, NetworkError> {
        check_privileges()?;
        let lock_name = if prefix == PREFIX {
            "voxgate-fleet-tests.lock".to_string()
        } else {
            format!("voxgate-fleet-tests-{}.lock", prefix.trim_end_matches('-'))
        };
        let lock = File::create(std::env::temp_dir().join(lock_name))?;
        // SAFETY: flock(2) on a descriptor we own; blocks until a concurrent run finishes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error().into());
        }
        remove_leftovers(prefix);

        let mut net = Network {
            prefix,
            namespaces: Vec::new(),
            _lock: lock,
        };
        let switch = net.add_namespace(SWITCH)?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        ip(&["-n", &switch, "link", "set", "lo", "up"])?;
        for h in hosts {
            assert!(h.name.len() <= 10, "host name {:?} too long", h.name);
            let ns = net.add_namespace(&h.name)?;
            let port = format!("v-{}", h.name);
            ip(&[
                "-n", &switch, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ])?;
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            for a in &h.addrs {
                ip(&["-n", &ns, "addr", "add", a, "dev", "eth0"])?;
            }
            for a in &h.loopback {
                ip(&["-n", &ns, "addr", "add", a, "dev", "lo"])?;
            }
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(net)
    }

    /// A network of one host, `host`, whose loopback owns every address of the IPv6 prefix
    /// `cidr` (a local route for all of it) and which may bind any of them: a test inside can
    /// connect from as many sources, in as many /64s, /56s or /48s, as it likes.
    pub fn loopback_owning(prefix: &'static str, cidr: &str) -> Result<Network, NetworkError> {
        let net = Self::create_with_prefix(prefix, &[HostSpec::new("host", &[])])?;
        net.ip("host", &["-6", "route", "add", "local", cidr, "dev", "lo"])?;
        let ns = net.ns("host");
        let sysctl = [
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            "net.ipv6.ip_nonlocal_bind=1",
        ];
        ip(&sysctl)?;
        Ok(net)
    }

    /// Runs `f` on a thread of its own inside host `host` (the sockets it opens, and the
    /// processes and threads it starts, use that host's network) and returns what `f` returns;
    /// a panic in `f` is resumed here. The network is deleted afterwards.
    pub fn run_in<T: Send + 'static>(
        self,
        host: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let host = host.to_owned();
        let inside = std::thread::spawn(move || {
            self.enter(&host).expect("enter the namespace");
            let out = f();
            drop(self);
            out
        });
        inside
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    fn add_namespace(&mut self, short: &str) -> Result<String, NetworkError> {
        let ns = self.ns(short);
        ip(&["netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        Ok(ns)
    }

    /// Full namespace name of host `short`.
    pub fn ns(&self, short: &str) -> String {
        format!("{}{short}", self.prefix)
    }

    /// Runs `ip -n <host> args...`.
    pub fn ip(&self, host: &str, args: &[&str]) -> Result<(), NetworkError> {
        let ns = self.ns(host);
        let mut full = vec!["-n", ns.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Starts `cmd` inside host `host`, output in `log`.
    pub fn spawn(
        &self,
        host: &str,
        name: &str,
        cmd: &mut Command,
        log: PathBuf,
    ) -> io::Result<Proc> {
        let path = PathBuf::from(NETNS_DIR).join(self.ns(host));
        Proc::spawn(name, Some(&path), cmd, log)
    }

    /// Moves the calling thread into host `host`: sockets it opens afterwards, and threads it
    /// spawns, use that host's network. Use a dedicated thread.
    pub fn enter(&self, host: &str) -> io::Result<()> {
        let f = File::open(PathBuf::from(NETNS_DIR).join(self.ns(host)))?;
        // SAFETY: setns(2) with a namespace descriptor we own; it only affects this thread.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            delete_namespace(ns);
        }
    }
}

fn ip(args: &[&str]) -> Result<(), NetworkError> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetworkError::Command {
            cmd: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Address `host` (its last 16 bits) of /64 number `subnet` (the last 16 bits of the /64
/// prefix) of `prefix`, e.g. inside a prefix a [`Network::loopback_owning`] host owns.
pub fn ipv6_in(prefix: Ipv6Addr, subnet: u16, host: u16) -> IpAddr {
    let mut s = prefix.segments();
    s[3] |= subnet;
    s[7] = host;
    IpAddr::V6(Ipv6Addr::from(s))
}

/// Kills the processes still inside `ns` and deletes it. Only for namespaces the caller made
/// (every process inside is one it started there).
pub fn delete_namespace(ns: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
        for pid in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<libc::pid_t>().ok())
        {
            // SAFETY: kill(2) by pid; the pid lives in a namespace only this harness creates.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let _ = Command::new("ip").args(["netns", "del", ns]).output();
}

/// Removes namespaces (and their processes) that a crashed run with `prefix` left behind.
fn remove_leftovers(prefix: &str) {
    let Ok(entries) = fs::read_dir(NETNS_DIR) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // The main fleet's "vgft-" never starts another prefix's names, nor the reverse.
        if name.starts_with(prefix) {
            eprintln!("fleet-tests: removing leftover namespace {name}");
            delete_namespace(&name);
        }
    }
}
