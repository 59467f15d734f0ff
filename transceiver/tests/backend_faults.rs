//! Backends that freeze, send oversized messages (a gRPC message past the decoding limit is
//! refused; a call's message past the limit on one message is dropped for that call alone), or
//! outlive the session limit, against the real transceiver, real str0m callers (testkit) and
//! real gRPC backends (support/backend.rs).

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::backend::TestWorker;
use support::{drive_until, http_get, metric_sum, wait_metric, ServerProcess};
use voxgate_proto::bridge::session_event;
use voxgate_testkit::{Fleet, SessionConfig};

fn caller(server: &ServerProcess) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        tone_hz: 440.0,
        amplitude: 0.3,
        send_for: Duration::from_secs(120),
        data_channel: true,
        ..Default::default()
    }
}

/// A TCP proxy in front of the gRPC port that can freeze: it then stops moving bytes but keeps
/// every socket open, exactly what the transceiver sees of a backend stopped with SIGSTOP or
/// cut off by a dropped route (no FIN, no RST, nothing answered).
struct FreezableProxy {
    port: u16,
    frozen: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl FreezableProxy {
    fn start(upstream: u16) -> FreezableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, st) = (frozen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((down, _)) => {
                        let up = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
                        for (from, to) in [
                            (down.try_clone().unwrap(), up.try_clone().unwrap()),
                            (up, down),
                        ] {
                            let (f, st) = (f.clone(), st.clone());
                            std::thread::spawn(move || pump(from, to, &f, &st));
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FreezableProxy { port, frozen, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn freeze(&self) {
        self.frozen.store(true, Ordering::Relaxed);
    }
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool, stop: &AtomicBool) {
    from.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if frozen.load(Ordering::Relaxed) {
            // Read nothing, write nothing, close nothing.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

fn grpc_port(server: &ServerProcess) -> u16 {
    server.grpc_url.rsplit(':').next().unwrap().parse().unwrap()
}

/// How the transceiver is to notice the frozen backend.
#[derive(PartialEq)]
enum Detection {
    /// Its connections leave HTTP/2 PINGs unanswered (keepalive 1 s + 1 s; stall time long).
    Keepalive,
    /// Its uplink queues stay full for `--backend-stall-secs` (2 s; keepalive long).
    Stall,
}

#[test]
fn a_frozen_backend_is_detected_by_keepalive_and_its_sessions_redispatched() {
    frozen_backend_sessions_move_to_a_live_one(Detection::Keepalive);
}

#[test]
fn a_frozen_backend_is_detected_by_its_full_uplink_queue_and_its_sessions_redispatched() {
    frozen_backend_sessions_move_to_a_live_one(Detection::Stall);
}

fn frozen_backend_sessions_move_to_a_live_one(detection: Detection) {
    let (keepalive, stall) = match detection {
        Detection::Keepalive => ("1", "120"),
        Detection::Stall => ("120", "2"),
    };
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--grpc-keepalive-secs",
        keepalive,
        "--grpc-keepalive-timeout-secs",
        keepalive,
        "--backend-stall-secs",
        stall,
        "--max-dispatch-attempts",
        "5",
    ]);
    let proxy = FreezableProxy::start(grpc_port(&server));
    let frozen_worker = TestWorker::start(&proxy.url(), "frozen", 8, 48_000);
    let mut fleet = Fleet::new().unwrap();
    for _ in 0..2 {
        fleet.open(caller(&server)).unwrap();
    }
    assert!(
        drive_until(&mut fleet, Duration::from_secs(15), || frozen_worker
            .attached()
            .len()
            == 2),
        "both calls attach to the first backend"
    );
    let ids: Vec<String> = (0..2).map(|i| fleet.report(i).session_id).collect();
    let healthy = TestWorker::start(&server.grpc_url, "healthy", 8, 48_000);
    fleet.run_for(Duration::from_millis(500));
    proxy.freeze();
    let frozen_at = Instant::now();
    // Keepalive (1 s + 1 s), or the stall time (2 s) after the socket buffers between the
    // two filled, bound the detection; the limit leaves a wide margin for a busy machine.
    let moved = drive_until(&mut fleet, Duration::from_secs(30), || {
        let attached = healthy.attached();
        ids.iter().all(|id| attached.contains(id))
    });
    assert!(
        moved,
        "sessions not re-dispatched; healthy has {:?}\n{}",
        healthy.attached(),
        server.log_tail(40)
    );
    println!("re-dispatched {:?} after the freeze", frozen_at.elapsed());
    // Uplink audio flows to the new owner.
    let before: usize = ids
        .iter()
        .map(|id| healthy.session(id).map_or(0, |l| l.frames.len()))
        .sum();
    fleet.run_for(Duration::from_secs(1));
    let after: usize = ids
        .iter()
        .map(|id| healthy.session(id).map_or(0, |l| l.frames.len()))
        .sum();
    assert!(
        after >= before + 40,
        "uplink after the move: {before} -> {after}"
    );
    let text = http_get(&server.url("/metrics"), None).body;
    if detection == Detection::Stall {
        assert_eq!(
            metric_sum(&text, "voxgate_backend_stalls_total", &[]),
            2,
            "{text}"
        );
        return;
    }
    // The dead Work stream is gone, so new sessions go to the healthy backend only.
    assert_eq!(
        metric_sum(&text, "voxgate_backend_workers", &[]),
        1,
        "{text}"
    );
    let k = fleet.open(caller(&server)).unwrap();
    let id3 = fleet.report(k).session_id;
    assert!(
        drive_until(&mut fleet, Duration::from_secs(15), || healthy
            .attached()
            .contains(&id3)),
        "a new session goes to the live backend"
    );
    drop(frozen_worker);
}

#[test]
fn a_huge_grpc_message_is_rejected() {
    use voxgate_proto::bridge::bridge_client::BridgeClient;
    use voxgate_proto::bridge::TapRequest;
    let server = ServerProcess::start(&["--loops", "1"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = server.grpc_url.clone();
    let codes = rt.block_on(async move {
        let mut client = BridgeClient::connect(url).await.unwrap();
        let mut code_for = async |len: usize| {
            let req = TapRequest {
                session_id: "a".repeat(len),
                ..Default::default()
            };
            match client.tap(req).await {
                Ok(_) => panic!("a tap of an unknown session must fail"),
                Err(status) => status.code(),
            }
        };
        (code_for(100 * 1024).await, code_for(1024 * 1024).await)
    });
    // 100 KiB is decoded (and the session is unknown); 1 MiB is refused before decoding.
    assert_eq!(codes.0, tonic::Code::NotFound);
    assert!(
        matches!(
            codes.1,
            tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
        ),
        "{:?}",
        codes.1
    );
    assert_eq!(http_get(&server.url("/healthz"), None).status, 200);
}

#[test]
fn an_oversized_session_message_is_dropped_and_the_call_goes_on() {
    // A `Session` stream's message over the 256 KiB limit on one backend message used to end
    // the stream (and the call went to be dispatched again); now it is dropped and counted.
    use voxgate_proto::bridge::bridge_client::BridgeClient;
    use voxgate_proto::bridge::{data_message, downlink, uplink, Attach, DataMessage, Downlink};
    let server = ServerProcess::start(&["--loops", "1"]);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(caller(&server)).unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(i)
            .channel_open())
    );
    let id = fleet.report(i).session_id;
    let data = |text: String| Downlink {
        kind: Some(downlink::Kind::Data(DataMessage {
            label: "oai-events".into(),
            payload: Some(data_message::Payload::Text(text)),
        })),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let frames = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let ended = Arc::new(AtomicBool::new(false));
    let tx = rt.block_on(async {
        let mut client = BridgeClient::connect(server.grpc_url.clone())
            .await
            .unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let attach = Attach {
            session_id: id.clone(),
            ..Default::default()
        };
        tx.send(Downlink {
            kind: Some(downlink::Kind::Attach(attach)),
        })
        .await
        .unwrap();
        let mut up = client
            .session(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let (frames, ended) = (frames.clone(), ended.clone());
        tokio::spawn(async move {
            while let Ok(Some(m)) = up.message().await {
                if let Some(uplink::Kind::Audio(f)) = m.kind {
                    frames.lock().unwrap().push(f.sequence);
                }
            }
            ended.store(true, Ordering::Relaxed);
        });
        tx
    });
    fleet.run_for(Duration::from_millis(500));
    let before = frames.lock().unwrap().len();
    let echoed = format!("{{\"echo\":\"{}\"}}", "\\u0001".repeat(60_000));
    rt.block_on(async {
        tx.send(data(echoed)).await.unwrap();
        tx.send(data("after the attack".into())).await.unwrap();
    });
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(i)
            .channel_messages()
            .iter()
            .any(|m| m.contains("after the attack"))),
        "the message after the oversized one never arrived\n{}",
        server.log_tail(20)
    );
    fleet.run_for(Duration::from_secs(1));
    let dropped = wait_metric(
        &server,
        "voxgate_session_downlink_dropped_total",
        &["reason=\"too_large\""],
        1,
    );
    assert_eq!(dropped, 1, "the oversized message is counted");
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(metric_sum(&text, "voxgate_sessions_ended_total", &[]), 0);
    assert!(!ended.load(Ordering::Relaxed), "the stream ended");
    let frames = frames.lock().unwrap().clone();
    assert!(frames.len() >= before + 50, "{before} → {}", frames.len());
    for w in frames.windows(2) {
        assert_eq!(w[1], w[0] + 1, "a frame is missing");
    }
    drop(tx);
}

#[test]
fn a_call_whose_backends_break_one_after_another_gets_its_full_attempts_each_time() {
    // Issue 37: attempts were never renewed after a good attach, so a call whose backend's
    // stream broke twice ended with no_backend although every backend had served it. With two
    // attempts, each break here costs one: the third backend takes the call only if the
    // attach that held renewed them.
    let server = ServerProcess::start(&["--loops", "1", "--max-dispatch-attempts", "2"]);
    let mut workers = vec![TestWorker::start(&server.grpc_url, "w1", 4, 48_000)];
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(caller(&server)).unwrap();
    assert!(drive_until(&mut fleet, Duration::from_secs(10), || workers
        [0]
    .attached()
    .len()
        == 1));
    let id = fleet.report(i).session_id;
    for n in 2..=4 {
        let next = TestWorker::start(&server.grpc_url, &format!("w{n}"), 4, 48_000);
        workers.last_mut().unwrap().kill();
        assert!(
            drive_until(&mut fleet, Duration::from_secs(10), || next
                .session(&id)
                .is_some_and(|l| l.frames.len() > 10)),
            "backend w{n} never got the call\n{}",
            server.log_tail(20)
        );
        assert_eq!(next.session(&id).unwrap().attempt, n);
        workers.push(next);
    }
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(metric_sum(&text, "voxgate_sessions_ended_total", &[]), 0);
}

#[test]
fn a_session_past_max_session_secs_ends_with_max_duration() {
    let server = ServerProcess::start(&["--loops", "1", "--max-session-secs", "4"]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet.open(caller(&server)).unwrap();
    let id = fleet.report(i).session_id;
    assert!(drive_until(&mut fleet, Duration::from_secs(10), || worker
        .attached()
        .contains(&id)));
    let started = Instant::now();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(15), |f| f
            .session(i)
            .is_closed()),
        "the session must end"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    // The caller was told why on the data channel, and so was the backend.
    let told = fleet.session(i).channel_messages();
    assert!(
        told.iter()
            .any(|m| m.contains("session.ended") && m.contains("max_duration")),
        "{told:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let backend_told = loop {
        let told = worker.session(&id).is_some_and(|l| {
            l.events
                .iter()
                .any(|(k, r)| *k == session_event::Kind::Ended as i32 && r == "max_duration")
        });
        if told || Instant::now() > deadline {
            break told;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(backend_told, "{:?}", worker.session(&id));
    // The backend hears of the end from the loop before the control plane has counted it (the
    // loop reports ends on a channel): wait for the count, then check it is exactly one.
    assert_eq!(
        wait_metric(
            &server,
            "voxgate_sessions_ended_total",
            &["reason=\"max_duration\""],
            1
        ),
        1
    );
}
