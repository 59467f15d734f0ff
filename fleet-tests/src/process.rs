//! A child process of a test: started (optionally inside a network namespace) with its output
//! in a log file, signalled by pid, stopped on drop (SIGTERM, then SIGKILL), and killed by the
//! kernel if the thread that started it dies first (`PR_SET_PDEATHSIG`): spawn from a thread
//! that outlives the child.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running (or exited) child process with its log.
pub struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr in `log`. With `netns` (a path such as
    /// `/run/netns/NAME`), the child joins that network namespace before exec.
    pub fn spawn(
        name: &str,
        netns: Option<&Path>,
        cmd: &mut Command,
        log: PathBuf,
    ) -> io::Result<Proc> {
        let out = File::create(&log)?;
        cmd.stdout(out.try_clone()?)
            .stderr(out)
            .stdin(Stdio::null());
        // Kept open until spawn returns: the child uses the descriptor before exec.
        let ns_file = netns.map(File::open).transpose()?;
        let ns_fd = ns_file.as_ref().map(|f| f.as_raw_fd());
        // SAFETY: prctl(2) and setns(2) are async-signal-safe; the closure touches nothing but
        // `ns_fd`, which stays open (CLOEXEC closes it only at exec).
        unsafe {
            cmd.pre_exec(move || {
                // If the test process dies without cleaning up (SIGKILL, abort), so does the
                // child: nothing of a test outlives it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(fd) = ns_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        drop(ns_file);
        Ok(Proc {
            name: name.to_owned(),
            child,
            log,
        })
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// The last `lines` lines of the output, for failure messages.
    pub fn tail(&self, lines: usize) -> String {
        let out = self.output();
        let all: Vec<&str> = out.lines().collect();
        let from = all.len().saturating_sub(lines);
        format!(
            "--- {} (last {} lines) ---\n{}",
            self.name,
            lines,
            all[from..].join("\n")
        )
    }

    /// Waits until the output contains `needle` at least `count` times.
    pub fn wait_for_log(&self, needle: &str, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.output().matches(needle).count() >= count {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to the process.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(io::Error::other)?;
        // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The exit status, if the process has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_status() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.signal(libc::SIGTERM);
            if self.wait_exit(Duration::from_secs(3)).is_none() {
                self.kill();
            }
        }
    }
}

/// "exit 0", "exit 3" or "signal 9", for messages.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    }
}
