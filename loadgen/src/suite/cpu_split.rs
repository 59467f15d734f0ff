//! How the machine's cores are split between the server under test and the load generator.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// CPUs online on the machine, whatever this thread's affinity (the suite pins itself): the
/// kernel's list in `/sys/devices/system/cpu/online`, as `sysconf(_SC_NPROCESSORS_ONLN)`
/// reads it.
pub fn online_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpu_list(&list))
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// How many CPUs a kernel CPU list (`0-3,6,8-9`) names; `None` if it is not one.
fn count_cpu_list(list: &str) -> Option<usize> {
    list.trim().split(',').try_fold(0usize, |n, range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        Some(n + last.checked_sub(first)? + 1)
    })
}

/// How the machine's cores are split between the server under test and the load generator,
/// so neither steals CPU from the other (the figures are per core of the server).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuSplit {
    /// `taskset -c` list for every server process (transceiver, relay, peers, forwarder).
    pub server: String,
    /// The load generator's own cores (this process and its threads).
    pub generator: String,
}

impl CpuSplit {
    /// `loops` cores for the server, the rest for the generator; `None` when nothing is left.
    pub fn for_loops(loops: usize) -> Option<CpuSplit> {
        let cores = online_cores();
        if loops == 0 || loops >= cores {
            return None;
        }
        let list = |a: usize, b: usize| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        };
        Some(CpuSplit {
            server: list(0, loops - 1),
            generator: list(loops, cores - 1),
        })
    }

    /// Confines the calling thread, and so every thread it starts later, to the generator's
    /// cores. Servers are started through `taskset` with their own list.
    pub fn pin_generator(&self, loops: usize) -> anyhow::Result<()> {
        let mut set = rustix::thread::CpuSet::new();
        for c in loops..online_cores() {
            set.set(c);
        }
        if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
            bail!("sched_setaffinity to cores {}: {e}", self.generator);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::suite::cpu_split::count_cpu_list;

    #[test]
    fn a_kernel_cpu_list_counts_ranges_and_single_cpus() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }
}
