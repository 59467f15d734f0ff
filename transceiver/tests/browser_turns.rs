//! Mouth-to-ear latency per turn, end to end: headless Chromium runs the web client with a
//! microphone that speaks in turns (a 1.2 s tone, then 2.8 s of silence, looped), media
//! crosses the test kit's [`ImpairedProxy`] (40 ms each way), and a backend answers each turn
//! the way a voice agent does: once the caller has been quiet for [`VAD_HANGOVER`], it thinks
//! for [`THINK`] and plays a short reply. The browser reports each turn (its own end of speech
//! → reply heard), the transceiver splits it, and:
//! - the backend receives a `TurnLatency` per turn whose parts sum to the total;
//! - the measured parts are what the test set up: the backend's part covers its hangover and
//!   think time (from the transceiver's last speech packet to the reply queued), the network
//!   halves read the proxy's 40 ms, the transceiver's own parts are a few ms;
//! - the total is at least the backend's part plus the round trip, and the remainder (capture
//!   and send, estimated) is small;
//! - the browser's `turn` events carry the same splits, `GET /v1/sessions/{id}` shows them,
//!   and `/metrics` counts the turns.
//!
//! Bounds, and why: the backend decides the caller stopped from decoded PCM (its last loud
//! frame, polled every 10 ms), the transceiver from the browser's RFC 6464 levels, so the two
//! ends of speech differ by a frame or two; a busy 2-core machine adds scheduling delays, only
//! ever upward. So each measured part has a floor it cannot go under and a generous ceiling.
//!
//! Needs `scripts/setup` (Chromium, node and playwright-core in tests/browser).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::backend::{tone, TestWorker};
use support::web_client::{connected, WebClient};
use support::ServerProcess;
use voxgate_proto::bridge::TurnLatency;
use voxgate_testkit::{ImpairedProxy, Impairment};

/// The caller's microphone: speech-like turns (Chromium loops the file).
const MIC_PATTERN: &str = "tone:1200,silence:2800";
/// How long the backend waits after the caller's last loud frame before it answers.
const VAD_HANGOVER: Duration = Duration::from_millis(300);
const THINK: Duration = Duration::from_millis(200);
const ONE_WAY: Duration = Duration::from_millis(40);
/// Turns to collect.
const TURNS: usize = 4;

/// Answers each of the caller's turns, as a voice agent would, until `TURNS` were reported.
fn converse(worker: &TestWorker, id: &str, within: Duration) -> Vec<TurnLatency> {
    let deadline = Instant::now() + within;
    let reply = tone(660.0, 0.6, 48_000);
    let mut answered_spurt = None;
    loop {
        let (loud, last_loud, turns) = worker.speech(id);
        if turns.len() >= TURNS {
            return turns;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {TURNS} turns reported (the caller spoke {loud} loud frames)",
            turns.len()
        );
        if let Some(last) = last_loud {
            if answered_spurt != Some(last) && last.elapsed() >= VAD_HANGOVER {
                answered_spurt = Some(last);
                std::thread::sleep(THINK);
                worker.play(id, &reply, "reply");
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn check(t: &TurnLatency) {
    let parts = [
        t.capture_send_ms,
        t.network_up_ms,
        t.transceiver_up_ms,
        t.backend_ms,
        t.transceiver_down_ms,
        t.network_down_ms,
        t.jitter_buffer_ms,
        t.playout_ms.unwrap_or(0.0),
    ];
    let sum: f64 = parts.iter().sum();
    assert!((sum - t.total_ms).abs() < 0.01, "parts sum {sum} != {t:?}");
    let floor = ms(VAD_HANGOVER + THINK) - 45.0;
    assert!(
        t.backend_ms >= floor && t.backend_ms <= floor + 400.0,
        "backend {:.1} ms for {floor:.0} ms of hangover and thinking: {t:?}",
        t.backend_ms
    );
    assert!(
        (0.0..=25.0).contains(&t.transceiver_up_ms),
        "transceiver up: {t:?}"
    );
    assert!(
        (0.0..=80.0).contains(&t.transceiver_down_ms),
        "transceiver down (the pacer's queue and 20 ms grid): {t:?}"
    );
    let half = ms(ONE_WAY);
    for (what, v) in [("up", t.network_up_ms), ("down", t.network_down_ms)] {
        assert!(
            v >= half - 1.0 && v <= half + 15.0,
            "network {what} {v:.1} ms for {half} ms of proxy delay: {t:?}"
        );
    }
    assert!(
        t.total_ms >= t.backend_ms + 2.0 * half,
        "total under the backend and the round trip: {t:?}"
    );
    // Capture and send: the browser's last loud sample → its packet (a 20 ms Opus frame,
    // 10 ms polling on both of its analysers), plus what the RTT halves misjudge.
    assert!(
        (-40.0..=150.0).contains(&t.capture_send_ms),
        "capture and send: {t:?}"
    );
    assert!(
        (0.0..=1000.0).contains(&t.jitter_buffer_ms),
        "jitter buffer: {t:?}"
    );
}

#[test]
fn each_turn_reaches_the_backend_split_from_the_callers_end_of_speech_to_the_reply_heard() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "turns", 2, 48_000);
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let way = Impairment {
        loss: 0.0,
        delay: ONE_WAY,
    };
    let proxy = ImpairedProxy::start(media, way, way, 7).expect("proxy");
    let mut client = WebClient::start_with_env(
        &server.signal_url,
        Duration::from_secs(120),
        &[("MIC_PATTERN", MIC_PATTERN)],
    );
    let id = connected(&mut client, Some(proxy.port));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !worker.attached().contains(&id) {
        assert!(Instant::now() < deadline, "the backend never attached {id}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let turns = converse(&worker, &id, Duration::from_secs(60));
    for t in &turns {
        eprintln!(
            "turn {}: total {:.1} = capture+send {:.1} (est) + up {:.1} (est) + transceiver {:.1} \
             + backend {:.1} + transceiver {:.1} + down {:.1} (est) + jitter buffer {:.1} \
             (client) + playout {:?} (client); rtt from {}",
            t.turn,
            t.total_ms,
            t.capture_send_ms,
            t.network_up_ms,
            t.transceiver_up_ms,
            t.backend_ms,
            t.transceiver_down_ms,
            t.network_down_ms,
            t.jitter_buffer_ms,
            t.playout_ms,
            t.rtt_source
        );
    }
    let numbers: Vec<u32> = turns.iter().map(|t| t.turn).collect();
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "turns in order, once each: {numbers:?}"
    );
    // The first turn may precede the first RTCP round trip (it needs downlink audio): its
    // network halves then come from the browser's ICE RTT. Every turn is checked the same.
    for t in &turns {
        check(t);
    }
    // Chromium's receiver reports come every second or few: by the last turn the transceiver
    // has its own RTT.
    assert_eq!(
        turns.last().map(|t| t.rtt_source.as_str()),
        Some("rtcp"),
        "the last turn's RTT: {turns:?}"
    );

    // The browser heard the same splits (the last may still be on its way back to it).
    let deadline = Instant::now() + Duration::from_secs(5);
    let (heard, events) = loop {
        let heard = client.run(serde_json::json!({"cmd": "turns"}), Duration::from_secs(10));
        let events = heard["turns"].as_array().cloned().unwrap_or_default();
        if events.len() >= turns.len() || Instant::now() > deadline {
            break (heard, events);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for t in &turns {
        let e = events
            .iter()
            .find(|e| e["turn"] == t.turn)
            .unwrap_or_else(|| panic!("the browser never got turn {}: {heard}", t.turn));
        let total = e["totalMs"].as_f64().expect("totalMs");
        assert!((total - t.total_ms).abs() <= 0.1, "{e} vs {t:?}");
        assert_eq!(e["parts"].as_array().map(Vec::len), Some(8), "{e}");
    }

    // The session's JSON keeps the last few; the metrics count every turn.
    let session = support::http_get_json(&server.url(&format!("/v1/sessions/{id}")));
    let shown = &session["turns"];
    assert!(shown["seen"].as_u64() >= Some(TURNS as u64), "{shown}");
    assert_eq!(shown["reports_dropped"], 0, "{shown}");
    let last = shown["last"].as_array().expect("last turns");
    assert!(!last.is_empty() && last.len() <= 4, "{shown}");
    let metrics = support::metrics(&server);
    let count = metrics
        .lines()
        .find_map(|l| l.strip_prefix("voxgate_turn_mouth_to_ear_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(count >= TURNS as f64, "turns counted: {count}");
    client.run(
        serde_json::json!({"cmd": "hangup"}),
        Duration::from_secs(10),
    );
}
