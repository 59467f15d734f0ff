//! voxgate's per-call quality (`GET /v1/sessions/{id}` → `quality`) checked against the
//! browser's own view: headless Chromium runs the web client, media crosses the test kit's
//! [`ImpairedProxy`] (seeded RTP loss and a fixed delay, each direction), and for 0 %, 2 % and
//! 10 % loss at 0 and 80 ms of added round trip, voxgate's RTT, jitter and loss per direction
//! must agree with Chromium's `getStats` and with what the proxy actually dropped, and the MOS
//! must fall as the network worsens.
//!
//! What is compared with what, and why the tolerances are what they are:
//! - **RTT**: voxgate's (from Chromium's receiver reports of our downlink, LSR/DLSR) against
//!   Chromium's `remote-inbound-rtp.roundTripTime` (from *our* receiver reports of its uplink)
//!   and its ICE `candidate-pair.currentRoundTripTime` (STUN, an independent measurement). All
//!   three cross the same proxy, so each must read the added delay plus loopback's ≈ 1 ms,
//!   within [`RTT_SLACK_MS`]: each is a single sample taken at a different moment, and on a
//!   busy 2-core machine a process can be descheduled for a few ms between receiving a report
//!   and answering it.
//! - **Loss**: cumulative fractions since the call began. voxgate's uplink (str0m's count)
//!   and downlink (Chromium's cumulative count in its receiver reports) against the proxy's
//!   ground truth and against Chromium's `inbound-rtp` (its own count of our downlink) and
//!   `remote-inbound-rtp` (our reports of its uplink). The readings cover different spans of
//!   the call (reports go out every 1–5 s, voxgate's statistics every 5 s), so they may differ
//!   by the sampling error of the shorter span: [`loss_tolerance`] allows three standard
//!   deviations of a binomial fraction over the smaller packet count, plus half a percent.
//! - **Jitter**: the same estimator (RFC 3550) on both sides of each comparison (downlink:
//!   Chromium's `inbound-rtp` and the report it sends us; uplink: str0m's and the report we
//!   send Chromium, its `remote-inbound-rtp`). Jitter moves from second to second (a busy
//!   machine deschedules a sender for milliseconds), and voxgate's figure is a report from up
//!   to ten seconds ago, so it must match one of Chromium's once-a-second readings of the last
//!   [`SERIES`] within [`JITTER_SLACK_MS`] (Chromium rounds to whole milliseconds). The
//!   proxy's delay is the same for every datagram, so it adds no jitter: all of it stays small.
//! - **MOS**: the mean of the history's samples per direction falls strictly with loss at each
//!   delay, and at no loss 80 ms reads lower than 0 ms (the E-model's delay impairment).
//!
//! Needs `scripts/setup` (Chromium, node and playwright-core in tests/browser, sox).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::backend::{tone, TestWorker};
use support::web_client::{self, connected, WebClient};
use support::ServerProcess;
use voxgate_testkit::{ImpairedProxy, Impairment, ProxyCounts};

/// How far each RTT reading may sit from the added round trip (above it; 2 ms below).
const RTT_SLACK_MS: f64 = 25.0;
/// How far voxgate's jitter may sit from Chromium's nearest reading (Chromium rounds to whole
/// milliseconds), and the most it may read (the proxy adds no jitter; loopback has ≈ 1 ms).
const JITTER_SLACK_MS: f64 = 1.5;
const JITTER_MAX_MS: f64 = 20.0;
/// Samples of voxgate's history a scenario waits for (5 s each).
const SAMPLES: usize = 3;
/// How far back Chromium's readings are kept to match voxgate's: its value comes from a
/// report up to 5 s old (one RTCP interval) taken into statistics up to 5 s later.
const SERIES: Duration = Duration::from_secs(12);

#[derive(Debug, Clone, Copy)]
struct Network {
    loss: f64,
    rtt_ms: u64,
}

/// One call's readings, taken at the end of its measurement.
#[derive(Debug)]
struct Reading {
    net: Network,
    quality: Value,
    browser: Value,
    /// Chromium's stats of the last [`SERIES`], one reading a second, oldest first.
    series: Vec<Value>,
    proxy: ProxyCounts,
}

/// The fraction `a` may differ from `b` (see the module docs): `n` is the smaller packet count.
fn loss_tolerance(p: f64, n: u64) -> f64 {
    3.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt() + 0.005
}

fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("not a number: {v} (expected a measured value)"))
}

/// One call through a proxy impairing both directions by `net`: connects, lets the backend
/// talk (RTT needs downlink audio), waits for [`SAMPLES`] of history with RTT and loss known,
/// reads both sides, hangs up.
fn measure(
    server: &ServerProcess,
    worker: &TestWorker,
    client: &mut WebClient,
    net: Network,
    seed: u64,
) -> Reading {
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let way = Impairment {
        loss: net.loss,
        delay: Duration::from_millis(net.rtt_ms / 2),
    };
    let proxy = ImpairedProxy::start(media, way, way, seed).expect("proxy");
    let id = connected(client, Some(proxy.port));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !worker.attached().contains(&id) {
        assert!(Instant::now() < deadline, "the backend never attached {id}");
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.play(&id, &tone(1000.0, 60.0, 48_000), "reply");

    let url = server.url(&format!("/v1/sessions/{id}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut series: Vec<(Instant, Value)> = Vec::new();
    let quality = loop {
        if series
            .last()
            .is_none_or(|(at, _)| at.elapsed() >= Duration::from_secs(1))
        {
            series.push((Instant::now(), client.stats()["stats"].clone()));
        }
        let q = support::http_get_json(&url)["quality"].clone();
        let history = q["history"].as_array().map_or(0, Vec::len);
        let known = q["rtt_ms"].is_number()
            && q["uplink"]["loss_total"].is_number()
            && q["downlink"]["loss_total"].is_number();
        if known && history >= SAMPLES {
            break q;
        }
        assert!(
            Instant::now() < deadline,
            "{net:?}: quality never complete: {q}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // The report voxgate's last statistics read may still be on its way to Chromium (both
    // run on 5 s timers): Chromium's readings go on a little past it.
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(600));
        series.push((Instant::now(), client.stats()["stats"].clone()));
    }
    let browser = series.last().expect("a reading").1.clone();
    let proxy_counts = proxy.counts();
    client.run(json!({"cmd": "hangup"}), Duration::from_secs(10));
    let series = series
        .into_iter()
        .filter(|(at, _)| at.elapsed() <= SERIES)
        .map(|(_, v)| v)
        .collect();
    let reading = Reading {
        net,
        quality,
        browser,
        series,
        proxy: proxy_counts,
    };
    eprintln!(
        "{net:?}: voxgate {}\n  chromium {}\n  proxy {:?}",
        reading.quality, reading.browser, reading.proxy
    );
    reading
}

/// Every comparison for one call (see the module docs).
fn check(r: &Reading) {
    let (q, b, p, net) = (&r.quality, &r.browser, &r.proxy, r.net);
    let ctx = format!("{net:?}\nvoxgate {q}\nchromium {b}\nproxy {p:?}");
    let added = net.rtt_ms as f64;

    // RTT: three readings of the same round trip.
    let rtts = [
        ("voxgate", f(&q["rtt_ms"])),
        ("chromium rtcp", f(&b["uplink"]["rtt"]) * 1e3),
        ("chromium ice", f(&b["rtt"]) * 1e3),
    ];
    for (what, rtt) in rtts {
        assert!(
            rtt >= added - 2.0 && rtt <= added + RTT_SLACK_MS,
            "{what} RTT {rtt:.1} ms for {added} ms added\n{ctx}"
        );
    }

    // Uplink loss: str0m's count, the proxy's truth, and our reports as Chromium got them.
    let truth_up = p.up_rtp_dropped as f64 / p.up_rtp_seen.max(1) as f64;
    let up_total = f(&q["uplink"]["loss_total"]);
    let up_packets = q["uplink"]["packets"].as_u64().unwrap_or(0)
        + q["uplink"]["packets_lost"].as_u64().unwrap_or(0);
    let sent = b["packetsSent"].as_u64().unwrap_or(0);
    let chromium_up = b["uplink"]["packetsLost"].as_f64().unwrap_or(0.0) / sent.max(1) as f64;
    let n = up_packets.min(p.up_rtp_seen).min(sent);
    assert!(n >= 500, "only {n} uplink packets\n{ctx}");
    let tol = loss_tolerance(net.loss, n);
    for (what, v) in [
        ("proxy", truth_up),
        ("chromium remote-inbound", chromium_up),
    ] {
        assert!(
            (up_total - v).abs() <= tol,
            "uplink loss: voxgate {up_total:.4} vs {what} {v:.4} (±{tol:.4})\n{ctx}"
        );
    }

    // Downlink loss: what Chromium reports to us, its own count, and the proxy's truth.
    let truth_down = p.down_rtp_dropped as f64 / p.down_rtp_seen.max(1) as f64;
    let down_total = f(&q["downlink"]["loss_total"]);
    let received = b["packetsReceived"].as_u64().unwrap_or(0);
    let lost = b["packetsLost"].as_u64().unwrap_or(0);
    let chromium_down = lost as f64 / (received + lost).max(1) as f64;
    let n = (received + lost).min(p.down_rtp_seen);
    assert!(n >= 500, "only {n} downlink packets\n{ctx}");
    let tol = loss_tolerance(net.loss, n);
    for (what, v) in [("proxy", truth_down), ("chromium inbound", chromium_down)] {
        assert!(
            (down_total - v).abs() <= tol,
            "downlink loss: voxgate {down_total:.4} vs {what} {v:.4} (±{tol:.4})\n{ctx}"
        );
    }
    // The proxy's own loss is the seeded fraction, within its sampling error.
    for (what, v, seen) in [
        ("up", truth_up, p.up_rtp_seen),
        ("down", truth_down, p.down_rtp_seen),
    ] {
        assert!(
            (v - net.loss).abs() <= loss_tolerance(net.loss, seen),
            "proxy {what} dropped {v:.4} of {seen}\n{ctx}"
        );
    }

    // Jitter: one estimator read at different moments. voxgate's figure must match one of
    // Chromium's readings of the last seconds (the one its report carried), within the
    // slack; Chromium reports jitter in whole milliseconds of its own.
    let near = |vox: f64, read: &dyn Fn(&Value) -> Option<f64>| {
        r.series
            .iter()
            .filter_map(read)
            .map(|c| (vox - c * 1e3).abs())
            .fold(f64::INFINITY, f64::min)
    };
    let down = f(&q["downlink"]["jitter_ms"]);
    let up = f(&q["uplink"]["jitter_ms"]);
    let off_down = near(down, &|s| s["jitter"].as_f64());
    let off_up = near(up, &|s| s["uplink"]["jitter"].as_f64());
    let jitters: Vec<_> = r
        .series
        .iter()
        .map(|s| (&s["jitter"], &s["uplink"]["jitter"]))
        .collect();
    for (what, vox, off) in [("downlink", down, off_down), ("uplink", up, off_up)] {
        assert!(
            off <= JITTER_SLACK_MS && vox <= JITTER_MAX_MS,
            "{what} jitter: voxgate {vox:.2} ms is {off:.2} ms from Chromium's nearest \
             reading (down, up): {jitters:?}\n{ctx}"
        );
    }
}

/// The mean of the history's MOS samples of one direction.
fn mean_mos(r: &Reading, key: &str) -> f64 {
    let v: Vec<f64> = r.quality["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|s| s[key].as_f64())
        .collect();
    assert!(!v.is_empty(), "no {key} in {:?}: {}", r.net, r.quality);
    v.iter().sum::<f64>() / v.len() as f64
}

/// The calls of one added round trip, one after the other in one browser.
fn run_delay(server: &ServerProcess, worker: &TestWorker, rtt_ms: u64) -> Vec<Reading> {
    let mut client = web_client::start_for(server, Duration::from_secs(280));
    [0.0, 0.02, 0.10]
        .into_iter()
        .enumerate()
        .map(|(i, loss)| {
            let seed = 1000 * rtt_ms + i as u64;
            measure(server, worker, &mut client, Network { loss, rtt_ms }, seed)
        })
        .collect()
}

#[test]
fn chromium_and_voxgate_agree_on_rtt_jitter_and_loss_and_mos_falls_as_the_network_worsens() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "quality", 4, 48_000);
    // Two browsers at once, one per added round trip: half the wall time.
    let (near, far) = std::thread::scope(|s| {
        let near = s.spawn(|| run_delay(&server, &worker, 0));
        let far = s.spawn(|| run_delay(&server, &worker, 80));
        (near.join(), far.join())
    });
    let (near, far) = (
        near.unwrap_or_else(|e| std::panic::resume_unwind(e)),
        far.unwrap_or_else(|e| std::panic::resume_unwind(e)),
    );
    for r in near.iter().chain(&far) {
        check(r);
    }
    for dir in ["uplink_mos", "downlink_mos"] {
        for calls in [&near, &far] {
            let mos: Vec<f64> = calls.iter().map(|r| mean_mos(r, dir)).collect();
            eprintln!(
                "{dir} at {} ms: {mos:.2?} for 0/2/10 % loss",
                calls[0].net.rtt_ms
            );
            assert!(
                mos[0] > mos[1] && mos[1] > mos[2],
                "{dir} does not fall with loss at {} ms: {mos:?}",
                calls[0].net.rtt_ms
            );
        }
        let (clear_near, clear_far) = (mean_mos(&near[0], dir), mean_mos(&far[0], dir));
        assert!(
            clear_far < clear_near,
            "{dir} without loss: {clear_far:.3} at 80 ms vs {clear_near:.3} at 0 ms"
        );
    }
}
