//! A caller floods its own session with valid ICE checks from ever new source addresses
//! (issue 37, item 2), against the real transceiver process: the checks carry the caller's
//! real credentials, so each one authenticates, and each new address would make str0m's ICE
//! agent add a candidate and a pair it keeps. The neighbour on the same loop must keep its
//! media's pace, the server's memory must stay put, and the attacker's effort must be counted.

mod support;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::backend::TestWorker;
use support::probe::{
    a_new_caller_connects, cpu_time, gap_stats, playing_neighbour, rss_kib, TimestampedClient,
};
use support::{metric_sum, metrics, snapshot, ServerProcess};

#[test]
fn a_check_flood_from_new_addresses_is_bounded_and_the_neighbour_keeps_its_pace() {
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    // The neighbour: a caller the backend plays a long reply to.
    let (mut neighbour, id) = playing_neighbour(&server, &worker);
    // The attacker: a caller of its own, whose valid check is then replayed from new sources.
    let mut attacker = TimestampedClient::open(&server);
    let attacker_id = attacker.session.session_id().to_string();
    let check = attacker.capture_check(Duration::from_secs(10));
    neighbour.drive_for(Duration::from_millis(500));

    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let wall = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let rss_before = rss_kib(server.pid());
    let cpu_before = cpu_time(server.pid());
    let frames_before = worker.session(&id).unwrap().frames.len();
    let arrivals_before = neighbour.rtp_arrivals.len();
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    const FLOOD: Duration = Duration::from_secs(8);
    // A thousand checks a second, each from a socket of its own (a new source port).
    let flood_start = wall();
    std::thread::scope(|s| {
        s.spawn(|| {
            let start = Instant::now();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && start.elapsed() < FLOOD {
                let due = start + Duration::from_micros(n * 1_000);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
                if sock.send_to(&check, media).is_ok() {
                    n += 1;
                }
            }
            sent.store(n, Ordering::Relaxed);
        });
        neighbour.drive_for(FLOOD + Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
    });
    let flood_end = wall();
    let sent = sent.load(Ordering::Relaxed);
    let rss_after = rss_kib(server.pid());
    let cpu = (cpu_time(server.pid()) - cpu_before).as_secs_f64() / FLOOD.as_secs_f64();
    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let gaps: Vec<f64> = neighbour.rtp_arrivals[arrivals_before..]
        .windows(2)
        .filter(|w| w[1] >= flood_start + Duration::from_millis(100) && w[1] < flood_end)
        .map(|w| w[1].saturating_sub(w[0]).as_secs_f64() * 1000.0)
        .collect();
    let heard = gaps.len();
    let (median, p99, max) = gap_stats(gaps);
    let text = metrics(&server);
    let refused = metric_sum(
        &text,
        "voxgate_dropped_datagrams_total",
        &["reason=\"check_"],
    );
    eprintln!(
        "check flood: {sent} sent; {refused} refused by the check budget; transceiver at \
         {cpu:.2} core; RSS {rss_before} -> {rss_after} KiB; neighbour: {frames} uplink frames at the backend, {heard} downlink \
         packets, gaps median {median:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
    );
    assert!(sent >= 6_000, "the flood sent only {sent} checks");
    // Checks from new addresses cost the loop little: each is refused before str0m. Handed
    // to str0m, each adds a candidate and a pair it scans on every later check, and the whole
    // process climbs towards a core for one caller's flood.
    assert!(
        cpu <= 0.3,
        "the transceiver used {cpu:.2} of a core during the flood"
    );
    // The attacker's effort is counted: all but a few dozen of its checks were refused.
    assert!(refused + 200 >= sent, "{refused} of {sent} checks refused");
    // The attacker's own session holds no more addresses than any session may.
    let theirs = snapshot(&server, &attacker_id);
    let held = theirs["client_addrs"].as_array().map_or(0, Vec::len);
    assert!(held <= 8, "{theirs}");
    // Memory stays put: not a candidate and a pair kept per check.
    assert!(
        rss_after <= rss_before + 2 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    // The neighbour keeps its pace both ways: 8 s of 20 ms frames is 400.
    assert!(
        frames >= 360,
        "the backend got {frames} of ~400 uplink frames"
    );
    assert!(
        heard >= 360,
        "the neighbour heard {heard} of ~400 downlink packets"
    );
    assert!(
        max <= 100.0,
        "a downlink gap of {max:.1} ms (p99 {p99:.1} ms)"
    );
    // New callers are still admitted.
    a_new_caller_connects(&server);
}
