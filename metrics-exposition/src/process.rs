//! The standard `process_*` metrics of the calling process, read from procfs.
//!
//! The same names, meanings and units as every Prometheus client library's process collector,
//! so that the usual dashboards and alerts apply: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`, plus `process_threads`. Sources:
//! `/proc/self/stat` (CPU ticks, start ticks since boot, sizes, threads), `/proc/stat`
//! (`btime`, the boot time), `/proc/self/fd` (one entry per descriptor) and
//! `/proc/self/limits` (`Max open files`, the soft limit). The parsing is pure and tested on
//! text; only [`ProcessStats::read_self`] touches the filesystem.

use std::fmt::Write as _;
use std::fs;

use crate::Format;

/// Why the process's figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcfsError {
    #[error("reading {path}: {source}")]
    Read {
        path: &'static str,
        source: std::io::Error,
    },
    #[error("{0} is not in the format procfs(5) describes")]
    Malformed(&'static str),
}

/// One reading of the process's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// `None` when the soft limit is "unlimited".
    pub max_fds: Option<u64>,
    pub start_time_seconds: f64,
    pub threads: u64,
}

/// The fields of `/proc/<pid>/stat` used here, in their raw units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields {
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub threads: u64,
    pub start_ticks: u64,
    pub vsize_bytes: u64,
    pub rss_pages: u64,
}

impl ProcessStats {
    /// Reads the calling process's figures.
    pub fn read_self() -> Result<ProcessStats, ProcfsError> {
        let stat = read("/proc/self/stat")?;
        let fields = parse_stat(&stat).ok_or(ProcfsError::Malformed("/proc/self/stat"))?;
        let boot =
            parse_boot_time(&read("/proc/stat")?).ok_or(ProcfsError::Malformed("/proc/stat"))?;
        let max_fds = parse_max_open_files(&read("/proc/self/limits")?)
            .ok_or(ProcfsError::Malformed("/proc/self/limits"))?;
        let open_fds = fs::read_dir("/proc/self/fd")
            .map_err(|source| ProcfsError::Read {
                path: "/proc/self/fd",
                source,
            })?
            .count() as u64;
        // SAFETY: sysconf(3) only reads a system constant.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let (ticks, page) = (ticks.max(1) as f64, page.max(1) as u64);
        Ok(ProcessStats {
            cpu_seconds: (fields.utime_ticks + fields.stime_ticks) as f64 / ticks,
            resident_bytes: fields.rss_pages.saturating_mul(page),
            virtual_bytes: fields.vsize_bytes,
            // The directory listing itself holds one descriptor while it runs.
            open_fds: open_fds.saturating_sub(1),
            max_fds,
            start_time_seconds: boot as f64 + fields.start_ticks as f64 / ticks,
            threads: fields.threads,
        })
    }

    /// Appends the families in `format` (for OpenMetrics, without `# EOF`).
    pub fn write(&self, out: &mut String, format: Format) {
        let counter_name = match format {
            Format::Classic => "process_cpu_seconds_total",
            Format::OpenMetrics => "process_cpu_seconds",
        };
        family(
            out,
            counter_name,
            "counter",
            "Total user and system CPU time spent in seconds.",
        );
        let _ = writeln!(out, "process_cpu_seconds_total {}", self.cpu_seconds);
        let mut gauge = |name: &str, help: &str, value: &dyn std::fmt::Display| {
            family(out, name, "gauge", help);
            let _ = writeln!(out, "{name} {value}");
        };
        gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            &self.resident_bytes,
        );
        gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            &self.virtual_bytes,
        );
        gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            &self.open_fds,
        );
        if let Some(max) = self.max_fds {
            gauge(
                "process_max_fds",
                "Maximum number of open file descriptors (the soft limit).",
                &max,
            );
        }
        gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            &self.start_time_seconds,
        );
        gauge("process_threads", "Number of OS threads.", &self.threads);
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn read(path: &'static str) -> Result<String, ProcfsError> {
    fs::read_to_string(path).map_err(|source| ProcfsError::Read { path, source })
}

/// The fields of a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and
/// may itself hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<StatFields> {
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): field n is f[n - 3].
    let n = |field: usize| f.get(field - 3)?.parse::<u64>().ok();
    Some(StatFields {
        utime_ticks: n(14)?,
        stime_ticks: n(15)?,
        threads: n(20)?,
        start_ticks: n(22)?,
        vsize_bytes: n(23)?,
        rss_pages: n(24)?,
    })
}

/// `btime` of `/proc/stat`: boot time, seconds since the epoch.
pub fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits`: `Some(None)` if unlimited.
pub fn parse_max_open_files(text: &str) -> Option<Option<u64>> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .strip_prefix("Max open files")?
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    soft.parse().ok().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (voxgate (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
        250 75 0 0 20 0 9 0 123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 \
        17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        assert_eq!(
            parse_stat(STAT),
            Some(StatFields {
                utime_ticks: 250,
                stime_ticks: 75,
                threads: 9,
                start_ticks: 123456,
                vsize_bytes: 987654321,
                rss_pages: 2048,
            })
        );
        assert_eq!(parse_stat("12 (short) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn boot_time_and_fd_limit() {
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764900000\nprocesses 9\n"),
            Some(1764900000)
        );
        assert_eq!(parse_boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_open_files(limits), Some(Some(1024)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited), Some(None));
        assert_eq!(parse_max_open_files("Max processes 1 1\n"), None);
    }

    #[test]
    fn this_process_reads_plausibly() {
        let s = ProcessStats::read_self().expect("procfs");
        assert!(s.resident_bytes > 1 << 20, "{s:?}");
        assert!(s.virtual_bytes >= s.resident_bytes, "{s:?}");
        assert!(s.open_fds >= 3, "stdin, stdout, stderr at least: {s:?}");
        assert!(s.threads >= 1, "{s:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(s.start_time_seconds <= now + 1.0, "{s:?}");
        assert!(s.start_time_seconds > now - 86_400.0 * 365.0, "{s:?}");
    }
}
