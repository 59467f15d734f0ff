//! Two network namespaces of our own joined by a veth pair: a "server" host for the processes
//! under test and a "client" host (a browser) whose egress nftables can filter, so a test can
//! block a caller's UDP the way a corporate firewall does.
//!
//! ```text
//!   vgtcp-<pid>-<n>-srv   eth0 10.232.13.1/30, lo up   relay, transceiver, echo-bot, the test thread
//!   vgtcp-<pid>-<n>-cli   eth0 10.232.13.2/30, lo up   Chromium (`ip netns exec`), nft table `vgtcp`
//! ```
//!
//! Nothing is added to the caller's namespace: the veth is created inside the server namespace
//! with its peer moved straight into the client one, so the addresses exist only there and no
//! other test (the netns fleet uses 10.231.0.0/23 in its own namespaces) can meet them. Dropping
//! the [`NetnsPair`] kills what still runs inside (only processes this test started there) and
//! deletes both namespaces, which deletes the veth, also while unwinding from a failed assertion.
//! Namespaces a crashed run left behind (their pid is gone) are removed on the next create.

use std::fs::{self, File};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use voxgate_fleet_tests::netns::delete_namespace;

/// Prefix of every namespace made here ("voxgate TCP test").
const PREFIX: &str = "vgtcp-";
/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";
/// nftables table created in the client namespace.
const NFT_TABLE: &str = "vgtcp";

/// The server host's address (on its veth).
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 232, 13, 1);
/// The client host's address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 232, 13, 2);

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The two namespaces of one test; deleted on drop.
pub struct NetnsPair {
    server: String,
    client: String,
}

/// Whether this process may create network namespaces; `Err` says why not (for a skip message).
pub fn can_create_namespaces() -> Result<(), String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "creating network namespaces (ip netns, veth, nft) needs root; run the \
                    test as root (CI does), e.g. `sudo -E cargo nextest run -p voxgate-relay`"
                .into(),
        );
    }
    Ok(())
}

impl NetnsPair {
    /// Creates both namespaces and the veth between them. Panics (with the failing command)
    /// when that fails as root: only a missing privilege is a reason to skip.
    pub fn create() -> NetnsPair {
        remove_leftovers();
        let base = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut pair = NetnsPair {
            server: String::new(),
            client: String::new(),
        };
        ip(&["netns", "add", &format!("{base}-srv")]);
        pair.server = format!("{base}-srv");
        ip(&["netns", "add", &format!("{base}-cli")]);
        pair.client = format!("{base}-cli");
        ip(&[
            "-n",
            &pair.server,
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &pair.client,
        ]);
        for (ns, addr) in [(&pair.server, SERVER_IP), (&pair.client, CLIENT_IP)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/30"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
        }
        pair
    }

    /// Moves the calling thread into the server namespace: sockets it opens and processes or
    /// threads it starts afterwards live there. setns(2) is per thread; a test's own thread
    /// ends with the test.
    pub fn enter_server(&self) {
        let f = File::open(Path::new(NETNS_DIR).join(&self.server)).expect("open netns");
        // SAFETY: setns(2) with a namespace descriptor we own; it affects this thread only.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// `program` run in the client namespace (`ip netns exec`).
    pub fn client_command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.client, program]);
        cmd
    }

    /// Drops (and counts) every UDP datagram the client host sends to `to`: the client's UDP
    /// path to that port is gone, TCP to it still works.
    pub fn block_udp_to(&self, to: SocketAddr) {
        let ruleset = format!(
            "table inet {NFT_TABLE} {{\n\
               chain out {{\n\
                 type filter hook output priority 0; policy accept;\n\
                 ip daddr {} udp dport {} counter drop\n\
               }}\n\
             }}\n",
            to.ip(),
            to.port()
        );
        let mut child = self
            .client_command("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nft (apt package nftables; scripts/setup installs it)");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(ruleset.as_bytes())
            .expect("write the ruleset");
        let out = child.wait_with_output().expect("nft");
        assert!(
            out.status.success(),
            "nft -f failed: {}\n{ruleset}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// How many datagrams [`NetnsPair::block_udp_to`]'s rule has dropped.
    pub fn udp_dropped(&self) -> u64 {
        let out = self
            .client_command("nft")
            .args(["list", "chain", "inet", NFT_TABLE, "out"])
            .output()
            .expect("nft list");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split("counter packets ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no counter in the nft chain:\n{text}"))
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.client, &self.server] {
            if !ns.is_empty() {
                delete_namespace(ns);
            }
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (apt package iproute2; scripts/setup installs it)");
    assert!(
        out.status.success(),
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Deletes `vgtcp-<pid>-*` namespaces whose test process is gone (a crashed or killed run).
fn remove_leftovers() {
    let Ok(entries) = fs::read_dir(NETNS_DIR) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            eprintln!("netns: removing leftover namespace {name}");
            delete_namespace(&name);
        }
    }
}
