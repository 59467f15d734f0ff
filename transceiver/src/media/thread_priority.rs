//! A media loop's scheduling priority (`--loop-priority`).
//!
//! A loop is a real-time thread: a downlink packet is due every 20 ms for every talking session,
//! however busy the machine is. At normal priority a loop that a junk flood keeps at 100 % CPU is
//! an ordinary CPU hog to the scheduler, and it waits whole time slices behind the other work on
//! its core (a build, the attacker's own senders, softirq threads). `hostile_media`'s
//! junk-flood test, on 2 cores beside two busy processes and a build, shows it in the gaps
//! between downlink packets under the flood: at normal priority and at nice -10 they grow well
//! past a frame, at `rt` they stay at one (docs/SESSION_COST.md, "Figures formerly in code
//! comments").
//!
//! So the default is `rt`: `SCHED_RR` at priority 10, above every normal thread and below the
//! kernel's own real-time threads (threaded interrupts run at 50). The loop sleeps in `poll`
//! whenever its socket is empty, and its receive budget yields to timers; under a flood at its
//! capacity it may hold its core, and the kernel's real-time throttling
//! (`sched_rt_runtime_us`, 95 % by default) still leaves the rest to everything else. Audio
//! servers do the same (PipeWire's and JACK's data threads run `SCHED_FIFO`).
//!
//! If throttling is off (`sched_rt_runtime_us` = -1), the first `rt` loop logs a warning.
//!
//! Real-time and raised priorities need `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` / `RLIMIT_NICE`
//! that allows them). Without it the loop falls back, `rt` to `high` to `normal`, with one
//! warning per loop: priority is a quality of service, not a reason to refuse to serve.

use std::io;

/// What a loop asks for (`--loop-priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoopPriority {
    /// `SCHED_RR` at priority [`RT_PRIORITY`], falling back to `high`.
    Rt,
    /// Normal scheduling at nice [`HIGH_NICE`].
    High,
    /// Whatever the thread inherited.
    Normal,
}

/// The `SCHED_RR` priority of an `rt` loop (1..=99; the kernel's threaded IRQs use 50).
pub const RT_PRIORITY: i32 = 10;
/// The nice value of a `high` loop (PipeWire's non-real-time fallback uses -11).
pub const HIGH_NICE: i32 = -10;

impl LoopPriority {
    /// The metrics' name for this class (`voxgate_loop_scheduling{class}`).
    pub fn class(self) -> crate::metrics::SchedulingClass {
        use crate::metrics::SchedulingClass;
        match self {
            LoopPriority::Rt => SchedulingClass::Rt,
            LoopPriority::High => SchedulingClass::High,
            LoopPriority::Normal => SchedulingClass::Normal,
        }
    }

    /// The `class` label of `voxgate_loop_scheduling`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopPriority::Rt => "rt",
            LoopPriority::High => "high",
            LoopPriority::Normal => "normal",
        }
    }
}

/// Gives the calling thread `SCHED_RR` at `priority`. Per thread: the process's other threads
/// (control plane, gRPC) keep their own scheduling.
pub fn set_current_thread_rt(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pthread_self is always valid; `param` lives across the call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_RR, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Sets the calling thread's nice value. On Linux the nice value is per thread (a task).
pub fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority on our own thread id; no pointers involved.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Applies `wanted` to the calling loop thread and returns what it got: `wanted`, or the
/// fallback it ended on (each refusal logged once, as a warning).
pub fn apply_loop_priority(loop_index: usize, wanted: LoopPriority) -> LoopPriority {
    let mut refused = Vec::new();
    if wanted == LoopPriority::Rt {
        match set_current_thread_rt(RT_PRIORITY) {
            Ok(()) => {
                warn_once_if_rt_unthrottled();
                return LoopPriority::Rt;
            }
            Err(e) => refused.push(format!("SCHED_RR {RT_PRIORITY}: {e}")),
        }
    }
    if matches!(wanted, LoopPriority::Rt | LoopPriority::High) {
        match set_current_thread_nice(HIGH_NICE) {
            Ok(()) if refused.is_empty() => return LoopPriority::High,
            Ok(()) => {
                warn_refused(loop_index, wanted, LoopPriority::High, &refused);
                return LoopPriority::High;
            }
            Err(e) => refused.push(format!("nice {HIGH_NICE}: {e}")),
        }
    }
    if !refused.is_empty() {
        warn_refused(loop_index, wanted, LoopPriority::Normal, &refused);
    }
    LoopPriority::Normal
}

/// Where the kernel's real-time throttling is set: the share of each period that real-time
/// threads may take before the rest of the machine gets the CPU back.
const RT_RUNTIME_FILE: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// Whether `sched_rt_runtime_us` (its file's contents) turns real-time throttling off: `-1`
/// lets a real-time thread hold its core for as long as it has work.
pub fn rt_throttling_disabled(runtime_us: &str) -> bool {
    runtime_us.trim() == "-1"
}

/// An `rt` loop relies on throttling to leave a flooded core some room for everything else;
/// without it, says so once per process.
fn warn_once_if_rt_unthrottled() {
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(|| {
        let Ok(text) = std::fs::read_to_string(RT_RUNTIME_FILE) else {
            return;
        };
        if rt_throttling_disabled(&text) {
            tracing::warn!(
                file = RT_RUNTIME_FILE,
                "real-time throttling is off (-1): a media loop flooded at its capacity can hold \
                 its core completely; set it back to the default 950000, or pass \
                 --loop-priority high"
            );
        }
    });
}

fn warn_refused(loop_index: usize, wanted: LoopPriority, got: LoopPriority, refused: &[String]) {
    tracing::warn!(
        loop_index,
        wanted = wanted.as_str(),
        running_at = got.as_str(),
        refused = %refused.join("; "),
        "could not raise the media loop's scheduling priority (needs CAP_SYS_NICE): under CPU \
         contention its downlink pacing suffers; grant the capability, or pass \
         --loop-priority {} to silence this",
        got.as_str()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's nice value.
    fn current_nice() -> i32 {
        // SAFETY: gettid has no preconditions; getpriority takes no pointers.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[test]
    fn lowering_priority_is_always_allowed_and_is_per_thread() {
        let before = current_nice();
        let (want, got) = std::thread::spawn(|| {
            let want = (current_nice() + 5).min(19);
            set_current_thread_nice(want).unwrap();
            (want, current_nice())
        })
        .join()
        .unwrap();
        assert_eq!(want, got);
        // The spawning thread kept its own value.
        assert_eq!(current_nice(), before);
    }

    #[test]
    fn an_invalid_rt_priority_is_an_error_not_a_panic() {
        std::thread::spawn(|| {
            let e = set_current_thread_rt(100).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_minus_one_turns_rt_throttling_off() {
        assert!(rt_throttling_disabled("-1\n"));
        assert!(!rt_throttling_disabled("950000\n"));
        assert!(!rt_throttling_disabled("0"));
        assert!(!rt_throttling_disabled(""));
    }

    #[test]
    fn normal_asks_for_nothing() {
        let got = std::thread::spawn(|| apply_loop_priority(0, LoopPriority::Normal))
            .join()
            .unwrap();
        assert_eq!(got, LoopPriority::Normal);
    }
}
