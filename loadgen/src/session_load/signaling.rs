//! How sessions arrive and get signaled: a scheduler thread releases session indexes at
//! seeded Poisson times; signaling threads bind a socket, build the offer, signal it
//! (voxgate POST, or Janus create/attach/message) and hand the ready session to the fleet
//! thread, ringing its doorbell so its poll wakes.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use crossbeam_channel::{Receiver, Sender};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use voxgate_testkit::{ClientSession, SessionConfig, SessionResource, SignalingClient};

use super::config::{LoadConfig, Target};
use crate::janus::{JanusClient, JanusHandle};

struct Job {
    index: usize,
}

/// A signaled session, ready for the fleet.
pub struct Ready {
    pub session: ClientSession,
    pub socket: UdpSocket,
    pub resource: Option<SessionResource>,
    pub janus: Option<JanusHandle>,
    /// From the session's clock origin to the start of signaling.
    pub offer_time: Duration,
    pub post_started: Instant,
}

pub enum Outcome {
    Ready(Box<Ready>),
    Failed { error: String },
}

/// Distinct uplink tones (200, 250, ... Hz).
pub const UPLINK_TONES: u16 = 16;
/// Peak of every client's uplink tone (full scale 1.0).
pub const UPLINK_AMPLITUDE: f32 = 0.3;

/// Uplink tone `k` (`0..UPLINK_TONES`), in Hz.
pub fn uplink_tone_hz(k: u16) -> f32 {
    f32::from(200 + 50 * (k % UPLINK_TONES))
}

/// The configuration of client session `index`: a per-session tone and loss seed derived from
/// the run seed, cheap media (pre-encoded uplink, downlink counted not decoded).
pub fn session_config(cfg: &LoadConfig, index: usize) -> SessionConfig {
    let mut rng =
        StdRng::seed_from_u64(cfg.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let (base_url, token) = match &cfg.target {
        Target::Voxgate { url, token } => (url.clone(), token.clone()),
        Target::Janus { url } => (url.clone(), None),
    };
    SessionConfig {
        base_url,
        token,
        query: Some(format!("loadgen_index={index}")),
        bind_ip: cfg.bind_ip,
        // Integer frequencies loop the one-second pre-encoded uplink without a phase jump.
        // Few of them, so the process encodes each loop once (`UplinkAudio::looped` keeps
        // them): with a tone per session, encoding took a large share of the generator's core
        // at 100 arrivals/s, and its late audio then reached the server in bursts
        // (docs/SESSION_COST.md, "Setting up a session, continued", item 2).
        tone_hz: uplink_tone_hz(rng.random_range(0u16..UPLINK_TONES)),
        amplitude: UPLINK_AMPLITUDE,
        send_for: if cfg.audio {
            Duration::MAX
        } else {
            Duration::ZERO
        },
        data_channel: cfg.data_channel,
        uplink_loss: cfg.uplink_loss,
        seed: rng.random(),
        precoded_uplink: true,
        decode_downlink: false,
        keep_pcm: Duration::ZERO,
        keep_arrivals: 0,
        keep_messages: 0,
        ..SessionConfig::default()
    }
}

/// Arrival offsets of `n` sessions at `rate` per second: a Poisson process from `seed`.
pub fn arrival_offsets(n: usize, rate: f64, seed: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0f64;
    (0..n)
        .map(|_| {
            let at = t;
            // Exponential inter-arrival: -ln(U)/rate, U in (0, 1].
            let u: f64 = 1.0 - rng.random::<f64>();
            t += -u.ln() / rate.max(1e-9);
            Duration::from_secs_f64(at)
        })
        .collect()
}

fn signaling_thread(
    cfg: LoadConfig,
    jobs: Receiver<Job>,
    out: Sender<Outcome>,
    doorbell: SocketAddr,
) {
    let bell = UdpSocket::bind(SocketAddr::new(cfg.bind_ip, 0)).ok();
    let voxgate = SignalingClient::new().ok();
    let mut janus = match &cfg.target {
        Target::Janus { url } => JanusClient::new(url).ok(),
        Target::Voxgate { .. } => None,
    };
    for job in jobs.iter() {
        let outcome = match open_one(&cfg, job.index, voxgate.as_ref(), janus.as_mut()) {
            Ok(r) => Outcome::Ready(Box::new(r)),
            Err(e) => Outcome::Failed {
                error: format!("{e:#}"),
            },
        };
        if out.send(outcome).is_err() {
            return;
        }
        if let Some(b) = &bell {
            let _ = b.send_to(&[0], doorbell);
        }
    }
}

fn open_one(
    cfg: &LoadConfig,
    index: usize,
    voxgate: Option<&SignalingClient>,
    janus: Option<&mut JanusClient>,
) -> anyhow::Result<Ready> {
    let scfg = session_config(cfg, index);
    let started = Instant::now();
    let socket = UdpSocket::bind(SocketAddr::new(scfg.bind_ip, 0)).context("bind")?;
    let local = socket.local_addr()?;
    let (mut session, offer) = ClientSession::new(&scfg, local, started)?;
    let post_started = Instant::now();
    let offer_time = post_started - started;
    match &cfg.target {
        Target::Voxgate { .. } => {
            let http = voxgate.context("no signaling client")?;
            let created = http.create_session(
                &scfg.base_url,
                scfg.token.as_deref(),
                scfg.query.as_deref(),
                &offer,
            )?;
            session.accept_created(Instant::now(), &created)?;
            Ok(Ready {
                session,
                socket,
                resource: Some(SessionResource {
                    url: created.resource_url,
                    token: scfg.token,
                    resume_credential: created.resume_credential,
                }),
                janus: None,
                offer_time,
                post_started,
            })
        }
        Target::Janus { .. } => {
            let j = janus.context("no janus client")?;
            let (handle, answer) = j.negotiate(&offer, cfg.connect_timeout)?;
            session.accept_answer(Instant::now(), &answer)?;
            Ok(Ready {
                session,
                socket,
                resource: None,
                janus: Some(handle),
                offer_time,
                post_started,
            })
        }
    }
}

/// The arrival side of a run: the scheduler, the signaling threads, and what they hand over.
pub struct Arrivals {
    /// Signaling outcomes, one per released session.
    pub outcomes: Receiver<Outcome>,
    stop: Arc<AtomicBool>,
    scheduler: JoinHandle<()>,
    threads: Vec<JoinHandle<()>>,
    pub ramp_start: Instant,
    /// An overloaded server answers slowly or not at all; the ramp gives up at this deadline
    /// and the run measures the sessions it has (the result says so).
    pub ramp_deadline: Instant,
}

impl Arrivals {
    /// Starts the signaling threads and the scheduler; `doorbell` is the fleet's wake-up
    /// address.
    pub fn start(cfg: &LoadConfig, doorbell: SocketAddr) -> anyhow::Result<Arrivals> {
        let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
        let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outcome>();
        let mut threads = Vec::new();
        for i in 0..cfg.signaling_threads.max(1) {
            let (cfg, jobs, out) = (cfg.clone(), job_rx.clone(), out_tx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("signal-{i}"))
                    .spawn(move || signaling_thread(cfg, jobs, out, doorbell))?,
            );
        }
        drop(out_tx);
        drop(job_rx);
        let offsets = arrival_offsets(cfg.sessions, cfg.rate, cfg.seed);
        let ramp_start = Instant::now();
        let ramp_deadline = ramp_start
            + offsets.last().copied().unwrap_or_default().mul_f64(1.5)
            + Duration::from_secs(10);
        let stop = Arc::new(AtomicBool::new(false));
        let scheduler = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("arrivals".into())
                .spawn(move || {
                    for (index, off) in offsets.into_iter().enumerate() {
                        let at = ramp_start + off;
                        let now = Instant::now();
                        if at > now {
                            std::thread::sleep(at - now);
                        }
                        if stop.load(Ordering::Relaxed) || job_tx.send(Job { index }).is_err() {
                            return;
                        }
                    }
                })?
        };
        Ok(Arrivals {
            outcomes: out_rx,
            stop,
            scheduler,
            threads,
            ramp_start,
            ramp_deadline,
        })
    }

    /// Releases no more sessions.
    pub fn cut(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the scheduler and waits for the signaling threads, unless the ramp was cut:
    /// threads stuck on an overloaded server are then left to finish on their own (their
    /// results are discarded).
    pub fn finish(self, ramp_truncated: bool) {
        self.cut();
        let _ = self.scheduler.join();
        drop(self.outcomes);
        if !ramp_truncated {
            for t in self.threads {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::session_load::signaling::*;

    fn cfg() -> LoadConfig {
        LoadConfig {
            target: Target::Voxgate {
                url: "http://127.0.0.1:1".into(),
                token: None,
            },
            sessions: 10,
            rate: 50.0,
            hold: Duration::from_secs(1),
            settle: Duration::ZERO,
            connect_timeout: Duration::from_secs(1),
            audio: true,
            data_channel: false,
            uplink_loss: 0.0,
            seed: 42,
            signaling_threads: 1,
            server_pid: None,
            backend: None,
            progress: false,
            bind_ip: "127.0.0.1".parse().unwrap(),
            teardown: false,
            metrics_url: None,
            window_hooks: Default::default(),
        }
    }

    #[test]
    fn arrivals_are_deterministic_and_at_the_asked_rate() {
        let a = arrival_offsets(2000, 100.0, 7);
        assert_eq!(a, arrival_offsets(2000, 100.0, 7));
        assert_ne!(a, arrival_offsets(2000, 100.0, 8));
        assert_eq!(a[0], Duration::ZERO);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let span = a.last().unwrap().as_secs_f64();
        // 1999 gaps of mean 10 ms: within a few percent of 20 s.
        assert!((span - 19.99).abs() < 1.5, "span {span}");
    }

    #[test]
    fn session_configs_follow_the_seed() {
        let c = cfg();
        let (a, b) = (session_config(&c, 3), session_config(&c, 3));
        assert_eq!((a.tone_hz, a.seed), (b.tone_hz, b.seed));
        assert_ne!(session_config(&c, 4).seed, a.seed);
        assert!(a.precoded_uplink && !a.decode_downlink);
        assert_eq!(a.tone_hz.fract(), 0.0);
    }
}
