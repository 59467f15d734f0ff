//! How much of its CPU the whole process uses: CPU time of every thread (media loops, gRPC,
//! signaling) over a sliding window, as a share of the cores the process may run on.
//!
//! Why admission needs this beside each loop's busy ratio: a loop at `--max-loop-busy` leaves
//! the rest of its core to the gRPC runtime, and in PCM mode that rest was not enough: with PCM
//! sessions admitted by the loop's ratio alone on one core, the process used the whole core,
//! the gRPC side fell behind, and the backends received their uplink frames far too late. The
//! loop itself was on time, so its own ratio could not see it (docs/SESSION_COST.md,
//! "Admission by the whole process's CPU").
//!
//! Sans-IO: [`CpuWindow`] takes the samples it is given; [`run_sampler`] is the I/O edge that
//! reads the process clock and publishes the ratio for the control plane.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::media::busy_meter::SharedBusy;
use crate::media::session::SessionId;
use crate::metrics::Metrics;

/// How often the sampler reads the process clock.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The ratio covers the last this-long: long enough that one burst (a DTLS handshake, a GC of
/// the allocator) does not refuse a session, short enough to follow a ramp of arrivals.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The rate of a growing count over a sliding window of samples: what the CPU window and the
/// talking sessions' count (`talk_crest`, frames encoded) both measure.
#[derive(Debug)]
pub struct RateWindow {
    window: Duration,
    /// (wall instant, count) pairs, oldest first, spanning at most `window` plus one sample.
    samples: VecDeque<(Instant, u64)>,
}

impl RateWindow {
    pub fn new(window: Duration) -> Self {
        RateWindow {
            window,
            samples: VecDeque::new(),
        }
    }

    /// Adds a sample; returns the count's growth per second between the oldest sample still in
    /// the window and this one (`None` until two samples span some time).
    pub fn sample(&mut self, now: Instant, count: u64) -> Option<f64> {
        self.samples.push_back((now, count));
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
        // A count that went backwards (it cannot, but) reads as no growth rather than a panic.
        Some(count.saturating_sub(c0) as f64 / wall.as_secs_f64())
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Process CPU over a sliding window of samples.
#[derive(Debug)]
pub struct CpuWindow {
    cores: f64,
    /// CPU nanoseconds of the process.
    cpu: RateWindow,
}

impl CpuWindow {
    /// `cores` is how many cores the process may use (at least one is assumed).
    pub fn new(cores: f64, window: Duration) -> Self {
        CpuWindow {
            cores: cores.max(1.0),
            cpu: RateWindow::new(window),
        }
    }

    /// Adds a sample; returns the share of the usable cores the process used between the
    /// oldest sample still in the window and this one (`None` until there are two samples).
    pub fn sample(&mut self, now: Instant, cpu: Duration) -> Option<f64> {
        let nanos_per_sec = self.cpu.sample(now, cpu.as_nanos() as u64)?;
        Some((nanos_per_sec / 1e9 / self.cores).min(1.0))
    }
}

/// A session costs its full CPU only some time after it is admitted: its handshakes first,
/// then its uplink, and its downlink encoder only once its backend talks (1 s of every 2 with
/// the benchmark's duty backend). Sessions younger than this are not yet in the CPU window.
pub const YOUNG: Duration = Duration::from_secs(2);

/// Below this many settled sessions there is no per-session cost to extrapolate from, and the
/// window's ratio is used as it is (a burst onto an idle process is [`RecentTalkers`]' to stop).
pub const MIN_SETTLED: usize = 20;

/// The admission instants of the last [`YOUNG`], to project the CPU the process will use once
/// they cost what the settled sessions cost. Without it, a steady ramp of PCM sessions onto one
/// core overshot the limit, and the backends' uplink audio ran late, because each admission saw
/// a window that did not yet hold the cost of the sessions admitted in the seconds before it
/// (docs/SESSION_COST.md, "Admission by the whole process's CPU").
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
/// bound when arrivals are fast: at 100 arrivals/s young sessions far outnumber the settled
/// ones, and the ratio, which already holds their handshakes and most of their media, was
/// multiplied many times over: a transceiver refused passthrough callers while its core was
/// mostly idle (docs/SESSION_COST.md, "Admission by the whole process's CPU").
/// 1.5 is what young sessions add at 25 arrivals/s near one core's PCM capacity (50 young on
/// 100 settled), so the slow ramps the projection is for keep all of it.
pub const MAX_PROJECTION: f64 = 1.5;

/// PCM sessions whose backend started talking within the last [`WINDOW`], and what each will
/// cost once the window shows it whole.
///
/// Most of a session's cost enters the window soon after it is admitted: its handshakes, then
/// its media. Not the encoder of a PCM session: it is most of the session's CPU and starts only
/// once the backend talks, so a burst of PCM callers onto a fresh process showed in the window
/// only after it had been admitted, well past what one core holds, and every backend's audio
/// then ran late (docs/SESSION_COST.md, "Admission that knows a talking session's encoder").
/// Such a session is counted from its first played frame at its encoder's measured cost
/// (`codec_cost`), less the part of it the window already shows: `age / WINDOW` of it after
/// `age`.
///
/// [`YoungSessions`] cannot see this: a burst onto a fresh process has no settled sessions to
/// extrapolate from, and what the settled ones cost says nothing of a session whose encoder has
/// yet to start.
#[derive(Debug)]
pub struct RecentTalkers {
    /// Oldest first; at most `cap`.
    entries: VecDeque<Talker>,
    /// Bound on the entries kept (a flood keeps only the newest).
    cap: usize,
}

#[derive(Debug, Clone, Copy)]
struct Talker {
    id: SessionId,
    /// Its first played frame.
    since: Instant,
    /// Its share of the usable cores once whole.
    cost: f64,
}

impl RecentTalkers {
    pub fn new(cap: usize) -> Self {
        RecentTalkers {
            entries: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Session `id`'s backend started talking at `now`; once whole, the session costs `cost`
    /// (a share of the usable cores).
    pub fn started_talking(&mut self, now: Instant, id: SessionId, cost: f64) {
        self.ended(id);
        if self.entries.len() == self.cap {
            self.entries.pop_front();
        }
        self.entries.push_back(Talker {
            id,
            since: now,
            cost,
        });
    }

    /// Session `id` ended: it will add nothing more.
    pub fn ended(&mut self, id: SessionId) {
        if let Some(i) = self.entries.iter().position(|t| t.id == id) {
            self.entries.remove(i);
        }
    }

    /// The share of the usable cores the recent talkers will still add to the window.
    pub fn pending(&mut self, now: Instant) -> f64 {
        while self
            .entries
            .front()
            .is_some_and(|t| now.saturating_duration_since(t.since) >= WINDOW)
        {
            self.entries.pop_front();
        }
        self.entries
            .iter()
            .map(|t| {
                let shown =
                    now.saturating_duration_since(t.since).as_secs_f64() / WINDOW.as_secs_f64();
                t.cost * (1.0 - shown).max(0.0)
            })
            .sum()
    }

    /// Sessions that started talking within the window.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The process's CPU share once its young sessions cost what its settled ones do (the window's
/// `ratio` scaled by all `sessions` over the settled ones, at most by [`MAX_PROJECTION`]). It
/// overstates a little (the young sessions' handshakes and partial costs are already in
/// `ratio`), so a ramp slows as it nears the limit and goes on once the young sessions have
/// settled.
pub fn extrapolated(ratio: f64, sessions: usize, young: usize) -> f64 {
    let settled = sessions.saturating_sub(young);
    if settled < MIN_SETTLED || young == 0 {
        return ratio;
    }
    ratio * (sessions as f64 / settled as f64).min(MAX_PROJECTION)
}

/// What admission compares with `--max-process-cpu`: the larger of the window's `ratio`
/// extrapolated over the `young` sessions ([`extrapolated`]) and the window's ratio plus what
/// the recent talkers' encoders will still add ([`RecentTalkers`]). The first keeps a steady
/// ramp from overshooting (a version without it let PCM callers at 10/s take the process past
/// its limit); the second stops a burst the first has nothing to extrapolate from.
pub fn projected(
    ratio: f64,
    sessions: usize,
    young: usize,
    talkers: &mut RecentTalkers,
    now: Instant,
) -> f64 {
    extrapolated(ratio, sessions, young).max(ratio + talkers.pending(now))
}

/// Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota (a container's
/// `limits.cpu`), as the standard library reads them.
pub fn usable_cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// CPU time of the whole process (all threads, user and system) so far.
pub fn process_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids passed are constants the kernel
    // knows.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Samples the process clock every [`SAMPLE_EVERY`] and publishes the ratio over [`WINDOW`]
/// into `shared` and the `process_cpu_ratio` gauge, until the task is dropped; `also` runs at
/// each sample (the control plane samples its talking sessions there, on the same clock).
/// `not_load` is CPU the process spent that is no caller's (the codec cost measurements), left
/// out of the ratio. Runs on the signaling runtime: it must keep sampling when the gRPC runtime
/// is the part starved of CPU.
pub async fn run_sampler(
    shared: SharedBusy,
    cores: f64,
    metrics: std::sync::Arc<Metrics>,
    not_load: impl Fn() -> Duration,
    mut also: impl FnMut(Instant),
) {
    let mut window = CpuWindow::new(cores, WINDOW);
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let load = process_cpu_time().saturating_sub(not_load());
        if let Some(ratio) = window.sample(now, load) {
            shared.set(ratio);
            metrics.process_cpu(ratio);
        }
        also(now);
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
        assert!(w.cpu.len() <= 12, "bounded: {}", w.cpu.len());
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
    fn the_extrapolation_counts_young_sessions_at_the_settled_ones_cost() {
        // 80 settled sessions use 0.6 of the cores; 20 more are young: 0.75 once they settle.
        assert!((extrapolated(0.6, 100, 20) - 0.75).abs() < 1e-9);
        // Nothing young: the window as it is.
        assert_eq!(extrapolated(0.6, 100, 0), 0.6);
        // Too few settled sessions to extrapolate from (a burst onto an idle process).
        assert_eq!(extrapolated(0.1, 60, 45), 0.1);
        assert_eq!(extrapolated(0.1, 10, 10), 0.1);
        // A fast ramp: 200 young on 50 settled would be 5 ×; the window already holds most of
        // their cost, so the projection stops at 1.5 ×.
        assert!((extrapolated(0.4, 250, 200) - 0.6).abs() < 1e-9);
    }

    fn id(n: u128) -> SessionId {
        SessionId(n)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_talkers_cost_enters_the_window_over_the_windows_length() {
        let t0 = Instant::now();
        let mut t = RecentTalkers::new(10);
        t.started_talking(t0, id(1), 0.01);
        // All of it still to come when it starts...
        assert!(close(t.pending(t0), 0.01));
        // ...a quarter of it shown after a quarter of the window...
        assert!(close(t.pending(t0 + ms(250)), 0.0075));
        // ...and all of it once the window spans its talking.
        assert!(close(t.pending(t0 + ms(1000)), 0.0));
        assert_eq!(t.len(), 0, "a talker older than the window is forgotten");
    }

    #[test]
    fn each_session_counts_once_from_its_latest_start_until_it_ends() {
        let t0 = Instant::now();
        let mut t = RecentTalkers::new(10);
        t.started_talking(t0, id(1), 0.05);
        t.started_talking(t0 + ms(500), id(2), 0.05);
        assert!(close(t.pending(t0 + ms(500)), 0.025 + 0.05));
        // A new owner of session 1 starts talking again: one entry, counted from then.
        t.started_talking(t0 + ms(500), id(1), 0.02);
        assert_eq!(t.len(), 2);
        assert!(close(t.pending(t0 + ms(500)), 0.05 + 0.02));
        // An ended session adds nothing more; an unknown one changes nothing.
        t.ended(id(2));
        t.ended(id(99));
        assert!(close(t.pending(t0 + ms(500)), 0.02));
    }

    #[test]
    fn recent_talkers_are_bounded_and_keep_the_newest() {
        let t0 = Instant::now();
        let mut t = RecentTalkers::new(3);
        for i in 0..10 {
            t.started_talking(t0 + ms(i), id(u128::from(i)), 1.0);
        }
        assert_eq!(t.len(), 3);
        // The newest three (2, 1 and 0 ms old at 9 ms) remain.
        assert!(close(t.pending(t0 + ms(9)), 3.0 - 0.003));
    }

    #[test]
    fn the_projection_adds_what_new_talkers_have_still_to_show() {
        let t0 = Instant::now();
        // Nobody started talking lately: the window as it is.
        let mut none = RecentTalkers::new(10);
        assert_eq!(projected(0.6, 100, 0, &mut none, t0), 0.6);
        // A burst onto an idle process: the window shows nearly nothing yet, but each session
        // whose backend talks counts at its encoder's cost at once. 150 talkers at 0.0064 of
        // the cores each pass 0.85 whatever the window says.
        let mut burst = RecentTalkers::new(1000);
        for i in 0..150 {
            burst.started_talking(t0, id(i), 0.0064);
        }
        // (150 young sessions on none settled: nothing to extrapolate from.)
        let p = projected(0.05, 150, 150, &mut burst, t0);
        assert!(close(p, 0.05 + 150.0 * 0.0064), "{p}");
        assert!(p > 0.85);
        // Half a window later half of that is in the window, and counted there instead.
        assert!(close(
            projected(0.5, 150, 150, &mut burst, t0 + ms(500)),
            0.5 + 75.0 * 0.0064
        ));
        // A steady ramp with nobody newly talking: the extrapolation, as it was.
        let mut quiet = RecentTalkers::new(10);
        assert!(close(projected(0.6, 100, 20, &mut quiet, t0), 0.75));
        // Both at once: the larger.
        let mut one = RecentTalkers::new(10);
        one.started_talking(t0, id(1), 0.2);
        assert!(close(projected(0.6, 100, 20, &mut one, t0), 0.8));
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
