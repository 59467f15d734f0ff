//! How the machine's cores are split between the server under test and the load generator.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// CPUs online on the machine, whatever this thread's affinity (the suite pins itself).
pub fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
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
        let cores = online_cores();
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it, and
        // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            for c in loops..cores {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if rc != 0 {
            bail!(
                "sched_setaffinity to cores {}: {}",
                self.generator,
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}
