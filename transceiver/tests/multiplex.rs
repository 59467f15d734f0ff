//! `Multiplex` streams end to end (the behaviour a channel shares with a `Session` stream is
//! tested over both in audio_bridge.rs): attach failures close only their channel with the
//! status a `Session` call would get, `release` and a dropped stream hand sessions to another
//! worker, a stream that stops reading loses its frames and then its channels while other
//! backends keep their audio, a channel flooded with downlink loses only its excess audio, and
//! a message over the limit on one message is dropped for its channel alone (only a batch over
//! the decoding limit ends a stream).

mod support;

use std::time::{Duration, Instant};

use support::backend::{TestWorker, Transport};
use support::probe::rss_kib;
use support::{drive_until, http_get, metric_sum, wait_metric, ServerProcess};
use voxgate_proto::bridge::{downlink, Attach, AudioMode, ChannelDownlink, Clear, Downlink};
use voxgate_testkit::{Fleet, SessionConfig};

fn caller(server: &ServerProcess, tone_hz: f32) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        tone_hz,
        amplitude: 0.3,
        send_for: Duration::from_secs(120),
        ..Default::default()
    }
}

fn text_message(text: &str) -> voxgate_proto::bridge::DataMessage {
    voxgate_proto::bridge::DataMessage {
        label: "oai-events".into(),
        payload: Some(voxgate_proto::bridge::data_message::Payload::Text(
            text.into(),
        )),
    }
}

fn mux_worker(server: &ServerProcess, id: &str, capacity: u32) -> TestWorker {
    TestWorker::start_over(
        &server.grpc_url,
        id,
        capacity,
        48_000,
        AudioMode::Pcm,
        Transport::Multiplex,
    )
}

fn attach(session_id: &str, sample_rate_hz: u32) -> Attach {
    Attach {
        session_id: session_id.to_string(),
        sample_rate_hz,
        ..Default::default()
    }
}

/// Waits until `worker`'s log of `id` holds a `closed`; returns its code.
/// Opens a call and waits until `worker` owns it (its only call so far); returns the session id.
fn first_call_of(
    fleet: &mut Fleet,
    server: &ServerProcess,
    worker: &TestWorker,
    tone_hz: f32,
) -> String {
    let i = fleet.open(caller(server, tone_hz)).unwrap();
    assert!(drive_until(fleet, Duration::from_secs(10), || worker
        .attached()
        .len()
        == 1));
    fleet.report(i).session_id
}

fn closed_code(fleet: &mut Fleet, worker: &TestWorker, id: &str) -> i32 {
    assert!(
        drive_until(fleet, Duration::from_secs(5), || worker
            .session(id)
            .is_some_and(|l| l.closed.is_some())),
        "no closed for {id}"
    );
    worker.session(id).unwrap().closed.unwrap().0
}

#[test]
fn a_failed_attach_closes_only_its_channel_with_the_status_a_session_call_gets() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let owner = mux_worker(&server, "owner", 1);
    let mut fleet = Fleet::new().unwrap();
    let id = first_call_of(&mut fleet, &server, &owner, 500.0);
    let other = mux_worker(&server, "other", 1);
    let unknown = "0123456789abcdef0123456789abcdef";
    let bad_rate = "00000000000000000000000000000001";
    other.attach_channel(attach("not-an-id", 0));
    other.attach_channel(attach(unknown, 0));
    other.attach_channel(attach(bad_rate, 44_100));
    other.attach_channel(attach(&id, 0));
    let code = |id: &str, fleet: &mut Fleet| closed_code(fleet, &other, id);
    assert_eq!(code("not-an-id", &mut fleet), tonic::Code::NotFound as i32);
    assert_eq!(code(unknown, &mut fleet), tonic::Code::NotFound as i32);
    assert_eq!(
        code(bad_rate, &mut fleet),
        tonic::Code::InvalidArgument as i32
    );
    assert_eq!(
        code(&id, &mut fleet),
        tonic::Code::FailedPrecondition as i32,
        "a session another backend owns cannot be taken"
    );
    // Messages for channels that are not open are dropped and counted; nothing else happens.
    for m in [
        ChannelDownlink {
            channel: 999,
            downlink: Some(Downlink {
                kind: Some(downlink::Kind::Clear(Clear {})),
            }),
            release: false,
        },
        ChannelDownlink {
            channel: 1000,
            downlink: None,
            release: true,
        },
    ] {
        other.send_raw(m);
    }
    wait_metric(
        &server,
        "voxgate_multiplex_dropped_total",
        &["reason=\"unknown_channel\""],
        2,
    );
    // The owner's channel never noticed: its audio is still flowing, gap-free.
    let before = owner.session(&id).unwrap().frames.len();
    fleet.run_for(Duration::from_secs(1));
    let log = owner.session(&id).unwrap();
    assert!(
        log.frames.len() >= before + 40,
        "{before} → {}",
        log.frames.len()
    );
    assert!(log.closed.is_none());
    for w in log.frames.windows(2) {
        assert_eq!(w[1].0, w[0].0 + 1);
    }
}

#[test]
fn a_released_channel_and_a_dropped_stream_hand_their_sessions_to_another_worker() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let mut a = mux_worker(&server, "a", 2);
    let mut fleet = Fleet::new().unwrap();
    let first = fleet.open(caller(&server, 400.0)).unwrap();
    let second = fleet.open(caller(&server, 600.0)).unwrap();
    assert!(drive_until(&mut fleet, Duration::from_secs(10), || a
        .attached()
        .len()
        == 2));
    let (id0, id1) = (
        fleet.report(first).session_id,
        fleet.report(second).session_id,
    );
    let b = TestWorker::start(&server.grpc_url, "b", 4, 48_000);
    a.release(&id0);
    assert_eq!(closed_code(&mut fleet, &a, &id0), 0, "released: closed OK");
    assert!(drive_until(&mut fleet, Duration::from_secs(5), || b
        .session(&id0)
        .is_some_and(|l| l.frames.len() > 10)));
    assert_eq!(b.session(&id0).unwrap().attempt, 2);
    assert!(a.attached().contains(&id1), "the other channel stays");
    // The whole stream goes (the process died): its last session moves too.
    a.kill();
    assert!(drive_until(&mut fleet, Duration::from_secs(5), || b
        .session(&id1)
        .is_some_and(|l| l.frames.len() > 10)));
    assert_eq!(b.session(&id1).unwrap().attempt, 2);
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(metric_sum(&text, "voxgate_multiplex_streams", &[]), 0);
}

#[test]
fn a_stream_that_stops_reading_loses_its_frames_then_its_channels_and_nobody_else_loses_any() {
    let server = ServerProcess::start(&["--loops", "1", "--backend-stall-secs", "2"]);
    let a = mux_worker(&server, "a", 2);
    let mut fleet = Fleet::new().unwrap();
    for hz in [400.0, 500.0] {
        fleet.open(caller(&server, hz)).unwrap();
    }
    assert!(drive_until(&mut fleet, Duration::from_secs(10), || a
        .attached()
        .len()
        == 2));
    let b = TestWorker::start(&server.grpc_url, "b", 4, 48_000);
    let healthy = first_call_of(&mut fleet, &server, &b, 700.0);
    let stalled: Vec<String> = a.attached();
    a.stall(&stalled[0]);
    // The stream's queue fills (2 s of both channels' frames), then stays full past the stall
    // time: both channels are dropped and their sessions go to the worker with room.
    assert!(
        drive_until(&mut fleet, Duration::from_secs(15), || stalled
            .iter()
            .all(|id| b.session(id).is_some_and(|l| l.frames.len() > 10))),
        "{}",
        server.log_tail(20)
    );
    for id in &stalled {
        assert_eq!(b.session(id).unwrap().attempt, 2);
        let snap = http_get(&server.url(&format!("/v1/sessions/{id}")), None).json();
        assert!(
            snap["bridge"]["uplink_dropped"].as_u64().unwrap() > 0,
            "{snap}"
        );
    }
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(metric_sum(&text, "voxgate_backend_stalls_total", &[]), 2);
    // The stalled backend, reading again, learns why: RESOURCE_EXHAUSTED on both channels.
    a.resume();
    for id in &stalled {
        assert_eq!(
            closed_code(&mut fleet, &a, id),
            tonic::Code::ResourceExhausted as i32
        );
    }
    // The neighbour on its own stream lost nothing.
    let log = b.session(&healthy).unwrap();
    for w in log.frames.windows(2) {
        assert_eq!(w[1].0, w[0].0 + 1, "healthy session: gap");
    }
    let snap = http_get(&server.url(&format!("/v1/sessions/{healthy}")), None).json();
    assert_eq!(snap["bridge"]["uplink_dropped"], 0);
}

#[test]
fn a_long_answer_sent_at_once_is_played_whole_and_a_flood_loses_only_its_excess() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let w = mux_worker(&server, "w", 2);
    let mut fleet = Fleet::new().unwrap();
    let flooded = fleet.open(caller(&server, 400.0)).unwrap();
    let answered = fleet.open(caller(&server, 500.0)).unwrap();
    assert!(drive_until(&mut fleet, Duration::from_secs(10), || w
        .attached()
        .len()
        == 2));
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    let (fid, aid) = (
        fleet.report(flooded).session_id,
        fleet.report(answered).session_id,
    );
    let chunk = |ms: usize| voxgate_proto::bridge::AudioChunk {
        pcm: vec![0x10; 48 * ms * 2].into(),
        item_id: "answer".into(),
    };
    // A text-to-speech answer of 10 s in 100 chunks at once, more than a session's queue takes
    // between two frames: the rest waits on the stream, nothing is lost, playout is paced.
    let answer_sent = Instant::now();
    for _ in 0..100 {
        w.send(&aid, downlink::Kind::Audio(chunk(100)));
    }
    fleet.run_for(Duration::from_secs(2));
    let heard = fleet.report(answered).audio_packets_received;
    assert!((90..=110).contains(&heard), "{heard} packets in 2 s");
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(metric_sum(&text, "voxgate_multiplex_dropped_total", &[]), 0);
    // A runaway backend: 120 s at once. The session holds 30 s and its queue 64 chunks, 4 MB
    // (about 43 s) waits, the rest is dropped and counted: at least 1200 - 300 - 64 - 437,
    // less what played meanwhile.
    for _ in 0..1200 {
        w.send(&fid, downlink::Kind::Audio(chunk(100)));
    }
    // The stream's messages are handled in order: once a message sent after the flood reaches
    // the other caller, every chunk of the flood was taken or dropped, however long that took
    // on a busy machine. (A message on the flooded channel itself would wait behind its audio.)
    w.send(&aid, downlink::Kind::Data(text_message("flood sent")));
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(20), |f| f
            .session(answered)
            .channel_messages()
            .iter()
            .any(|m| m.contains("flood sent"))),
        "the message after the flood never arrived"
    );
    let text = http_get(&server.url("/metrics"), None).body;
    let dropped = metric_sum(&text, "voxgate_multiplex_dropped_total", &[]);
    let played_chunks = fleet.report(flooded).audio_packets_received / 5;
    assert!(
        (350u64.saturating_sub(played_chunks)..=900).contains(&dropped),
        "{dropped} chunks dropped, {played_chunks} played"
    );
    // Its barge-in still gets through at once, and drops the waiting audio with the queued.
    // (The fleet first reads what came during the metrics request, so every arrival it times
    // after the clear was sent after it.)
    fleet.run_for(Duration::from_millis(100));
    let cleared_at = w.clear(&fid);
    fleet.run_for(Duration::from_millis(500));
    let last = *fleet
        .session(flooded)
        .arrival_times()
        .last()
        .expect("audio");
    assert!(
        last.saturating_duration_since(cleared_at) <= Duration::from_millis(40),
        "audio kept coming {:?} after clear",
        last.saturating_duration_since(cleared_at)
    );
    let log = w.session(&fid).unwrap();
    let (cleared, _) = log.cleared.last().expect("Cleared answer").clone();
    assert!(cleared.dropped_ms >= 25_000, "{cleared:?}");
    assert!(log.closed.is_none(), "a flood does not close the channel");
    fleet.run_for(Duration::from_secs(1));
    assert_eq!(
        fleet.session(flooded).arrival_times().last().copied(),
        Some(last),
        "nothing plays after the clear"
    );
    // The answer on the other channel (10 s) kept its pace through all of it: a packet every
    // 20 ms since it was sent, less the first packet's way and a little scheduling slack.
    let due = (answer_sent.elapsed().as_millis() / 20).min(500) as u64;
    let heard = fleet.report(answered).audio_packets_received;
    assert!(heard + 10 >= due, "{heard} packets where {due} were due");
}

/// Opens a call per tone, all to `worker`'s one stream, and waits until each is attached and
/// its data channel open; returns the callers' indices and their session ids.
fn calls_on_one_stream(
    fleet: &mut Fleet,
    server: &ServerProcess,
    worker: &TestWorker,
    tones: &[f32],
) -> (Vec<usize>, Vec<String>) {
    let callers: Vec<usize> = tones
        .iter()
        .map(|&hz| fleet.open(caller(server, hz)).unwrap())
        .collect();
    assert!(drive_until(fleet, Duration::from_secs(10), || worker
        .attached()
        .len()
        == tones.len()));
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| callers
            .iter()
            .all(|&i| f.session(i).channel_open()))
    );
    let ids = callers
        .iter()
        .map(|&i| fleet.report(i).session_id)
        .collect();
    (callers, ids)
}

/// The largest gap between consecutive instants, and how many there are.
fn largest_gap(times: &[Instant]) -> (Duration, usize) {
    let gap = times
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .max()
        .unwrap_or_default();
    (gap, times.len())
}

#[test]
fn an_oversized_message_is_dropped_for_its_channel_and_every_call_on_the_stream_keeps_its_media() {
    // Issue 37: a caller's 60 KB text of control characters came back from the echo bot as a
    // 360,051-byte data message (JSON escaping grew it), and the transceiver ended the bot's
    // whole Multiplex stream: every call on it.
    let server = ServerProcess::start(&["--loops", "1"]);
    let w = mux_worker(&server, "bot", 3);
    let mut fleet = Fleet::new().unwrap();
    let (callers, ids) = calls_on_one_stream(&mut fleet, &server, &w, &[400.0, 500.0, 600.0]);
    let (attacked, answered) = (&ids[0], &ids[1]);
    // The answered neighbour hears a 10 s answer, paced out while the attack goes on.
    let chunk = voxgate_proto::bridge::AudioChunk {
        pcm: vec![0x10; 48 * 100 * 2].into(),
        item_id: "answer".into(),
    };
    let answer_sent = Instant::now();
    for _ in 0..100 {
        w.send(answered, downlink::Kind::Audio(chunk.clone()));
    }
    fleet.run_for(Duration::from_millis(500));
    let rss_before = rss_kib(server.pid());
    let attack_at = Instant::now();
    // The echo of issue 37 (each escaped control character is six bytes of JSON), ten times,
    // and an audio chunk past the limit.
    let echoed = format!("{{\"echo\":\"{}\"}}", "\\u0001".repeat(60_000));
    for _ in 0..10 {
        w.send_unweighed(attacked, downlink::Kind::Data(text_message(&echoed)));
    }
    w.send_unweighed(
        attacked,
        downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
            pcm: vec![0u8; 300 * 1024].into(),
            item_id: String::new(),
        }),
    );
    // The attacked call itself goes on: a message after the attack reaches its caller.
    w.send(
        attacked,
        downlink::Kind::Data(text_message("after the attack")),
    );
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .session(callers[0])
            .channel_messages()
            .iter()
            .any(|m| m.contains("after the attack"))),
        "the attacked channel is gone\n{}",
        server.log_tail(20)
    );
    fleet.run_for(Duration::from_secs(3));
    let text = http_get(&server.url("/metrics"), None).body;
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_multiplex_dropped_total",
            &["reason=\"too_large\""]
        ),
        11,
        "each oversized message is dropped and counted"
    );
    let rss_after = rss_kib(server.pid());
    eprintln!("RSS {rss_before} -> {rss_after} KiB");
    assert!(
        rss_after <= rss_before + 16 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    assert_eq!(metric_sum(&text, "voxgate_multiplex_streams", &[]), 1);
    assert_eq!(metric_sum(&text, "voxgate_sessions_ended_total", &[]), 0);
    assert!(!server.log_tail(200).contains("multiplex stream ended"));
    // Every call on the stream kept its uplink: gap-free sequences, at the frame pace, with no
    // stall of the stream (the largest gap between two arrivals at the backend is measured).
    for id in &ids {
        let log = w.session(id).unwrap();
        assert!(log.closed.is_none() && !log.ended, "{id}: {log:?}");
        assert_eq!(log.attempt, 1, "{id} was never dispatched again");
        for f in log.frames.windows(2) {
            assert_eq!(f[1].0, f[0].0 + 1, "{id}: a frame is missing");
        }
        let since: Vec<Instant> = log
            .frames
            .iter()
            .map(|f| f.2)
            .filter(|t| *t >= attack_at)
            .collect();
        let (gap, n) = largest_gap(&since);
        let due = (attack_at.elapsed().as_millis() / 20) as usize;
        eprintln!("{id}: {n} uplink frames of {due} due since the attack, largest gap {gap:?}");
        assert!(n + 25 >= due, "{id}: {n} frames where {due} were due");
        assert!(gap <= Duration::from_millis(300), "{id}: a {gap:?} gap");
    }
    // The answer kept its pace at its caller: a packet every 20 ms since it was sent.
    let due = (answer_sent.elapsed().as_millis() / 20).min(500) as u64;
    let heard = fleet.report(callers[1]).audio_packets_received;
    let arrivals: Vec<Instant> = fleet
        .session(callers[1])
        .arrival_times()
        .iter()
        .copied()
        .filter(|t| *t >= attack_at)
        .collect();
    let (gap, n) = largest_gap(&arrivals);
    eprintln!("answer: {heard} packets of {due} due, {n} since the attack, largest gap {gap:?}");
    assert!(heard + 10 >= due, "{heard} packets where {due} were due");
    assert!(
        gap <= Duration::from_millis(300),
        "a {gap:?} gap in the answer"
    );
}

#[test]
fn a_callers_large_data_messages_never_make_an_uplink_batch_its_backend_refuses() {
    // The mirror of issue 37's attack: a caller's data-channel messages (up to 256 KiB each)
    // queued for a backend that read slowly used to leave in one batch, past the 4 MiB a gRPC
    // client takes, and the backend's client ended the stream with every call on it.
    let server = ServerProcess::start(&["--loops", "1", "--backend-stall-secs", "30"]);
    let w = mux_worker(&server, "bot", 2);
    let mut fleet = Fleet::new().unwrap();
    let (callers, ids) = calls_on_one_stream(&mut fleet, &server, &w, &[400.0, 500.0]);
    let (sender, neighbour) = (ids[0].clone(), ids[1].clone());
    w.stall(&sender);
    // 40 of 120 KB (the test client buffers 128 KiB): 4.8 MB.
    let text = "x".repeat(120_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    while sent < 40 {
        // The caller's SCTP send buffer holds a few: wait for room as a browser would.
        match fleet.send_channel_text(callers[0], &text) {
            Ok(()) => sent += 1,
            Err(e) => {
                assert!(Instant::now() < deadline, "{sent} sent: {e}");
                fleet.run_for(Duration::from_millis(20));
            }
        }
    }
    // The transceiver queues them all for the stalled backend.
    let location = fleet.report(callers[0]).location;
    let queued = |server: &ServerProcess| {
        let snap = http_get(&server.url(&location), None).json();
        snap["counters"]["channel_messages_in"]
            .as_u64()
            .unwrap_or(0)
    };
    assert!(
        drive_until(&mut fleet, Duration::from_secs(30), || queued(&server)
            >= 40),
        "the caller's messages did not all arrive: {}",
        queued(&server)
    );
    w.resume();
    assert!(
        drive_until(&mut fleet, Duration::from_secs(10), || w
            .session(&sender)
            .is_some_and(|l| l.data.len() == 40)),
        "{:?}\n{}",
        w.session(&sender)
            .map(|l| (l.data.len(), l.ended, l.closed)),
        server.log_tail(20)
    );
    let before = w.session(&neighbour).unwrap().frames.len();
    fleet.run_for(Duration::from_secs(1));
    for id in [&sender, &neighbour] {
        let log = w.session(id).unwrap();
        assert!(!log.ended && log.closed.is_none(), "{id}: the stream broke");
    }
    let after = w.session(&neighbour).unwrap().frames.len();
    assert!(
        after >= before + 40,
        "the neighbour's frames: {before} → {after}"
    );
}

#[test]
fn a_batch_over_the_decoding_limit_ends_only_its_stream_and_its_sessions_go_to_another_worker() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let a = mux_worker(&server, "a", 1);
    let mut fleet = Fleet::new().unwrap();
    let id = first_call_of(&mut fleet, &server, &a, 450.0);
    let b = TestWorker::start(&server.grpc_url, "b", 2, 48_000);
    let neighbour = first_call_of(&mut fleet, &server, &b, 650.0);
    // One gRPC message past the transceiver's 4 MiB decoding limit (a batch no backend sizes
    // so): a broken backend, not a slow one.
    a.send_raw(ChannelDownlink {
        channel: 1,
        downlink: Some(Downlink {
            kind: Some(downlink::Kind::Audio(voxgate_proto::bridge::AudioChunk {
                pcm: vec![0u8; 5 << 20].into(),
                item_id: String::new(),
            })),
        }),
        release: false,
    });
    // The stream ends with every channel on it; the session goes to the worker with room.
    assert!(
        drive_until(&mut fleet, Duration::from_secs(10), || b
            .session(&id)
            .is_some_and(|l| l.frames.len() > 10)),
        "{}",
        server.log_tail(20)
    );
    assert_eq!(b.session(&id).unwrap().attempt, 2);
    assert!(a.session(&id).unwrap().ended);
    assert!(server.log_tail(200).contains("multiplex stream ended"));
    // The other backend's own session never noticed.
    let log = b.session(&neighbour).unwrap();
    for w in log.frames.windows(2) {
        assert_eq!(w[1].0, w[0].0 + 1);
    }
}

#[test]
fn attaches_past_the_in_flight_limit_are_refused_and_the_stream_goes_on() {
    use voxgate_proto::bridge::bridge_client::BridgeClient;
    use voxgate_proto::bridge::MultiplexDownlink;
    let server = ServerProcess::start(&["--loops", "1"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = BridgeClient::connect(server.grpc_url.clone())
            .await
            .unwrap();
        let attach_msg = |channel: u64| ChannelDownlink {
            channel,
            downlink: Some(Downlink {
                kind: Some(downlink::Kind::Attach(attach(
                    &format!("{channel:032x}"),
                    0,
                ))),
            }),
            release: false,
        };
        // 300 attaches in one message: the transceiver takes 256 at once and refuses the rest.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(MultiplexDownlink {
            messages: (1..=300).map(attach_msg).collect(),
        })
        .await
        .unwrap();
        let mut up = client
            .multiplex(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let mut codes = std::collections::HashMap::new();
        while codes.len() < 300 {
            let batch = up.message().await.unwrap().expect("the stream goes on");
            for m in batch.messages {
                let closed = m.closed.expect("only closes: no such sessions");
                codes.insert(m.channel, closed.code);
            }
        }
        let exhausted = codes
            .values()
            .filter(|c| **c == tonic::Code::ResourceExhausted as i32)
            .count();
        assert_eq!(exhausted, 300 - 256);
        assert!(codes
            .values()
            .all(|c| *c == tonic::Code::NotFound as i32
                || *c == tonic::Code::ResourceExhausted as i32));
        // Once those attaches are over, the stream takes attaches again (their answers can
        // reach us a moment before the stream's own count of them goes down).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut channel = 300;
        loop {
            channel += 1;
            tx.send(MultiplexDownlink {
                messages: vec![attach_msg(channel)],
            })
            .await
            .unwrap();
            let batch = up.message().await.unwrap().unwrap();
            assert_eq!(batch.messages[0].channel, channel);
            let code = batch.messages[0].closed.as_ref().unwrap().code;
            if code == tonic::Code::NotFound as i32 {
                break;
            }
            assert_eq!(code, tonic::Code::ResourceExhausted as i32);
            assert!(std::time::Instant::now() < deadline, "still refused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
