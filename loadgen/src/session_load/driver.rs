//! The fleet thread's loop: one testkit `Fleet` drives every session; ready sessions join it
//! as signaling hands them over; once a second it samples progress; and it walks the phases
//! ramp → connect → settle → window → drain, reading the server's CPU and RSS, the packet
//! counters and the hand-off histogram at both ends of the window.

use std::io::Write as _;
use std::time::{Duration, Instant};

use voxgate_testkit::Fleet;

use super::config::{LoadConfig, WindowHooks};
use super::result::{LoadResult, ProgressSample, WindowDrops};
use super::signaling::{Arrivals, Outcome};
use crate::backend::Backend;
use crate::janus::JanusHandle;
use crate::proc_stat;
use crate::prom_hist;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Ramp,
    Connect,
    Settle,
    Window,
    Drain,
}

/// Per-session bookkeeping on the fleet thread.
pub struct Slot {
    pub fleet_index: usize,
    pub janus: Option<JanusHandle>,
    pub offer_time: Duration,
    pub post_started: Instant,
}

/// The clients' counters, summed over the sessions.
#[derive(Default, Clone, Copy)]
pub struct Totals {
    pub up: usize,
    pub sent: u64,
    pub received: u64,
    pub audio_sent: u64,
    pub audio_received: u64,
    pub audio_lost: u64,
    pub skipped: u64,
    pub send_errors: u64,
}

fn totals(fleet: &Fleet, slots: &[Slot]) -> Totals {
    let mut t = Totals::default();
    for s in slots {
        let c = fleet.session(s.fleet_index);
        let r = c.report();
        t.up += usize::from(r.connected);
        t.sent += r.datagrams_sent - r.send_errors;
        t.received += r.datagrams_received;
        t.audio_sent += r.audio_packets_sent;
        t.audio_received += r.audio_packets_received;
        t.audio_lost += r.audio_packets_lost;
        t.skipped += c.uplink_frames_skipped();
        t.send_errors += r.send_errors;
    }
    t
}

/// What is read at each end of the measurement window.
#[derive(Clone, Copy)]
pub struct Mark {
    pub at: Instant,
    pub totals: Totals,
    pub server_cpu: Option<Duration>,
    pub server_rss_kib: u64,
    pub own_cpu: Duration,
}

/// The state of the fleet thread through the phases.
pub struct Driver<'a> {
    cfg: &'a LoadConfig,
    t0: Instant,
    pub fleet: Fleet,
    pub backend: Option<Backend>,
    pub slots: Vec<Slot>,
    pub result: LoadResult,
    accepting: bool,
    outcomes: usize,
    phase: Phase,
    phase_end: Option<Instant>,
    pub ramp_end: Instant,
    next_tick: Instant,
    last: (Instant, Totals, u64),
    pub window_start: Option<Mark>,
    pub window_end: Option<Mark>,
    own_pid: u32,
    metrics: Option<(reqwest::blocking::Client, &'a str)>,
    handoff_start: Option<prom_hist::Histogram>,
    wakeups_start: Option<f64>,
    /// The drop counters when the window opened.
    drops_start: Option<DropCounts>,
    /// The server's cores and their steal time when the window opened.
    steal_start: Option<(Vec<usize>, Duration)>,
    ramp_cpu0: (Option<Duration>, Option<Duration>),
}

impl<'a> Driver<'a> {
    pub fn new(
        cfg: &'a LoadConfig,
        t0: Instant,
        fleet: Fleet,
        backend: Option<Backend>,
        result: LoadResult,
        ramp_start: Instant,
    ) -> Driver<'a> {
        let own_pid = std::process::id();
        let metrics = cfg
            .metrics_url
            .as_deref()
            .and_then(|url| Some((prom_hist::client()?, url)));
        let ramp_cpu0 = (
            cfg.server_pid.and_then(|p| proc_stat::cpu_time(p).ok()),
            proc_stat::cpu_time(own_pid).ok(),
        );
        Driver {
            cfg,
            t0,
            fleet,
            backend,
            slots: Vec::with_capacity(cfg.sessions),
            result,
            accepting: true,
            outcomes: 0,
            phase: Phase::Ramp,
            phase_end: None,
            ramp_end: ramp_start,
            next_tick: Instant::now() + Duration::from_secs(1),
            last: (Instant::now(), Totals::default(), 0u64),
            window_start: None,
            window_end: None,
            own_pid,
            metrics,
            handoff_start: None,
            wakeups_start: None,
            steal_start: None,
            drops_start: None,
            ramp_cpu0,
        }
    }

    /// Runs the phases to the end of the drain.
    pub fn run(&mut self, arrivals: &Arrivals) -> anyhow::Result<()> {
        loop {
            let mut wake = match self.phase_end {
                Some(e) => e.min(self.next_tick),
                None => self.next_tick,
            };
            if self.phase == Phase::Connect {
                // Notice the last session connecting within 100 ms, not at the next tick.
                wake = wake.min(Instant::now() + Duration::from_millis(100));
            }
            self.fleet
                .run_until(wake, |_| !arrivals.outcomes.is_empty());
            self.take_outcomes(arrivals)?;
            let now = Instant::now();
            if now >= self.next_tick {
                self.tick(now);
            }
            let all_in = self.outcomes >= self.cfg.sessions;
            if self.phase == Phase::Ramp && !all_in && now >= arrivals.ramp_deadline {
                arrivals.cut();
                self.accepting = false;
                self.result.ramp_truncated = true;
                tracing::warn!(
                    signaled = self.slots.len(),
                    requested = self.cfg.sessions,
                    "ramp deadline passed: measuring the sessions that are up"
                );
            }
            if self.advance(now, all_in, arrivals.ramp_start) {
                return Ok(());
            }
        }
    }

    /// Adds the sessions signaling finished to the fleet, counts the failures.
    fn take_outcomes(&mut self, arrivals: &Arrivals) -> anyhow::Result<()> {
        while let Ok(o) = arrivals.outcomes.try_recv() {
            self.outcomes += 1;
            match o {
                // Too late: the ramp was cut; the server times the session out by itself.
                Outcome::Ready(_) if !self.accepting => self.result.sessions_abandoned += 1,
                Outcome::Ready(r) => {
                    let r = *r;
                    let fi = self.fleet.add(r.session, r.socket, r.resource)?;
                    self.slots.push(Slot {
                        fleet_index: fi,
                        janus: r.janus,
                        offer_time: r.offer_time,
                        post_started: r.post_started,
                    });
                }
                Outcome::Failed { error } => {
                    self.result.signaling_errors += 1;
                    self.result.first_signaling_error.get_or_insert(error);
                }
            }
        }
        Ok(())
    }

    /// The once-a-second progress sample (and line, unless quiet).
    fn tick(&mut self, now: Instant) {
        self.next_tick += Duration::from_secs(1);
        let t = totals(&self.fleet, &self.slots);
        let frames = self.backend.as_ref().map_or(0, |b| b.frames());
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-6);
        let sample = ProgressSample {
            t: now.duration_since(self.t0).as_secs_f64(),
            up: t.up,
            tx_pps: (t.sent - self.last.1.sent) as f64 / dt,
            rx_pps: (t.received - self.last.1.received) as f64 / dt,
            backend_fps: (frames - self.last.2) as f64 / dt,
        };
        self.result.progress.push(sample);
        if self.cfg.progress {
            self.print_progress(&sample, &t);
        }
        self.last = (now, t, frames);
    }

    fn print_progress(&self, sample: &ProgressSample, t: &Totals) {
        let down_loss = if t.audio_received + t.audio_lost > 0 {
            100.0 * t.audio_lost as f64 / (t.audio_received + t.audio_lost) as f64
        } else {
            0.0
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{:6.1}s] {:<7} up {:>4}/{:<4} tx {:>7.0} pps  rx {:>7.0} pps  backend {:>7.0} fps  down-loss {:.2}%  errors {}   ",
            sample.t,
            format!("{:?}", self.phase).to_lowercase(),
            t.up,
            self.cfg.sessions,
            sample.tx_pps,
            sample.rx_pps,
            sample.backend_fps,
            down_loss,
            self.result.signaling_errors + self.backend.as_ref().map_or(0, |b| b.errors() as usize),
        );
        let _ = err.flush();
    }

    /// Moves to the next phase when this one is over; true at the end of the drain.
    fn advance(&mut self, now: Instant, all_in: bool, ramp_start: Instant) -> bool {
        let over = self.phase_end.is_some_and(|e| now >= e);
        match self.phase {
            Phase::Ramp if all_in || !self.accepting => {
                self.end_ramp(now, ramp_start);
                self.enter(Phase::Connect, now + self.cfg.connect_timeout);
            }
            Phase::Connect => {
                let settled = self.slots.iter().all(|s| {
                    let c = self.fleet.session(s.fleet_index);
                    c.is_connected() || c.is_closed()
                });
                if settled || over {
                    self.enter(Phase::Settle, now + self.cfg.settle);
                }
            }
            Phase::Settle if over => {
                self.open_window();
                self.enter(Phase::Window, now + self.cfg.hold);
            }
            Phase::Window if over => {
                self.close_window();
                self.enter(Phase::Drain, now + Duration::from_millis(500));
            }
            Phase::Drain if over => return true,
            _ => {}
        }
        false
    }

    fn enter(&mut self, phase: Phase, end: Instant) {
        self.phase = phase;
        self.phase_end = Some(end);
    }

    /// The cores the server and the load generator used during the ramp.
    fn end_ramp(&mut self, now: Instant, ramp_start: Instant) {
        self.ramp_end = now;
        let secs = now.duration_since(ramp_start).as_secs_f64().max(1e-3);
        let server = self
            .cfg
            .server_pid
            .and_then(|p| proc_stat::cpu_time(p).ok());
        if let (Some(a), Some(b)) = (self.ramp_cpu0.0, server) {
            self.result.server_cores_ramp = b.saturating_sub(a).as_secs_f64() / secs;
        }
        if let (Some(a), Ok(b)) = (self.ramp_cpu0.1, proc_stat::cpu_time(self.own_pid)) {
            self.result.loadgen_cores_ramp = b.saturating_sub(a).as_secs_f64() / secs;
        }
    }

    /// The hand-off histogram, the loops' wakeup count and the drop counters, from one scrape
    /// (the kernel's count read beside it).
    fn scrape_loop_metrics(
        &self,
    ) -> (
        Option<prom_hist::Histogram>,
        Option<f64>,
        Option<DropCounts>,
    ) {
        let Some(text) = self
            .metrics
            .as_ref()
            .and_then(|(http, url)| prom_hist::scrape_text(http, url))
        else {
            return (None, None, None);
        };
        let counter = |name| prom_hist::sum(&text, name).map(|v| v.max(0.0) as u64);
        let drops = DropCounts(WindowDrops {
            bridge_uplink: counter(prom_hist::UPLINK_DROPPED_METRIC),
            loop_datagrams: counter(prom_hist::LOOP_DROPPED_METRIC),
            send_errors: counter(prom_hist::SEND_ERRORS_METRIC),
            kernel_rcvbuf: proc_stat::udp_rcvbuf_errors().ok(),
        });
        (
            prom_hist::parse(&text, prom_hist::HANDOFF_METRIC),
            prom_hist::sum(&text, prom_hist::WAKEUPS_METRIC),
            Some(drops),
        )
    }

    /// The server's answer-time histogram over every offer so far (a fresh server per run).
    fn scrape_offer_answer(&self) -> Option<prom_hist::HandoffLatency> {
        let (http, url) = self.metrics.as_ref()?;
        let text = prom_hist::scrape_text(http, url)?;
        let h = prom_hist::parse_labeled(&text, prom_hist::OFFER_METRIC, "stage", "answer")?;
        Some(prom_hist::HandoffLatency::of(&h))
    }

    /// The server's CPU and RSS, our own CPU and the clients' counters, now.
    fn mark(&self, server_cpu: Option<Duration>, rss: u64, own_cpu: Duration) -> Mark {
        Mark {
            at: Instant::now(),
            totals: totals(&self.fleet, &self.slots),
            server_cpu,
            server_rss_kib: rss,
            own_cpu,
        }
    }

    fn read_usage(&self) -> (Option<Duration>, u64, Duration) {
        let cpu = self
            .cfg
            .server_pid
            .and_then(|p| proc_stat::cpu_time(p).ok());
        let rss = self
            .cfg
            .server_pid
            .and_then(|p| proc_stat::rss_kib(p).ok())
            .unwrap_or(0);
        let own = proc_stat::cpu_time(self.own_pid).unwrap_or_default();
        (cpu, rss, own)
    }

    fn open_window(&mut self) {
        if let Some(b) = &self.backend {
            b.set_recording(true);
        }
        let (cpu, rss, own) = self.read_usage();
        (self.handoff_start, self.wakeups_start, self.drops_start) = self.scrape_loop_metrics();
        self.steal_start = self.cfg.server_pid.and_then(|p| {
            let cores = proc_stat::allowed_cores(p)?;
            let steal = proc_stat::steal_time(&cores).ok()?;
            Some((cores, steal))
        });
        self.window_start = Some(self.mark(cpu, rss, own));
        WindowHooks::run(&self.cfg.window_hooks.open);
    }

    /// Reads the window's end, then stops the uplink so packets in flight land in the drain.
    fn close_window(&mut self) {
        let (cpu, rss, own) = self.read_usage();
        self.window_end = Some(self.mark(cpu, rss, own));
        WindowHooks::run(&self.cfg.window_hooks.close);
        let (handoff, wakeups, drops) = self.scrape_loop_metrics();
        if let (Some(a), Some(b)) = (&self.drops_start, drops) {
            self.result.window_drops = Some(b.since(a));
        }
        if let (Some(a), Some(b)) = (&self.handoff_start, handoff) {
            self.result.transceiver_handoff = Some(prom_hist::HandoffLatency::of(&b.since(a)));
        }
        if let (Some(a), Some(b)) = (self.wakeups_start, wakeups) {
            self.result.server_loop_wakeups_window = Some((b - a).max(0.0) as u64);
        }
        if let (Some((cores, a)), Some(start), Some(end)) =
            (&self.steal_start, &self.window_start, &self.window_end)
        {
            if let Ok(b) = proc_stat::steal_time(cores) {
                let secs = end.at.duration_since(start.at).as_secs_f64();
                let core_secs = secs * cores.len() as f64;
                self.result.server_steal_fraction =
                    Some(b.saturating_sub(*a).as_secs_f64() / core_secs.max(1e-3));
            }
        }
        self.result.server_offer_answer = self.scrape_offer_answer();
        if let Some(b) = &self.backend {
            b.set_recording(false);
        }
        for s in &self.slots {
            self.fleet.session_mut(s.fleet_index).stop_audio();
        }
    }
}

/// Drop counters as read at one moment (totals since the server started, and the kernel's
/// since boot).
struct DropCounts(WindowDrops);

impl DropCounts {
    /// What was dropped between `start` and this reading; a counter missing from either is
    /// `None`.
    fn since(&self, start: &DropCounts) -> WindowDrops {
        let d = |b: Option<u64>, a: Option<u64>| Some(b?.saturating_sub(a?));
        let (a, b) = (&start.0, &self.0);
        WindowDrops {
            bridge_uplink: d(b.bridge_uplink, a.bridge_uplink),
            loop_datagrams: d(b.loop_datagrams, a.loop_datagrams),
            send_errors: d(b.send_errors, a.send_errors),
            kernel_rcvbuf: d(b.kernel_rcvbuf, a.kernel_rcvbuf),
        }
    }
}
