//! End to end through real processes: a `transceiver`, the `echo-bot` subscribed to its gRPC
//! bridge, and a simulated WebRTC caller (voxgate-testkit) that speaks tone bursts.
//!
//! The transceiver binary is the one next to `echo-bot`, built (or found up to date) by cargo
//! on first use.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use voxgate_testkit::{signal, Fleet, SessionConfig};

const TOKEN: &str = "e2e-grpc-token";

/// A child process stopped with SIGTERM (then SIGKILL) on drop, its output in a log file.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(cmd: &mut Command, log: PathBuf) -> Proc {
        let out = File::create(&log).expect("log file");
        let child = cmd
            .stdout(out.try_clone().expect("dup log"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn");
        Proc { child, log }
    }

    fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.output().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// SIGTERM, then how long the process took to exit and whether it exited successfully.
    fn terminate(&mut self, timeout: Duration) -> Option<(Duration, bool)> {
        let t = Instant::now();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc_kill(self.child.id() as i32, 15) };
        while t.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some((t.elapsed(), status.success()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.terminate(Duration::from_secs(3));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

const SIGCONT: i32 = 18;
const SIGSTOP: i32 = 19;

impl Proc {
    /// Sends `sig` to the child (SIGSTOP freezes it: its sockets stay open, nothing is read,
    /// nothing is answered, no FIN is sent).
    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc_kill(self.child.id() as i32, sig) };
    }
}

// Below the ephemeral range and claimed across test processes: see voxgate_testkit::ports.
use voxgate_testkit::ports::{free_tcp_port, free_udp_and_tcp_port as free_udp_port};
use voxgate_testkit::reset_proxy::ResetProxy;

/// The `transceiver` binary next to `echo-bot`, brought up to date by cargo once per test
/// process, so the test never runs a stale transceiver. It is the very build `scripts/test`
/// runs first (`cargo build --workspace --bins`), hence a no-op there; building only this
/// package would unify features differently and recompile half the dependency tree inside the
/// test's time limit.
fn transceiver_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let bot = Path::new(env!("CARGO_BIN_EXE_echo-bot"));
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-q", "--workspace", "--bins"])
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if bot.parent().and_then(Path::file_name) == Some("release".as_ref()) {
                cmd.arg("--release");
            }
            let ok = cmd.status().expect("run cargo build");
            assert!(ok.success(), "building the transceiver failed");
            bot.with_file_name("transceiver")
        })
        .clone()
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let req = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let mut answer = String::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

/// The body of `GET {base_url}{path}`.
fn http_get(base_url: &str, path: &str) -> String {
    let host = base_url.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect");
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send request");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "GET {path}: {answer}");
    answer
}

/// The sum of every sample of metric `name` (all label sets) in a Prometheus exposition.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with([' ', '{']))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// 20 ms frames (48 kHz) of `pcm` louder than -30 dBFS.
fn loud_frames(pcm: &[i16]) -> usize {
    pcm.chunks_exact(signal::FRAME_SAMPLES)
        .filter(|f| voxgate_echo_bot::level_dbfs(f) > -30.0)
        .count()
}

struct Transceiver {
    proc: Proc,
    grpc: String,
    base_url: String,
}

fn start_transceiver(tag: &str) -> Transceiver {
    start_transceiver_with(tag, &[])
}

fn start_transceiver_with(tag: &str, extra_args: &[&str]) -> Transceiver {
    start_transceiver_on(tag, free_tcp_port(), extra_args)
}

/// A transceiver whose gRPC listener is on `grpc_port` (a bot's address for it).
fn start_transceiver_on(tag: &str, grpc_port: u16, extra_args: &[&str]) -> Transceiver {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (signal_port, media_port) = (free_tcp_port(), free_udp_port());
    let proc = Proc::spawn(
        Command::new(transceiver_bin())
            .args(["--signal-listen", &format!("127.0.0.1:{signal_port}")])
            .args(["--media-listen", &format!("127.0.0.1:{media_port}")])
            .args(["--grpc-listen", &format!("127.0.0.1:{grpc_port}")])
            .args(["--loops", "1", "--no-pin"])
            .args(extra_args)
            .env("VOXGATE_GRPC_TOKEN", TOKEN)
            // Stopped with SIGTERM on drop: exit at once rather than drain.
            .env("VOXGATE_DRAIN_TIMEOUT_SECS", "0")
            .env("RUST_LOG", "info"),
        dir.join(format!("echo-e2e-{tag}-transceiver.log")),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !healthy(signal_port) {
        assert!(
            Instant::now() < deadline,
            "transceiver not healthy:\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Transceiver {
        proc,
        grpc: format!("127.0.0.1:{grpc_port}"),
        base_url: format!("http://127.0.0.1:{signal_port}"),
    }
}

/// An echo bot registered (as `worker_id`) with `t`.
fn start_bot(t: &Transceiver, worker_id: &str, capacity: u32) -> Proc {
    let bot = spawn_bot(t, worker_id, capacity);
    assert!(
        bot.wait_for_log("registered", Duration::from_secs(10)),
        "echo-bot did not register:\n{}",
        bot.output()
    );
    bot
}

/// An echo bot started for `t`, not yet registered.
fn spawn_bot(t: &Transceiver, worker_id: &str, capacity: u32) -> Proc {
    spawn_bot_for(&[t], worker_id, capacity)
}

/// An echo bot subscribed to every transceiver of `ts`, its `capacity` shared by all of them.
fn spawn_bot_for(ts: &[&Transceiver], worker_id: &str, capacity: u32) -> Proc {
    let transceivers: Vec<&str> = ts.iter().map(|t| t.grpc.as_str()).collect();
    spawn_bot_at(&transceivers, worker_id, capacity)
}

/// An echo bot subscribed to the gRPC addresses `transceivers`.
fn spawn_bot_at(transceivers: &[&str], worker_id: &str, capacity: u32) -> Proc {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_echo-bot"))
            .args(["--transceiver", &transceivers.join(",")])
            .args(["--worker-id", worker_id])
            .args(["--capacity", &capacity.to_string()])
            .args(["--silence-ms", "400"])
            .env("VOXGATE_ECHO_TOKEN", TOKEN)
            .env("RUST_LOG", "info"),
        dir.join(format!("echo-e2e-{worker_id}-bot.log")),
    )
}

fn caller(base_url: &str, tone_hz: f32, send_for: Duration) -> SessionConfig {
    SessionConfig {
        base_url: base_url.to_owned(),
        tone_hz,
        amplitude: 0.3,
        send_for,
        ..SessionConfig::default()
    }
}

/// Opens a caller sending `tone_hz` for 1 s and waits for its media and data channel.
fn open_connected(fleet: &mut Fleet, base_url: &str, tone_hz: f32) -> usize {
    let i = fleet
        .open(caller(base_url, tone_hz, Duration::from_secs(1)))
        .expect("open session");
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(10), |f| {
        f.session(i).is_connected() && f.session(i).channel_open()
    });
    assert!(connected, "session did not connect");
    i
}

/// Waits up to `within` for caller `i` to hear its 1 s tone of `tone_hz` back (`frames` loud
/// frames of it) and the bot's echo of `text`.
fn expect_echo(
    fleet: &mut Fleet,
    i: usize,
    bot: &Proc,
    (tone_hz, frames): (f32, std::ops::RangeInclusive<usize>),
    text: &str,
    within: Duration,
) {
    let heard = fleet.run_until(Instant::now() + within, |f| {
        loud_frames(f.session(i).received_pcm()) >= 50
            && !f.session(i).channel_messages().is_empty()
    });
    fleet.run_for(Duration::from_millis(500));
    let pcm = fleet.session(i).received_pcm().to_vec();
    let messages = fleet.session(i).channel_messages().to_vec();
    assert!(
        heard,
        "no whole echo: {} loud frames, messages {messages:?}\nbot:\n{}",
        loud_frames(&pcm),
        bot.output()
    );
    let loud = loud_frames(&pcm);
    assert!(
        frames.contains(&loud),
        "reply of {loud} frames, not {frames:?}"
    );
    let hz = signal::dominant_frequency(&pcm, signal::SAMPLE_RATE);
    assert!((hz - tone_hz).abs() < 5.0, "reply at {hz} Hz");
    let echo: serde_json::Value = serde_json::from_str(&messages[0]).expect("JSON echo");
    assert_eq!(echo, serde_json::json!({"type": "echo", "text": text}));
}

#[test]
fn tone_burst_comes_back_and_text_is_echoed() {
    let t = start_transceiver("echo");
    let mut bot = start_bot(&t, "e2e-echo", 100);
    let mut fleet = Fleet::new().expect("fleet");
    let i = open_connected(&mut fleet, &t.base_url, 700.0);
    fleet.send_channel_text(i, "hello bot").expect("send text");
    // 1 s of tone, the 400 ms silence window, then 1 s of reply.
    let within = Duration::from_secs(6);
    expect_echo(&mut fleet, i, &bot, (700.0, 45..=56), "hello bot", within);
    // The call rode on the bot's one `Multiplex` stream, not on a stream of its own.
    let metrics = http_get(&t.base_url, "/metrics");
    assert_eq!(
        metric_sum(&metrics, "voxgate_multiplex_streams"),
        1.0,
        "{metrics}"
    );
    let carried = metric_sum(&metrics, "voxgate_multiplex_uplink_messages_total");
    assert!(carried >= 20.0, "{carried}: {metrics}");
    assert!(bot.output().contains("multiplex stream open"));

    fleet.delete(i).expect("delete");
    assert!(
        bot.wait_for_log("session ended", Duration::from_secs(5)),
        "bot did not see the end:\n{}",
        bot.output()
    );
    let log = bot.output();
    assert!(log.contains("session attached") && log.contains("utterance played"));
    let (took, ok) = bot
        .terminate(Duration::from_secs(6))
        .expect("bot exits on SIGTERM");
    assert!(ok, "bot exit status after SIGTERM");
    assert!(took < Duration::from_secs(3), "bot took {took:?} to exit");
    drop(t);
}

/// The caller talks, and its app sends a message, before any backend is there to take the
/// session: the transceiver holds both and the bot, attaching later, hears the whole utterance
/// and gets the message. Before the hold, what came before the attach was dropped, which is
/// also how `tone_burst_comes_back_and_text_is_echoed` once failed on a busy machine (48 loud
/// frames of 50 and no echoed text: the attach came after the first packet and the message).
#[test]
fn what_the_caller_says_before_any_bot_is_there_is_heard_whole() {
    let t = start_transceiver("early");
    let mut fleet = Fleet::new().expect("fleet");
    let i = open_connected(&mut fleet, &t.base_url, 600.0);
    fleet.send_channel_text(i, "said early").expect("send text");
    // Half the tone and the message reach the transceiver while no backend exists.
    fleet.run_for(Duration::from_millis(500));
    let bot = spawn_bot(&t, "e2e-early", 100);
    let within = Duration::from_secs(10);
    expect_echo(&mut fleet, i, &bot, (600.0, 50..=52), "said early", within);
    let metrics = http_get(&t.base_url, "/metrics");
    let held = metric_sum(&metrics, "voxgate_bridge_uplink_held_total");
    assert!(
        held >= 20.0,
        "held {held} items, expected about 25 packets and a message"
    );
    assert_eq!(
        metric_sum(&metrics, "voxgate_bridge_uplink_held_dropped_total"),
        0.0
    );
    drop(bot);
    drop(t);
}

#[test]
fn talking_over_the_reply_cuts_it() {
    let t = start_transceiver("barge");
    let bot = start_bot(&t, "e2e-barge", 100);
    let mut fleet = Fleet::new().expect("fleet");
    let i = fleet
        .open(caller(&t.base_url, 500.0, Duration::from_secs(2)))
        .expect("open session");
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(i)
            .is_connected())
    );
    // Wait for the 2 s reply to be 0.5 s in, then talk for 0.4 s.
    let replying = fleet.run_until(Instant::now() + Duration::from_secs(6), |f| {
        loud_frames(f.session(i).received_pcm()) >= 25
    });
    assert!(replying, "no reply:\n{}", bot.output());
    fleet
        .session_mut(i)
        .start_audio(Instant::now(), Duration::from_millis(400));
    // The cut reply, then the 0.4 s utterance played back.
    fleet.run_for(Duration::from_secs(4));
    let loud = loud_frames(fleet.session(i).received_pcm());
    let log = bot.output();
    assert!(log.contains("barge-in: clear sent"), "no clear:\n{log}");
    assert!(
        log.contains("barge-in: reply cut"),
        "no Cleared answer:\n{log}"
    );
    // 2 s uncut + 0.4 s would be 120 frames; cut after ~0.5-0.7 s it is ~50.
    assert!((35..=80).contains(&loud), "{loud} loud frames heard\n{log}");
    assert_eq!(log.matches("utterance played").count(), 2, "{log}");
    fleet.delete(i).expect("delete");
}

/// One caller, connected and attached to `bot` (the only bot registered so far).
fn call_attached_to(t: &Transceiver, bot: &Proc) -> (Fleet, usize) {
    call_attached_to_nth(t, bot, 1)
}

/// As [`call_attached_to`], for the bot's `nth` attached session.
fn call_attached_to_nth(t: &Transceiver, bot: &Proc, nth: usize) -> (Fleet, usize) {
    let mut fleet = Fleet::new().expect("fleet");
    let i = fleet
        .open(caller(&t.base_url, 600.0, Duration::ZERO))
        .expect("open session");
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(i)
            .is_connected())
    );
    assert!(
        wait_until(Duration::from_secs(5), || bot
            .output()
            .matches("session attached")
            .count()
            >= nth),
        "{}",
        bot.output()
    );
    (fleet, i)
}

/// Caller `i`, still connected, talks for a second and hears `bot` echo it; then hangs up.
fn talks_and_hears(fleet: &mut Fleet, i: usize, bot: &Proc) {
    assert!(fleet.session(i).is_connected());
    fleet
        .session_mut(i)
        .start_audio(Instant::now(), Duration::from_secs(1));
    let heard = fleet.run_until(Instant::now() + Duration::from_secs(5), |f| {
        loud_frames(f.session(i).received_pcm()) >= 45
    });
    assert!(heard, "no reply from the bot:\n{}", bot.output());
    fleet.delete(i).expect("delete");
}

/// The transceiver dies under a call: the session on the bot's `Multiplex` stream ends
/// with the stream and gives its slot back, and once a transceiver is back at that address the
/// bot subscribes again and takes new calls on a new stream.
#[test]
fn a_call_ends_with_its_stream_and_the_bot_serves_the_next_transceiver_on_a_new_one() {
    let grpc_port = free_tcp_port();
    let t = start_transceiver_on("restart-1", grpc_port, &[]);
    // Capacity 1: the second call is served only if the first one's slot came back.
    let bot = start_bot(&t, "e2e-restart", 1);
    let (fleet, i) = call_attached_to(&t, &bot);
    assert!(fleet.session(i).is_connected());
    // Killed, not stopped: a graceful stop would end the session (ENDED) before the stream.
    t.proc.signal(9);
    assert!(
        bot.wait_for_log("multiplex stream broke", Duration::from_secs(10)),
        "{}",
        bot.output()
    );
    drop(fleet);
    drop(t);

    let t = start_transceiver_on("restart-2", grpc_port, &[]);
    let registered_again = wait_until(Duration::from_secs(20), || {
        bot.output().matches("registered").count() >= 2
    });
    assert!(registered_again, "{}", bot.output());
    let (mut fleet, i) = call_attached_to_nth(&t, &bot, 2);
    talks_and_hears(&mut fleet, i, &bot);
    let log = bot.output();
    assert_eq!(log.matches("multiplex stream open").count(), 2, "{log}");
}

/// An HTTP/2 proxy between the bot and the transceiver resets the bot's `Multiplex` stream
/// while its `Work` stream lives, as an L7 proxy that times long streams out does. The
/// transceiver hears of it first (the proxy tells the bot 2 s later, a window no busy machine
/// misses): it releases the stream's channels and offers the caller again at once, on the same
/// subscription, while the bot still believes in its stream and sends the attach into it.
/// When the bot hears of the
/// break, it declines that unanswered offer, so the caller is offered again at once and
/// attached on a new `Multiplex` stream; with the attach timeout at 30 s, a caller left to
/// wait it out fails the test. The caller, connected throughout, then hears the bot.
#[test]
fn a_multiplex_stream_reset_under_a_call_moves_the_caller_to_a_new_stream_on_the_same_subscription()
{
    let t = start_transceiver_with("mux-reset", &["--attach-timeout-secs", "30"]);
    let proxy = ResetProxy::start(
        t.grpc.parse().expect("gRPC address"),
        "/Multiplex",
        Duration::from_secs(2),
    );
    let through_proxy = proxy.addr.to_string();
    // Two slots: the bot takes the new offer while the broken session still holds its slot.
    let bot = spawn_bot_at(&[&through_proxy], "e2e-mux-reset", 2);
    assert!(
        bot.wait_for_log("registered", Duration::from_secs(10)),
        "echo-bot did not register through the proxy:\n{}",
        bot.output()
    );
    let (mut fleet, i) = call_attached_to(&t, &bot);

    proxy.reset_streams();
    let attached_again = fleet.run_until(Instant::now() + Duration::from_secs(10), |_| {
        bot.output().matches("session attached").count() >= 2
    });
    let log = bot.output();
    assert!(
        attached_again,
        "bot:\n{log}\ntransceiver:\n{}",
        t.proc.output()
    );
    assert_eq!(proxy.resets(), 1, "one Multiplex stream was open");
    assert!(
        log.contains("multiplex stream broke before the attach was answered: declining"),
        "the offer made during the break was declined: {log}"
    );
    assert!(log.contains("session attached attempt=3"), "{log}");
    talks_and_hears(&mut fleet, i, &bot);

    let log = bot.output();
    assert_eq!(log.matches("multiplex stream open").count(), 2, "{log}");
    assert_eq!(
        log.matches("registered").count(),
        1,
        "the Work stream lived through the reset: {log}"
    );
    assert!(
        t.proc
            .output()
            .contains("multiplex stream ended: its channels are released"),
        "{}",
        t.proc.output()
    );
}

/// The bot's slots are shared by every transceiver it serves, and each transceiver learns of
/// the others' sessions only from the bot's load reports. With the bot frozen, two
/// transceivers each offer it a caller while it has one slot: on waking it takes one and
/// declines the other (`at_capacity`), reporting its load first, so that transceiver queues
/// the caller instead of offering it straight back. When the first call ends, the slot comes
/// back and the queued caller is offered again (attempt 2) and served.
#[test]
fn a_dispatch_past_capacity_is_declined_and_the_caller_is_served_when_a_slot_frees() {
    // Offers must outlast the freeze on a busy machine.
    let slow_attach = ["--attach-timeout-secs", "30"];
    let ts = [
        start_transceiver_with("capacity-a", &slow_attach),
        start_transceiver_with("capacity-b", &slow_attach),
    ];
    let bot = spawn_bot_for(&[&ts[0], &ts[1]], "e2e-capacity", 1);
    let both_registered = wait_until(Duration::from_secs(10), || {
        bot.output().matches("registered").count() >= 2
    });
    assert!(both_registered, "{}", bot.output());

    bot.signal(SIGSTOP);
    let mut fleet = Fleet::new().expect("fleet");
    let callers: Vec<usize> = ts
        .iter()
        .map(|t| {
            fleet
                .open(caller(&t.base_url, 600.0, Duration::ZERO))
                .expect("open session")
        })
        .collect();
    let connected = fleet.run_until(Instant::now() + Duration::from_secs(10), |f| {
        callers.iter().all(|&i| f.session(i).is_connected())
    });
    let dispatched = |t: &Transceiver| {
        metric_sum(
            &http_get(&t.base_url, "/metrics"),
            "voxgate_dispatches_total",
        ) >= 1.0
    };
    let both_offered = wait_until(Duration::from_secs(10), || ts.iter().all(dispatched));
    bot.signal(SIGCONT);
    assert!(connected && both_offered, "{}", bot.output());

    let one_each = wait_until(Duration::from_secs(10), || {
        let log = bot.output();
        log.contains("session attached") && log.contains("at capacity: rejecting dispatch")
    });
    assert!(one_each, "bot:\n{}", bot.output());
    // Which transceiver's offer the bot read first is up to the scheduler.
    let declined = ts
        .iter()
        .position(|t| t.proc.output().contains("worker declined session"))
        .expect("a transceiver heard the decline");
    let served = 1 - declined;
    // The decline came after the load report: the caller waits in the queue, not re-offered.
    fleet.run_for(Duration::from_millis(500));
    let log = bot.output();
    assert_eq!(
        log.matches("at capacity: rejecting dispatch").count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("session attached").count(), 1, "{log}");

    talks_and_hears(&mut fleet, callers[served], &bot);
    expect_second_attempt(&mut fleet, &bot, &ts[declined]);
    talks_and_hears(&mut fleet, callers[declined], &bot);
    let log = bot.output();
    assert_eq!(
        log.matches("at capacity: rejecting dispatch").count(),
        1,
        "{log}"
    );
}

/// Waits up to 10 s for `bot` to attach a session on its second dispatch (offered by `t`).
fn expect_second_attempt(fleet: &mut Fleet, bot: &Proc, t: &Transceiver) {
    let attached = fleet.run_until(Instant::now() + Duration::from_secs(10), |_| {
        bot.output().contains("session attached attempt=2")
    });
    assert!(
        attached,
        "bot:\n{}\ntransceiver:\n{}",
        bot.output(),
        t.proc.output()
    );
}

fn wait_until(timeout: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ok()
}

#[test]
fn sigterm_hands_the_caller_to_another_bot() {
    let t = start_transceiver("handoff");
    let mut first = start_bot(&t, "e2e-handoff-a", 1);
    let (mut fleet, i) = call_attached_to(&t, &first);
    let second = start_bot(&t, "e2e-handoff-b", 1);
    let (took, ok) = first
        .terminate(Duration::from_secs(6))
        .expect("first bot exits on SIGTERM");
    assert!(
        ok && took < Duration::from_secs(3),
        "exit {ok} after {took:?}"
    );
    expect_second_attempt(&mut fleet, &second, &t);
    // The caller, still connected, talks to the new bot.
    talks_and_hears(&mut fleet, i, &second);
}

/// Issue 11: a backend frozen without a FIN (SIGSTOP: its TCP connection stays open, its
/// kernel still ACKs, nothing above it answers) is found dead by the gRPC server's HTTP/2
/// keepalive (1 s interval + 1 s timeout here), and its caller is re-dispatched to a live bot
/// and hears it. The uplink-stall detector is set far out (120 s) so keepalive alone must act.
#[test]
fn a_bot_frozen_with_sigstop_is_found_by_keepalive_and_its_caller_moves() {
    let t = start_transceiver_with(
        "sigstop",
        &[
            "--grpc-keepalive-secs",
            "1",
            "--grpc-keepalive-timeout-secs",
            "1",
            "--backend-stall-secs",
            "120",
        ],
    );
    let frozen = start_bot(&t, "e2e-frozen-a", 1);
    let (mut fleet, i) = call_attached_to(&t, &frozen);
    let live = start_bot(&t, "e2e-frozen-b", 1);
    frozen.signal(SIGSTOP);
    let stopped_at = Instant::now();
    // Keepalive bounds the detection at about 2 s; 20 s leaves room for a busy machine.
    let moved = fleet.run_until(Instant::now() + Duration::from_secs(20), |_| {
        live.output().contains("session attached attempt=2")
    });
    let took = stopped_at.elapsed();
    frozen.signal(SIGCONT);
    assert!(
        moved,
        "live bot:\n{}\ntransceiver:\n{}",
        live.output(),
        t.proc.output()
    );
    println!("re-dispatched {took:?} after SIGSTOP");
    // The caller, still connected, talks to the live bot and hears it.
    talks_and_hears(&mut fleet, i, &live);
}

/// Issue 4's browser check: headless Chromium speaks (espeak-ng speech through its fake
/// microphone), the echo bot answers, and the browser's inbound audio has energy.
#[test]
fn chromium_speech_is_echoed_back_to_the_browser() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let script = repo.join("tests/browser/chromium_session.mjs");
    assert!(
        repo.join("tests/browser/node_modules/playwright-core")
            .exists(),
        "run scripts/setup first (playwright-core missing)"
    );
    let t = start_transceiver("chromium");
    let _bot = start_bot(&t, "bot-chromium", 4);
    let out = Command::new("node")
        .arg(&script)
        .env("SIGNAL_URL", &t.base_url)
        .env("AUDIO", "speech")
        .env("EXPECT_ECHO", "1")
        .env("HOLD_MS", "9000")
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chromium echo session failed:\nstdout: {stdout}\nstderr: {}\ntransceiver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        t.proc.output()
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let energy = line
        .split("\"totalAudioEnergy\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("totalAudioEnergy in the report");
    assert!(energy > 0.0, "no audio energy came back: {line}");
    println!("browser heard the echo: totalAudioEnergy = {energy}");
}
