//! The browser client library (`clients/web`, served at `/voxgate.js`) in Debian's headless
//! Chromium against the real transceiver and a gRPC test backend: a call connects, carries audio
//! and data-channel messages both ways, mutes, ends at once when an operator deletes the session,
//! and survives a cut network path with an ICE restart that keeps its session and backend call.
//! The page imports `/voxgate.js` from the transceiver's origin, as an app would; the driver is
//! tests/browser/web_client.mjs (one command at a time on stdin, events as JSON lines on stdout).
//! Needs `scripts/setup` (Chromium, node and playwright-core in tests/browser, sox).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::backend::{tone, TestWorker};
use support::web_client::{self, connected};
use support::ServerProcess;
use voxgate_proto::bridge::{data_message, downlink, session_event, DataMessage};
use voxgate_testkit::ImpairedProxy;

fn text(s: &str) -> downlink::Kind {
    downlink::Kind::Data(DataMessage {
        label: "oai-events".into(),
        payload: Some(data_message::Payload::Text(s.into())),
    })
}

fn rms(pcm: &[i16]) -> f64 {
    if pcm.is_empty() {
        return 0.0;
    }
    (pcm.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / pcm.len() as f64).sqrt()
}

/// Caller audio the backend received, as a sample count so far.
fn uplink_len(worker: &TestWorker, id: &str) -> usize {
    worker.session(id).map_or(0, |l| l.pcm.len())
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(50), ok)
}

/// The RMS of the caller audio the backend gets over `window`, starting `settle` from now.
fn uplink_rms_over(worker: &TestWorker, id: &str, settle: Duration, window: Duration) -> f64 {
    std::thread::sleep(settle);
    let from = uplink_len(worker, id);
    std::thread::sleep(window);
    let pcm = worker.session(id).map(|l| l.pcm).unwrap_or_default();
    rms(&pcm[from.min(pcm.len())..])
}

#[test]
fn chromium_web_client_connects_talks_both_ways_and_mutes() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "web", 2, 48_000);
    let mut client = web_client::start(&server);
    let id = connected(&mut client, None);
    assert!(
        wait_until(Duration::from_secs(10), || worker.attached().contains(&id)),
        "the backend never attached {id}"
    );

    // Caller audio reaches the backend: the fake microphone's tone, well above silence.
    let talking = uplink_rms_over(&worker, &id, Duration::ZERO, Duration::from_secs(1));
    assert!(talking > 1000.0, "caller audio RMS {talking:.0}");

    // Backend audio reaches the caller's ear.
    let before = client.stats();
    worker.play(&id, &tone(1000.0, 2.0, 48_000), "reply");
    let mut heard = before.clone();
    let energy = |s: &Value| s["stats"]["totalAudioEnergy"].as_f64().unwrap_or(0.0);
    assert!(
        wait_until(Duration::from_secs(10), || {
            heard = client.stats();
            energy(&heard) > energy(&before)
        }),
        "no audio energy heard: before {before}, after {heard}"
    );
    let packets = |s: &Value| s["stats"]["packetsReceived"].as_u64().unwrap_or(0);
    assert!(packets(&heard) > packets(&before), "{heard}");

    // Data-channel messages both ways.
    client.run(
        json!({"cmd": "send", "message": {"type": "hello", "n": 1}}),
        Duration::from_secs(5),
    );
    assert!(
        wait_until(Duration::from_secs(5), || worker
            .session(&id)
            .is_some_and(|l| l.data.iter().any(|d| d.contains("\"hello\"")))),
        "the backend never got the caller's message: {:?}",
        worker.session(&id).map(|l| l.data)
    );
    worker.send(&id, text(r#"{"type":"agent.text","text":"hi"}"#));
    let m = client.wait("message", Duration::from_secs(5));
    assert_eq!(m["message"]["type"], "agent.text", "{m}");

    // Mute sends silence; unmute brings the voice back.
    client.run(json!({"cmd": "mute"}), Duration::from_secs(5));
    let muted = uplink_rms_over(
        &worker,
        &id,
        Duration::from_millis(500),
        Duration::from_secs(1),
    );
    client.run(json!({"cmd": "unmute"}), Duration::from_secs(5));
    let unmuted = uplink_rms_over(
        &worker,
        &id,
        Duration::from_millis(500),
        Duration::from_secs(1),
    );
    eprintln!("caller RMS talking {talking:.0}, muted {muted:.0}, unmuted {unmuted:.0}");
    assert!(
        muted < talking * 0.05,
        "muted RMS {muted:.0} vs {talking:.0}"
    );
    assert!(
        unmuted > talking * 0.5,
        "unmuted RMS {unmuted:.0} vs {talking:.0}"
    );

    // Hang-up: DELETE, and the backend's call ends.
    client.run(json!({"cmd": "hangup"}), Duration::from_secs(10));
    let ended = client.wait("ended", Duration::from_secs(1));
    assert_eq!(ended["reason"], "hangup", "{ended}");
    assert!(
        wait_until(Duration::from_secs(10), || worker
            .session(&id)
            .is_some_and(|l| l.ended)),
        "the backend's call did not end"
    );
}

#[test]
fn chromium_web_client_ends_at_once_when_the_operator_deletes_the_session() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "web", 2, 48_000);
    let mut client = web_client::start(&server);
    let id = connected(&mut client, None);
    let url = server.url(&format!("/v1/sessions/{id}"));
    // `connect()` resolves once ICE is connected and the data channel (which carries the end)
    // is open: a message sent at once reaches the backend.
    client.run(
        json!({"cmd": "send", "message": {"type": "hello"}}),
        Duration::from_secs(5),
    );
    assert!(
        wait_until(Duration::from_secs(5), || worker
            .session(&id)
            .is_some_and(|l| !l.data.is_empty())),
        "the data channel never carried the caller's message"
    );

    let t0 = Instant::now();
    let status = support::http_delete(&url, None).status;
    assert_eq!(status, 204, "DELETE {url}");
    let ended = client.wait("ended", Duration::from_secs(10));
    let took = t0.elapsed();
    eprintln!(
        "operator DELETE → client ended({}) in {took:?}",
        ended["reason"]
    );
    assert_eq!(ended["reason"], "deleted", "{ended}");
    // Without the data channel's session.ended the browser would learn of it only when consent
    // expires, seconds later.
    assert!(took < Duration::from_secs(1), "ended after {took:?}");
}

#[test]
fn chromium_web_client_restarts_ice_across_a_cut_path_and_keeps_its_session() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "web", 2, 48_000);
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let first = ImpairedProxy::clean(media).expect("proxy");
    let mut client = web_client::start(&server);
    let id = connected(&mut client, Some(first.port));
    assert!(
        first.counts().up_forwarded > 0,
        "media did not go through the proxy"
    );
    let session_url = server.url(&format!("/v1/sessions/{id}"));
    let server_connected = wait_until(Duration::from_secs(10), || {
        support::http_get_json(&session_url)["state"] == "connected"
    });
    let drops: Vec<String> = support::metrics(&server)
        .lines()
        .filter(|l| l.starts_with("voxgate_dropped_datagrams_total") && !l.ends_with(" 0"))
        .map(str::to_owned)
        .collect();
    assert!(
        server_connected,
        "the transceiver never saw the call connected through the proxy; drops {drops:?}, \
         proxy flows {:?}",
        first.counts()
    );
    assert!(
        wait_until(Duration::from_secs(10), || worker.attached().contains(&id)),
        "the backend never attached {id}"
    );
    let attaches = |w: &TestWorker| {
        w.session(&id).map_or(0, |l| {
            l.events
                .iter()
                .filter(|(k, _)| *k == session_event::Kind::Attached as i32)
                .count()
        })
    };
    assert_eq!(attaches(&worker), 1);

    // The path breaks; the next answer points at a second proxy (a new network).
    let second = ImpairedProxy::clean(media).expect("proxy");
    client.run(
        json!({"cmd": "port", "port": second.port}),
        Duration::from_secs(5),
    );
    let cut_at = Instant::now();
    first.set_cut(true);
    client.wait_for(Duration::from_secs(20), |e| {
        e["event"] == "state" && e["state"] == "reconnecting"
    });
    let back = client.wait_for(Duration::from_secs(20), |e| {
        e["event"] == "state" && e["state"] == "connected" && e["at"].is_number()
    });
    eprintln!("cut → connected again in {:?}: {back}", cut_at.elapsed());
    assert!(
        second.counts().up_forwarded > 0,
        "the restarted path does not use the second proxy"
    );

    // The same session and the same backend call, and the caller's audio flows again.
    let stats = client.stats();
    assert_eq!(stats["state"], "connected", "{stats}");
    let session = support::http_get_json(&server.url(&format!("/v1/sessions/{id}")));
    assert_eq!(session["state"], "connected", "{session}");
    let after = uplink_rms_over(&worker, &id, Duration::ZERO, Duration::from_secs(1));
    assert!(
        after > 1000.0,
        "caller audio RMS after the restart {after:.0}"
    );
    assert_eq!(attaches(&worker), 1, "the backend call was replaced");
    assert!(worker.attached().contains(&id));
}
