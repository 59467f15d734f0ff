//! What the kernel accounts to a process: CPU time (`/proc/<pid>/stat` utime + stime, all
//! threads), resident memory (`/proc/<pid>/status` VmRSS) and open file descriptors. Reading another process's
//! accounting is how a benchmark charges the server only for its own work, never for the load
//! generator sharing the machine.

use std::io;
use std::time::Duration;

/// CPU time a process has used so far (user + system, every thread, children excluded).
pub fn cpu_time(pid: u32) -> io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_stat_cpu_ticks(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc stat"))?;
    Ok(ticks_to_duration(ticks))
}

/// Resident set size in KiB.
pub fn rss_kib(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_status_kib(&status, "VmRSS:")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in /proc status"))
}

/// File descriptors the process has open (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: u32) -> io::Result<u64> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64)
}

/// CPU time of the calling thread only (for in-process measurements such as the codec floor).
pub fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks. The command
/// name (field 2) is in parentheses and may contain spaces, so fields are counted after the
/// last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After ")": field 3 (state) is index 0, so utime (14) is index 11 and stime (15) is 12.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The value of a `Key:   123 kB` line of `/proc/<pid>/status`.
pub fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_ascii_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The cores process `pid` may run on (`sched_getaffinity`); `None` if it cannot be read.
pub fn allowed_cores(pid: u32) -> Option<Vec<usize>> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    let set = rustix::thread::sched_getaffinity(Some(pid)).ok()?;
    let cores: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect();
    (!cores.is_empty()).then_some(cores)
}

/// Time the hypervisor ran something else while `cores` wanted to run ("steal" in
/// `/proc/stat`), summed over them: a guest cannot see why a wakeup was late, but it can see
/// this. Zero on bare metal.
pub fn steal_time(cores: &[usize]) -> io::Result<Duration> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let ticks = parse_steal_ticks(&stat, cores).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, "no steal column in /proc/stat")
    })?;
    Ok(ticks_to_duration(ticks))
}

/// The steal column (the 8th number of a `cpuN` line) summed over `cores`; `None` if a core
/// has no line or the line has no steal column (kernels before 2.6.11).
pub fn parse_steal_ticks(stat: &str, cores: &[usize]) -> Option<u64> {
    cores.iter().try_fold(0u64, |sum, core| {
        let name = format!("cpu{core}");
        let line = stat
            .lines()
            .find(|l| l.split_ascii_whitespace().next() == Some(name.as_str()))?;
        let steal: u64 = line.split_ascii_whitespace().nth(8)?.parse().ok()?;
        Some(sum + steal)
    })
}

/// UDP datagrams the kernel dropped for a full receive buffer, IPv4 and IPv6, machine-wide
/// (this network namespace).
pub fn udp_rcvbuf_errors() -> io::Result<u64> {
    let v4 = std::fs::read_to_string("/proc/net/snmp")?;
    let v4 = parse_snmp_udp(&v4, "RcvbufErrors")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Udp RcvbufErrors"))?;
    // No IPv6 in the kernel: no snmp6, nothing dropped there.
    let v6 = std::fs::read_to_string("/proc/net/snmp6")
        .ok()
        .and_then(|t| parse_snmp6(&t, "Udp6RcvbufErrors"))
        .unwrap_or(0);
    Ok(v4 + v6)
}

/// `field` of the `Udp:` table of `/proc/net/snmp` (a header line of names, then a line of
/// values).
pub fn parse_snmp_udp(text: &str, field: &str) -> Option<u64> {
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let names = udp.next()?;
    let values = udp.next()?;
    let at = names.split_ascii_whitespace().position(|n| n == field)?;
    values.split_ascii_whitespace().nth(at)?.parse().ok()
}

/// `field` of `/proc/net/snmp6` (one `name value` pair per line).
pub fn parse_snmp6(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_ascii_whitespace();
        (it.next()? == field).then(|| it.next()?.parse().ok())?
    })
}

fn ticks_to_duration(ticks: u64) -> Duration {
    let hz = rustix::param::clock_ticks_per_second();
    let hz = if hz > 0 { hz } else { 100 };
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz)
}

/// Raises this process's open-file limit to its hard limit (each simulated session owns a
/// UDP socket). Returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    lim.current = lim.maximum;
    setrlimit(Resource::Nofile, lim)?;
    // No hard limit: the soft one is unlimited too.
    Ok(lim.current.unwrap_or(u64::MAX))
}

/// Pins the calling thread to `core`, when that core exists; returns whether it did.
pub fn pin_current_thread(core: usize) -> bool {
    core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current)
}

/// TCP_NODELAY of every TCP socket of process `pid` whose local port is `port` (e.g. the
/// server side of its gRPC connections), read through a duplicate of each socket obtained
/// with `pidfd_getfd` (needs ptrace rights over `pid`: same user or root). Empty when the
/// sockets cannot be inspected.
pub fn tcp_nodelay_on_port(pid: u32, port: u16) -> Vec<bool> {
    use rustix::net::{getpeername, getsockname, sockopt, SocketType};
    use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
    let mut out = Vec::new();
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return out;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return out;
    };
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd", pid = pid.as_raw_nonzero()))
    else {
        return out;
    };
    for e in entries.flatten() {
        let is_socket =
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        let Some(target) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if !is_socket {
            continue;
        }
        // A duplicate we own, closed when it drops.
        let Ok(fd) = pidfd_getfd(&pidfd, target, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let stream = sockopt::socket_type(&fd).is_ok_and(|t| t == SocketType::STREAM);
        let on_port = stream
            && getsockname(&fd)
                .ok()
                .and_then(|a| std::net::SocketAddr::try_from(a).ok())
                .is_some_and(|a| a.port() == port);
        let connected = on_port && getpeername(&fd).is_ok_and(|peer| peer.is_some());
        if connected {
            if let Ok(on) = sockopt::tcp_nodelay(&fd) {
                out.push(on);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line =
            "1234 (media loop (x) 1) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn steal_is_the_eighth_number_of_each_core_line() {
        let stat = "cpu  2992030 4043 654506 3461165 122253 0 157165 99831 0 0\n\
                    cpu0 1553018 1918 296211 1740346 35083 0 87967 37726 0 0\n\
                    cpu1 1439012 2124 358295 1720819 87169 0 69197 62104 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(parse_steal_ticks(stat, &[0]), Some(37726));
        assert_eq!(parse_steal_ticks(stat, &[0, 1]), Some(37726 + 62104));
        // `cpu` (all cores) is not `cpu0`'s prefix match; a missing core is no figure.
        assert_eq!(parse_steal_ticks(stat, &[2]), None);
        assert_eq!(parse_steal_ticks("cpu0 1 2 3 4\n", &[0]), None);
    }

    #[test]
    fn udp_receive_buffer_errors_are_read_by_column_name() {
        let snmp = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 443149136 116124 10722637 454058206 10722600 0\n\
                    UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    UdpLite: 0 0 0 0 7 0\n";
        assert_eq!(parse_snmp_udp(snmp, "RcvbufErrors"), Some(10_722_600));
        assert_eq!(parse_snmp_udp(snmp, "NoSuchColumn"), None);
        assert_eq!(parse_snmp_udp("Udp: RcvbufErrors\n", "RcvbufErrors"), None);
        let snmp6 = "Udp6InDatagrams                 \t12\nUdp6RcvbufErrors                \t3\n";
        assert_eq!(parse_snmp6(snmp6, "Udp6RcvbufErrors"), Some(3));
        assert_eq!(parse_snmp6(snmp6, "Udp6SndbufErrors"), None);
        assert!(udp_rcvbuf_errors().is_ok());
    }

    #[test]
    fn status_values_are_read_in_kib() {
        let status = "Name:\ttransceiver\nVmPeak:\t  999 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(12345));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn nodelay_of_own_sockets_is_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(tcp_nodelay_on_port(std::process::id(), port), vec![false]);
        s.set_nodelay(true).unwrap();
        assert_eq!(tcp_nodelay_on_port(std::process::id(), port), vec![true]);
    }

    #[test]
    fn own_process_is_readable() {
        let pid = std::process::id();
        assert!(rss_kib(pid).unwrap() > 0);
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(cpu_time(pid).is_ok());
        let cores = allowed_cores(pid).expect("own affinity");
        assert!(!cores.is_empty());
        assert!(steal_time(&cores).is_ok());
    }
}
