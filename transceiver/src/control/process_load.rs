//! How much of its CPU the whole process uses: CPU time of every thread (media loops, gRPC,
//! signaling) over a sliding window, as a share of the cores the process may run on.
//!
//! Why admission needs this beside each loop's busy ratio: a loop at `--max-loop-busy` leaves
//! the rest of its core to the gRPC runtime, and in PCM mode that rest was not enough. Measured
//! at 163 PCM sessions on one core (`loadgen sessions --mode pcm`, transceiver pinned to one
//! core, loop at 0.85): the process used the whole core, the gRPC side fell behind, and the
//! backend received its uplink frames p50 443 ms, p99 1.02 s late, with seconds where it got
//! one frame in eight. The loop itself was on time, so its own ratio could not see it.
//!
//! Sans-IO: [`CpuWindow`] takes the samples it is given; [`run_sampler`] is the I/O edge that
//! reads the process clock and publishes the ratio for the control plane.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::media::busy_meter::SharedBusy;
use crate::metrics::Metrics;

/// How often the sampler reads the process clock.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The ratio covers the last this-long: long enough that one burst (a DTLS handshake, a GC of
/// the allocator) does not refuse a session, short enough to follow a ramp of arrivals.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Process CPU over a sliding window of samples.
#[derive(Debug)]
pub struct CpuWindow {
    cores: f64,
    window: Duration,
    /// (wall instant, process CPU time) pairs, oldest first, spanning at most `window` plus
    /// one sample.
    samples: VecDeque<(Instant, Duration)>,
}

impl CpuWindow {
    /// `cores` is how many cores the process may use (at least one is assumed).
    pub fn new(cores: f64, window: Duration) -> Self {
        CpuWindow {
            cores: cores.max(1.0),
            window,
            samples: VecDeque::new(),
        }
    }

    /// Adds a sample; returns the share of the usable cores the process used between the
    /// oldest sample still in the window and this one (`None` until there are two samples).
    pub fn sample(&mut self, now: Instant, cpu: Duration) -> Option<f64> {
        self.samples.push_back((now, cpu));
        // Keep one sample at or before the window's start, so the span is the whole window.
        while self.samples.len() > 2
            && now.saturating_duration_since(self.samples[1].0) >= self.window
        {
            self.samples.pop_front();
        }
        let &(t0, c0) = self.samples.front()?;
        let wall = now.saturating_duration_since(t0);
        if wall.is_zero() {
            return None;
        }
        // A clock that went backwards (it cannot, but) reads as idle rather than as a panic.
        let used = cpu.saturating_sub(c0);
        Some((used.as_secs_f64() / (wall.as_secs_f64() * self.cores)).min(1.0))
    }
}

/// A session costs its full CPU only some time after it is admitted: its handshakes first,
/// then its uplink, and its downlink encoder only once its backend talks (1 s of every 2 with
/// the benchmark's duty backend). Sessions younger than this are not yet in the CPU window.
pub const YOUNG: Duration = Duration::from_secs(2);

/// Below this many settled sessions there is no per-session cost to extrapolate from, and the
/// window's ratio is used as it is (a burst onto an idle process still overshoots).
pub const MIN_SETTLED: usize = 20;

/// The admission instants of the last [`YOUNG`], to project the CPU the process will use once
/// they cost what the settled sessions cost. Without it, sessions arriving at 10/s onto one
/// core overshot to 127 PCM sessions (`scripts/bench --full`), at 0.97 of the core, with the
/// backends' uplink audio p99 546 ms late, because each admission saw a window that did not
/// yet hold the cost of the 20-odd sessions admitted before it.
#[derive(Debug)]
pub struct YoungSessions {
    admitted: VecDeque<Instant>,
    /// Bound on the instants kept (a flood of admissions keeps only the newest).
    cap: usize,
}

impl YoungSessions {
    pub fn new(cap: usize) -> Self {
        YoungSessions {
            admitted: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Records a session admitted at `now`.
    pub fn admitted(&mut self, now: Instant) {
        if self.admitted.len() == self.cap {
            self.admitted.pop_front();
        }
        self.admitted.push_back(now);
    }

    /// Sessions admitted within [`YOUNG`] before `now`.
    pub fn count(&mut self, now: Instant) -> usize {
        while self
            .admitted
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= YOUNG)
        {
            self.admitted.pop_front();
        }
        self.admitted.len()
    }
}

/// The most the projection scales the window's ratio by. Sessions/settled alone grows without
/// bound when arrivals are fast: at 100 arrivals/s young sessions outnumber the settled ones
/// ten to one, and the ratio, which already holds their handshakes and most of their media,
/// was multiplied by 11. A transceiver on one core using 0.23 of it refused 23 of 250
/// passthrough callers as "298 % of its usable cores" (`loadgen sessions -n 250 --rate 100`).
/// 1.5 is what young sessions add at 25 arrivals/s near one core's PCM capacity (50 young on
/// 100 settled), so the slow ramps the projection is for keep all of it.
pub const MAX_PROJECTION: f64 = 1.5;

/// The process's CPU share once its young sessions cost what its settled ones do: `ratio`
/// scaled by all sessions over the settled ones, at most by [`MAX_PROJECTION`]. It overstates
/// a little (the young sessions' handshakes and partial costs are already in `ratio`), so a
/// ramp slows as it nears the limit and goes on once the young sessions have settled.
pub fn projected(ratio: f64, sessions: usize, young: usize) -> f64 {
    let settled = sessions.saturating_sub(young);
    if settled < MIN_SETTLED || young == 0 {
        return ratio;
    }
    ratio * (sessions as f64 / settled as f64).min(MAX_PROJECTION)
}

/// Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota (a container's
/// `limits.cpu`), as the standard library reads them.
pub fn usable_cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// CPU time of the whole process (all threads, user and system) so far.
pub fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Samples the process clock every [`SAMPLE_EVERY`] and publishes the ratio over [`WINDOW`]
/// into `shared` and the `process_cpu_ratio` gauge, until the task is dropped. Runs on the
/// signaling runtime: it must keep sampling when the gRPC runtime is the part starved of CPU.
pub async fn run_sampler(shared: SharedBusy, cores: f64, metrics: std::sync::Arc<Metrics>) {
    let mut window = CpuWindow::new(cores, WINDOW);
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some(ratio) = window.sample(Instant::now(), process_cpu_time()) {
            shared.set(ratio);
            metrics.process_cpu(ratio);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn ratio_is_cpu_over_wall_time_times_cores() {
        let t0 = Instant::now();
        let mut w = CpuWindow::new(2.0, ms(1000));
        assert_eq!(w.sample(t0, ms(0)), None, "one sample spans no time");
        // 100 ms of CPU every 100 ms of wall time on 2 cores: half of what the process may use.
        let mut last = None;
        for i in 1..=20 {
            last = w.sample(t0 + ms(100 * i), ms(100 * i));
        }
        let r = last.unwrap();
        assert!((r - 0.5).abs() < 1e-9, "{r}");
    }

    #[test]
    fn the_window_forgets_a_burst_once_it_is_older_than_the_window() {
        let t0 = Instant::now();
        let mut w = CpuWindow::new(1.0, ms(1000));
        w.sample(t0, ms(0));
        // A whole core for 300 ms, then idle.
        w.sample(t0 + ms(300), ms(300));
        let during = w.sample(t0 + ms(400), ms(300)).unwrap();
        assert!((during - 0.75).abs() < 1e-9, "{during}");
        let mut r = 1.0;
        for i in 5..=14 {
            r = w.sample(t0 + ms(100 * i), ms(300)).unwrap();
        }
        assert!((r - 0.0).abs() < 1e-9, "1.4 s later the burst is out: {r}");
        assert!(w.samples.len() <= 12, "bounded: {}", w.samples.len());
    }

    #[test]
    fn a_late_sample_still_divides_by_the_time_that_passed() {
        // The sampler's runtime may itself be delayed: a 600 ms gap is one long interval.
        let t0 = Instant::now();
        let mut w = CpuWindow::new(1.0, ms(1000));
        w.sample(t0, ms(0));
        let r = w.sample(t0 + ms(600), ms(540)).unwrap();
        assert!((r - 0.9).abs() < 1e-9, "{r}");
    }

    #[test]
    fn zero_cores_counts_as_one_and_the_ratio_never_passes_one() {
        let t0 = Instant::now();
        let mut w = CpuWindow::new(0.0, ms(1000));
        w.sample(t0, ms(0));
        assert_eq!(w.sample(t0 + ms(100), ms(250)), Some(1.0));
    }

    #[test]
    fn young_sessions_are_those_of_the_last_two_seconds_and_bounded() {
        let t0 = Instant::now();
        let mut y = YoungSessions::new(3);
        y.admitted(t0);
        y.admitted(t0 + ms(500));
        assert_eq!(y.count(t0 + ms(1000)), 2);
        assert_eq!(y.count(t0 + ms(2000)), 1, "the first is settled at 2 s");
        assert_eq!(y.count(t0 + ms(2500)), 0);
        for i in 0..10 {
            y.admitted(t0 + ms(3000 + i));
        }
        assert_eq!(y.count(t0 + ms(3100)), 3, "only the newest `cap` are kept");
    }

    #[test]
    fn the_projection_counts_young_sessions_at_the_settled_ones_cost() {
        // 80 settled sessions use 0.6 of the cores; 20 more are young: 0.75 once they settle.
        assert!((projected(0.6, 100, 20) - 0.75).abs() < 1e-9);
        // Nothing young: the window as it is.
        assert_eq!(projected(0.6, 100, 0), 0.6);
        // Too few settled sessions to extrapolate from (a burst onto an idle process).
        assert_eq!(projected(0.1, 60, 45), 0.1);
        assert_eq!(projected(0.1, 10, 10), 0.1);
        // A fast ramp: 200 young on 50 settled would be 5 ×; the window already holds most of
        // their cost, so the projection stops at 1.5 ×.
        assert!((projected(0.4, 250, 200) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn the_process_clock_moves_when_this_thread_works() {
        let before = process_cpu_time();
        let mut x = 0u64;
        let until = Instant::now() + ms(30);
        while Instant::now() < until {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        assert!(process_cpu_time() > before);
        assert!(usable_cores() >= 1.0);
    }
}
