//! Free loopback ports for servers a test starts as child processes.
//!
//! A test picks a port, passes it on a command line, and the child binds it a moment later.
//! Asking the kernel for port 0 and dropping the socket picks from the ephemeral range, which
//! every outgoing connection on the machine also draws from: an HTTP probe, a gRPC client or a
//! browser can take the port in that moment, and the child then fails with "Address already in
//! use" (it sank a CI run: a relay's metrics port). So ports come from below the ephemeral
//! range, where the kernel never hands out a source port, and each one is claimed twice:
//! - in this process, so two servers of one test never share a port;
//! - across processes, by creating `<tmp>/voxgate-test-ports/<port>` exclusively, so tests
//!   running in parallel (nextest runs each test in its own process; pytest and the benchmarks
//!   use the same scheme) never pick the same port. A claim older than [`CLAIM_LIFETIME`] is
//!   stale and may be taken again: a test that still holds its port then has it bound, which
//!   the bind check below sees.
//!
//! A port is handed out only if it binds right now on 127.0.0.1 (and on ::1 where the machine
//! has IPv6 loopback) for every protocol asked for.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// After this a cross-process claim is stale. Longer than any one test; short enough that a
/// few suite runs in a row cannot use up the range (a full suite run claims about 1,000 ports).
pub const CLAIM_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// The lowest port handed out (above the registered ports of common local services).
const LOWEST: u16 = 10_000;

/// Which protocols a port must be free for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    Tcp,
    /// Both, e.g. a transceiver media port (UDP, plus ICE-TCP on the same number). There is no
    /// UDP-only choice: every UDP port a voxgate server binds may also take ICE-TCP.
    UdpAndTcp,
}

/// A TCP port free on loopback (an HTTP, gRPC or metrics listener).
pub fn free_tcp_port() -> u16 {
    free_port_range(1, Protocols::Tcp)
}

/// A port free on loopback for both UDP and TCP.
pub fn free_udp_and_tcp_port() -> u16 {
    free_port_range(1, Protocols::UdpAndTcp)
}

/// A base port P such that P, P+1, .., P+count-1 are all free on loopback for `protocols`.
///
/// # Panics
/// When no such range is found in 500 tries (the machine is out of ports).
pub fn free_port_range(count: u16, protocols: Protocols) -> u16 {
    assert!(count >= 1, "a range of zero ports");
    let (low, high) = candidate_range();
    assert!(
        high - low > count,
        "port range {low}..{high} too small for {count} ports"
    );
    for _ in 0..500 {
        let base = low + rand::random::<u16>() % (high - low - count);
        let ports: Vec<u16> = (base..base + count).collect();
        if !ports.iter().all(|&p| binds(p, protocols)) {
            continue;
        }
        if claim_in_process(&ports) {
            if claim_across_processes(&ports) {
                return base;
            }
            release_in_process(&ports);
        }
    }
    panic!("no {count} consecutive free {protocols:?} ports in {low}..{high}");
}

/// The ports below the kernel's ephemeral range (or above it, when it starts low).
fn candidate_range() -> (u16, u16) {
    let (eph_low, eph_high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999));
    if eph_low >= LOWEST + 5_000 {
        (LOWEST, eph_low)
    } else {
        (eph_high.saturating_add(1).max(LOWEST), u16::MAX)
    }
}

fn binds(port: u16, protocols: Protocols) -> bool {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    let udp = |a| match UdpSocket::bind(a) {
        Ok(_) => true,
        // No IPv6 loopback here (e.g. a namespace without it): nothing can collide on it.
        Err(e) => a == v6 && e.kind() == ErrorKind::AddrNotAvailable,
    };
    let tcp = |a| match TcpListener::bind(a) {
        Ok(_) => true,
        Err(e) => a == v6 && e.kind() == ErrorKind::AddrNotAvailable,
    };
    let want_udp = protocols == Protocols::UdpAndTcp;
    (!want_udp || (udp(v4) && udp(v6))) && tcp(v4) && tcp(v6)
}

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

fn claim_in_process(ports: &[u16]) -> bool {
    let mut guard = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if ports.iter().any(|p| set.contains(p)) {
        return false;
    }
    set.extend(ports.iter().copied());
    true
}

fn release_in_process(ports: &[u16]) {
    let mut guard = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = guard.as_mut() {
        for p in ports {
            set.remove(p);
        }
    }
}

fn claim_dir() -> PathBuf {
    std::env::temp_dir().join("voxgate-test-ports")
}

/// Creates one claim file per port; all or none.
fn claim_across_processes(ports: &[u16]) -> bool {
    let dir = claim_dir();
    if std::fs::create_dir_all(&dir).is_err() {
        // No writable temp dir: the in-process claim and the bind check still hold.
        return true;
    }
    let mut made = Vec::with_capacity(ports.len());
    for &port in ports {
        let path = dir.join(port.to_string());
        if claim_file(&path) {
            made.push(path);
        } else {
            for p in made {
                let _ = std::fs::remove_file(p);
            }
            return false;
        }
    }
    true
}

fn claim_file(path: &PathBuf) -> bool {
    for _ in 0..2 {
        match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(_) => return true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let stale = std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > CLAIM_LIFETIME);
                if !stale {
                    return false;
                }
                // Whoever removes it first retakes it; a loser sees AlreadyExists again.
                let _ = std::fs::remove_file(path);
            }
            Err(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_below_the_ephemeral_ports_distinct_and_bindable() {
        let (low, high) = candidate_range();
        let mut seen = HashSet::new();
        for _ in 0..20 {
            let base = free_port_range(4, Protocols::UdpAndTcp);
            assert!(
                base >= low && base + 4 <= high,
                "{base} outside {low}..{high}"
            );
            for p in base..base + 4 {
                assert!(seen.insert(p), "port {p} handed out twice");
                assert!(claim_dir().join(p.to_string()).exists());
                UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).expect("UDP binds");
                TcpListener::bind((Ipv4Addr::LOCALHOST, p)).expect("TCP binds");
            }
        }
    }

    #[test]
    fn a_port_in_use_is_never_handed_out() {
        let (low, high) = candidate_range();
        // Hold a block of the range; every port handed out must avoid it.
        let held: Vec<TcpListener> = (0..50)
            .filter_map(|i| TcpListener::bind((Ipv4Addr::LOCALHOST, low + 1_000 + i)).ok())
            .collect();
        let busy: HashSet<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        for _ in 0..50 {
            let p = free_tcp_port();
            assert!(p < high && !busy.contains(&p));
        }
    }

    #[test]
    fn a_fresh_claim_of_another_process_is_respected_and_a_stale_one_is_retaken() {
        let dir = claim_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("test-claim-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        assert!(claim_file(&path), "a free claim is taken");
        assert!(!claim_file(&path), "a fresh claim is respected");
        let old = SystemTime::now() - CLAIM_LIFETIME - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(claim_file(&path), "a stale claim is retaken");
        std::fs::remove_file(&path).unwrap();
    }
}
