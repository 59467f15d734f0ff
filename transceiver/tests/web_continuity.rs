//! The browser client (`clients/web` in headless Chromium) keeps its call when its transceiver
//! goes: killed (-9), the client's ICE restart finds the session gone and it resumes on the
//! other transceiver with its resume credential; drained (SIGTERM), the transceiver asks it to
//! move and it resumes at once. Both transceivers sit behind one signaling address (a TCP
//! forwarder playing the load balancer, which stops sending to a transceiver that is gone or
//! draining); a real gRPC worker is subscribed to both and serves the call throughout.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::backend::TestWorker;
use support::web_client::WebClient;
use support::ServerProcess;
use voxgate_proto::bridge::{downlink, Hangup};
use voxgate_testkit::tcp_balancer::TcpBalancer;

/// The load balancer in front of both transceivers; `switch` takes one out of the pool.
fn balancer(first: std::net::SocketAddr) -> TcpBalancer {
    TcpBalancer::start("127.0.0.1:0".parse().unwrap(), vec![first]).expect("balancer")
}

fn key_file() -> String {
    support::resume_key_file().0
}

fn frames(worker: &TestWorker, id: &str) -> usize {
    worker.session(id).map_or(0, |l| l.frames.len())
}

fn wait_until(within: Duration, ok: impl FnMut() -> bool) -> bool {
    voxgate_testkit::wait::until(within, Duration::from_millis(20), ok)
}

/// The new session that continues `call_id` at `worker`, once it has uplink audio.
fn resumed_session(worker: &TestWorker, call_id: &str) -> Option<String> {
    worker
        .sessions()
        .into_iter()
        .find(|(id, l)| id != call_id && l.call_id == call_id && l.frames.len() >= 10)
        .map(|(id, _)| id)
}

#[test]
fn chromium_keeps_its_call_when_its_transceiver_is_killed() {
    let key = key_file();
    let args = ["--resume-key-file", key.as_str(), "--loops", "1"];
    let mut t1 = ServerProcess::start(&args);
    let t2 = ServerProcess::start(&args);
    let w1 = TestWorker::start(&t1.grpc_url, "agent", 4, 48_000);
    let w2 = TestWorker::start_beside(&t2.grpc_url, &w1, 4, 48_000);
    let lb = balancer(t1.signal_addr);
    let mut client = WebClient::start_at(&lb.url(), Duration::from_secs(90));
    let connected = client.run(json!({"cmd": "connect"}), Duration::from_secs(30));
    let call_id = client.wait("connected", Duration::from_secs(5))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let _ = connected;
    assert!(wait_until(Duration::from_secs(15), || frames(
        &w1, &call_id
    ) >= 25));

    lb.switch(t2.signal_addr);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(t1.pid() as i32, libc::SIGKILL) };
    let _ = t1.stop();
    let killed = Instant::now();
    let resumed = client.wait("resumed", Duration::from_secs(30));
    let noticed = killed.elapsed();
    assert_eq!(resumed["previousSessionId"], call_id.as_str(), "{resumed}");
    let mut new_id = None;
    assert!(
        wait_until(Duration::from_secs(15), || {
            new_id = resumed_session(&w2, &call_id);
            new_id.is_some()
        }),
        "the call's audio did not reach the backend through t2; t2 log:\n{}",
        t2.log_tail(30)
    );
    let new_id = new_id.unwrap();
    assert_eq!(resumed["sessionId"], new_id.as_str());
    let uplink = killed.elapsed();
    let state = client.stats()["state"].clone();
    assert_eq!(state, "connected");
    eprintln!(
        "web client, t1 killed: resumed on t2 after {noticed:?} (client gap {} ms), uplink \
         audio at the backend after {uplink:?}",
        resumed["gapMs"]
    );
}

#[test]
fn chromium_moves_its_call_when_its_transceiver_drains() {
    let key = key_file();
    let mut t1 = ServerProcess::start(&[
        "--resume-key-file",
        key.as_str(),
        "--loops",
        "1",
        "--drain-timeout-secs",
        "60",
    ]);
    let t2 = ServerProcess::start(&["--resume-key-file", key.as_str(), "--loops", "1"]);
    let w1 = TestWorker::start(&t1.grpc_url, "agent", 4, 48_000);
    let w2 = TestWorker::start_beside(&t2.grpc_url, &w1, 4, 48_000);
    let lb = balancer(t1.signal_addr);
    let mut client = WebClient::start_at(&lb.url(), Duration::from_secs(90));
    client.run(json!({"cmd": "connect"}), Duration::from_secs(30));
    let call_id = client.wait("connected", Duration::from_secs(5))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(wait_until(Duration::from_secs(15), || frames(
        &w1, &call_id
    ) >= 25));

    // A rolling deploy: t1 leaves the pool and gets SIGTERM.
    lb.switch(t2.signal_addr);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(t1.pid() as i32, libc::SIGTERM) };
    let drain_started = Instant::now();
    let resumed = client.wait("resumed", Duration::from_secs(20));
    let moved = drain_started.elapsed();
    let mut new_id = None;
    assert!(wait_until(Duration::from_secs(15), || {
        new_id = resumed_session(&w2, &call_id);
        new_id.is_some()
    }));
    // The backend serves the call at t2 now and hangs up its old session (as the SDK does).
    w1.send(
        &call_id,
        downlink::Kind::Hangup(Hangup {
            reason: "resumed".into(),
        }),
    );
    assert!(
        wait_until(Duration::from_secs(20), || !t1.is_running()),
        "t1 did not finish draining\n{}",
        t1.log_tail(30)
    );
    let drained = drain_started.elapsed();
    assert!(t1.stop().is_some_and(|s| s.success()));
    assert_eq!(client.stats()["state"], "connected");
    eprintln!(
        "web client, t1 drained: resumed on t2 after {moved:?} (client gap {} ms), t1 exited \
         0 after {drained:?} of a 60 s drain limit",
        resumed["gapMs"]
    );
    assert!(
        drained < Duration::from_secs(10),
        "the drain took {drained:?}"
    );
}
