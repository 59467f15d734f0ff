//! A call resumes on another transceiver with its resume credential (docs/continuity.md),
//! against real transceivers (sharing `--resume-key-file`), real str0m callers (testkit) and a
//! real gRPC worker subscribed to each (support/backend.rs, deciding resumes by generation as
//! the Python SDK does); and every way a credential can be wrong is refused, counted, and
//! leaves the call it names and a neighbour's call alone.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::backend::{tone, TestWorker};
use support::probe::{gap_stats, playing_neighbour};
use support::{client_from, http_get, metric_sum, metrics, ServerProcess};
use voxgate_testkit::{Fleet, SessionConfig};
use voxgate_transceiver::auth::{Creator, ResumeClaims, ResumeKey};

/// A fresh resume key in a file the transceivers read (and the key, for the test to mint with).
fn key_file() -> (String, ResumeKey) {
    let (path, hex) = support::resume_key_file();
    (path, ResumeKey::from_file_contents(hex.as_bytes()).unwrap())
}

fn caller(server: &ServerProcess, token: Option<String>) -> SessionConfig {
    SessionConfig {
        base_url: server.signal_url.clone(),
        token,
        tone_hz: 440.0,
        amplitude: 0.3,
        send_for: Duration::from_secs(120),
        data_channel: true,
        ..Default::default()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn resume_outcomes(server: &ServerProcess, outcome: &str) -> u64 {
    let label = format!("outcome=\"{outcome}\"");
    metric_sum(&metrics(server), "voxgate_resume_total", &[&label])
}

/// A POST of `offer` to `server` with `credential` as the bearer: (status, body).
fn post_resume(server: &ServerProcess, credential: &str) -> (u16, String) {
    let r = support::http_post_sdp(
        &server.url("/v1/sessions"),
        support::AUDIO_OFFER,
        Some(credential),
    );
    (r.status, r.body)
}

#[test]
fn a_call_resumes_on_another_transceiver_after_the_first_is_killed() {
    let (key, _) = key_file();
    let args = ["--resume-key-file", key.as_str(), "--loops", "1"];
    let mut t1 = ServerProcess::start(&args);
    let t2 = ServerProcess::start(&args);
    let t3 = ServerProcess::start(&args);
    // One worker, subscribed to every transceiver (as a backend process of a fleet is).
    let w1 = TestWorker::start(&t1.grpc_url, "agent-1", 8, 48_000);
    let w2 = TestWorker::start_beside(&t2.grpc_url, &w1, 8, 48_000);
    let _w3 = TestWorker::start_beside(&t3.grpc_url, &w1, 8, 48_000);

    let mut fleet = Fleet::new().unwrap();
    let first = fleet.open(caller(&t1, None)).unwrap();
    let call_id = fleet.session(first).session_id().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    assert!(fleet.run_until(deadline, |f| {
        f.session(first).is_connected()
            && w1.session(&call_id).is_some_and(|l| l.frames.len() >= 25)
    }));
    let resource = fleet.resource(first).unwrap().clone();
    let minted = resource
        .resume_credential
        .clone()
        .expect("201 carries a credential");
    // The refresh, with the credential as the bearer: the worker now owns the call, and the
    // fresh credential names it.
    let refreshed = http_get(&format!("{}/resume", resource.url), Some(&minted));
    assert_eq!(refreshed.status, 200, "{}", refreshed.body);
    assert_eq!(
        refreshed.header("x-voxgate-resume-ttl").as_deref(),
        Some("120")
    );
    let credential = refreshed.body.trim().to_string();
    assert_ne!(credential, minted);
    // The credential reads its own call and nothing else.
    let other = fleet.open(caller(&t1, None)).unwrap();
    let other_url = fleet.resource(other).unwrap().url.to_string();
    assert_eq!(http_get(&other_url, Some(&credential)).status, 404);
    let own = http_get(resource.url.as_str(), Some(&credential));
    assert_eq!(own.status, 200);
    assert_eq!(own.json()["call_id"], call_id.as_str());
    assert_eq!(own.json()["generation"], 1);

    // The transceiver dies.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(t1.pid() as i32, libc::SIGKILL) };
    let _ = t1.stop();
    let lost_at = Instant::now();
    let resumed = fleet
        .open(caller(&t2, Some(credential.clone())))
        .expect("the resume is answered 201");
    let answered = lost_at.elapsed();
    let new_id = fleet.session(resumed).session_id().to_string();
    assert_ne!(new_id, call_id);
    let heard_before = fleet.report(resumed).audio_packets_received;
    let deadline = Instant::now() + Duration::from_secs(15);
    assert!(
        fleet.run_until(deadline, |f| f.session(resumed).is_connected()
            && w2.session(&new_id).is_some_and(|l| l.frames.len() >= 25)),
        "the resumed session carried no audio to the backend\n{}",
        t2.log_tail(40)
    );
    let uplink_resumed = lost_at.elapsed();
    // The backend was offered the same call, as a resume of generation 1, and took it.
    let log = w2.session(&new_id).unwrap();
    assert_eq!(log.call_id, call_id);
    let offer = log.resume.expect("Dispatch.resume");
    assert_eq!(
        (offer.call_id.as_str(), offer.generation),
        (call_id.as_str(), 1)
    );
    assert_eq!(offer.previous_session_id, call_id);
    // The backend's audio reaches the caller on the new session.
    w2.play(&new_id, &tone(600.0, 2.0, 48_000), "after-resume");
    let deadline = Instant::now() + Duration::from_secs(10);
    assert!(fleet.run_until(deadline, |f| {
        f.report(resumed).audio_packets_received >= heard_before + 50
    }));
    let new_resource = fleet.resource(resumed).unwrap().clone();
    let view = http_get(new_resource.url.as_str(), Some(&credential));
    assert_eq!(view.json()["call_id"], call_id.as_str());
    assert_eq!(view.json()["generation"], 2);

    // The same credential again: here, refused at once; on a third transceiver, by the
    // backend (it serves the call at generation 2 now). Neither touches the call.
    let (status, body) = post_resume(&t2, &credential);
    assert_eq!(status, 409, "{body}");
    let (status, body) = post_resume(&t3, &credential);
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("resumed with this credential already"),
        "{body}"
    );
    assert_eq!(resume_outcomes(&t2, "resumed"), 1);
    assert_eq!(resume_outcomes(&t2, "replayed"), 1);
    assert_eq!(resume_outcomes(&t3, "stale"), 1);
    let frames = w2.session(&new_id).unwrap().frames.len();
    fleet.run_for(Duration::from_millis(600));
    assert!(
        w2.session(&new_id).unwrap().frames.len() >= frames + 20,
        "the call stopped after the refused replays"
    );
    // The resumed session's credential resumes it in turn (generation 2 -> 3).
    let next = new_resource.resume_credential.expect("a new credential");
    let third = fleet
        .open(caller(&t3, Some(next)))
        .expect("a second resume");
    let third_id = fleet.session(third).session_id().to_string();
    eprintln!(
        "resume: killed t1, resume answered by t2 after {answered:?}, uplink flowing again \
         after {uplink_resumed:?}; replays refused 409 (t2 replayed, t3 stale); then resumed \
         again on t3 as {third_id}; declined offers {:?}",
        w1.declined()
    );
}

#[test]
fn wrong_credentials_are_refused_and_counted_and_the_neighbour_keeps_its_pace() {
    let (key_path, key) = key_file();
    // A low POST limit, so that the flood meets it: resumes are rate-limited as POSTs are.
    let server = ServerProcess::start(&[
        "--resume-key-file",
        key_path.as_str(),
        "--loops",
        "1",
        "--post-rate-per-ip",
        "5",
        "--post-burst-per-ip",
        "20",
    ]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 8, 48_000);
    let (mut neighbour, id) = playing_neighbour(&server, &worker);
    neighbour.drive_for(Duration::from_millis(500));

    let claims = |call_id: u128, expires_at: u64| ResumeClaims {
        call_id,
        generation: 1,
        session_id: call_id,
        worker: String::new(),
        creator: Creator::Anyone,
        expires_at,
    };
    let now = unix_now();
    let forged = ResumeKey::random().mint(&claims(7, now + 60));
    let expired = key.mint(&claims(7, now.saturating_sub(1)));
    let unknown_call = key.mint(&claims(rand::random(), now + 60));
    let junk = "vr1.bm90IGEgY3JlZGVudGlhbA.AAAA".to_string();
    let url = server.url("/v1/sessions");
    let frames_before = worker.session(&id).unwrap().frames.len();
    let arrivals_before = neighbour.rtp_arrivals.len();
    let wall = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let attack_start = wall();
    let started = Instant::now();
    // A hostile client from its own address: 40 rounds of four wrong credentials, as fast as
    // it can (past the POST rate limit, so some are 429).
    let statuses = std::thread::scope(|s| {
        let attacker = s.spawn(|| {
            let c = client_from("127.0.0.2");
            let mut seen: Vec<(&'static str, u16)> = Vec::new();
            for _ in 0..40 {
                for (what, cred) in [
                    ("forged", &forged),
                    ("expired", &expired),
                    ("unknown", &unknown_call),
                    ("junk", &junk),
                ] {
                    let r = c
                        .post(&url)
                        .header("content-type", "application/sdp")
                        .bearer_auth(cred)
                        .body(support::AUDIO_OFFER)
                        .send()
                        .unwrap();
                    seen.push((what, r.status().as_u16()));
                }
            }
            seen
        });
        neighbour.drive_for(Duration::from_secs(3));
        while !attacker.is_finished() {
            neighbour.drive_for(Duration::from_millis(100));
        }
        attacker.join().unwrap()
    });
    let attack_end = wall();
    let attack = started.elapsed();
    neighbour.drive_for(Duration::from_millis(300));
    let count = |what: &str, status: u16| {
        statuses
            .iter()
            .filter(|(w, s)| *w == what && *s == status)
            .count() as u64
    };
    // Every answer is the one its credential deserves: 401 for what does not verify; for a
    // genuine credential of a call no backend serves, 410 once, then 409 (it was used), or
    // 429 once the address is limited (auth comes first, so only what passed it is limited).
    for (what, status) in &statuses {
        let expected: &[u16] = match *what {
            "unknown" => &[410, 409, 429],
            _ => &[401],
        };
        assert!(expected.contains(status), "{what}: {status}");
    }
    assert_eq!(count("unknown", 410), 1, "{statuses:?}");
    assert!(
        count("unknown", 429) >= 10,
        "the flood met no rate limit: {statuses:?}"
    );
    assert_eq!(
        resume_outcomes(&server, "invalid"),
        count("forged", 401) + count("junk", 401)
    );
    assert_eq!(resume_outcomes(&server, "expired"), count("expired", 401));
    assert_eq!(resume_outcomes(&server, "unknown"), count("unknown", 410));
    assert_eq!(resume_outcomes(&server, "replayed"), count("unknown", 409));
    assert_eq!(resume_outcomes(&server, "refused"), count("unknown", 429));
    // A refused resume leaves no session behind: only the neighbour's lives (the loops
    // publish their gauges every few hundred ms).
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric_sum(&metrics(&server), "voxgate_sessions_active", &[]) != 1 {
        assert!(Instant::now() < deadline, "{}", metrics(&server));
        neighbour.drive_for(Duration::from_millis(100));
    }

    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let gaps: Vec<f64> = neighbour.rtp_arrivals[arrivals_before..]
        .windows(2)
        .filter(|w| w[1] >= attack_start + Duration::from_millis(100) && w[1] < attack_end)
        .map(|w| w[1].saturating_sub(w[0]).as_secs_f64() * 1000.0)
        .collect();
    let heard = gaps.len();
    let (median, p99, max) = gap_stats(gaps);
    eprintln!(
        "wrong credentials: {} POSTs in {attack:?} (unknown call: 410 {}, 409 {}, 429 {}); neighbour: {frames} uplink \
         frames, {heard} downlink packets, gaps median {median:.1} ms, p99 {p99:.1} ms, max \
         {max:.1} ms",
        statuses.len(),
        count("unknown", 410),
        count("unknown", 409),
        count("unknown", 429)
    );
    let expected = (attack.as_secs_f64().max(3.0) * 50.0) as usize;
    assert!(
        frames * 10 >= expected * 9,
        "{frames} of ~{expected} uplink frames"
    );
    assert!(
        heard * 10 >= expected * 9 - 100,
        "{heard} of ~{expected} downlink packets"
    );
    assert!(
        p99 < 60.0,
        "the neighbour's downlink stuttered: p99 gap {p99:.1} ms"
    );
}

#[test]
fn a_draining_transceiver_moves_its_calls_and_is_done_in_seconds() {
    let (key, _) = key_file();
    let mut t1 = ServerProcess::start(&[
        "--resume-key-file",
        key.as_str(),
        "--loops",
        "1",
        "--drain-timeout-secs",
        "60",
    ]);
    let t2 = ServerProcess::start(&["--resume-key-file", key.as_str(), "--loops", "1"]);
    // `VOXGATE_DRAIN_CALLS=50` measures issue 38's drain target (50 calls, done in ≤ 5 s).
    let calls: usize = std::env::var("VOXGATE_DRAIN_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let capacity = (calls as u32).max(16);
    let w1 = TestWorker::start(&t1.grpc_url, "agent-1", capacity, 48_000);
    let w2 = TestWorker::start_beside(&t2.grpc_url, &w1, capacity, 48_000);
    let mut fleet = Fleet::new().unwrap();
    let callers: Vec<usize> = (0..calls)
        .map(|_| {
            let cfg = SessionConfig {
                keep_messages: 16,
                ..caller(&t1, None)
            };
            fleet.open(cfg).unwrap()
        })
        .collect();
    let ids: Vec<String> = callers
        .iter()
        .map(|&i| fleet.session(i).session_id().to_string())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15 + calls as u64 / 5);
    assert!(fleet.run_until(deadline, |f| {
        callers.iter().all(|&i| f.session(i).channel_open())
            && ids
                .iter()
                .all(|id| w1.session(id).is_some_and(|l| l.frames.len() >= 10))
    }));

    // SIGTERM: a rolling deploy stops t1.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(t1.pid() as i32, libc::SIGTERM) };
    let drain_started = Instant::now();
    let migrate = r#"{"type":"session.migrate"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    assert!(
        fleet.run_until(deadline, |f| callers.iter().all(|&i| f
            .session(i)
            .channel_messages()
            .iter()
            .any(|m| m == migrate))),
        "not every caller was asked to move\n{}",
        t1.log_tail(30)
    );
    let asked = drain_started.elapsed();
    // Each caller resumes on t2 at once; the backend, once the call is its own there, hangs up
    // the session on t1 (what the Python SDK does, reason "resumed").
    let mut moved = Vec::new();
    for (&i, old) in callers.iter().zip(&ids) {
        let credential = fleet
            .resource(i)
            .unwrap()
            .resume_credential
            .clone()
            .unwrap();
        let j = fleet
            .open(caller(&t2, Some(credential)))
            .expect("resumed on t2");
        w1.send(
            old,
            voxgate_proto::bridge::downlink::Kind::Hangup(voxgate_proto::bridge::Hangup {
                reason: "resumed".into(),
            }),
        );
        moved.push((j, fleet.session(j).session_id().to_string()));
    }
    let exited = loop {
        fleet.run_for(Duration::from_millis(50));
        if !t1.is_running() {
            break drain_started.elapsed();
        }
        assert!(
            drain_started.elapsed() < Duration::from_secs(20),
            "t1 did not finish draining\n{}",
            t1.log_tail(30)
        );
    };
    let status = t1.stop().expect("t1 exited");
    assert!(status.success(), "t1 exited with {status:?}");
    // Every call goes on at t2, as the same call at the backend.
    let deadline = Instant::now() + Duration::from_secs(10);
    assert!(fleet.run_until(deadline, |_| {
        moved
            .iter()
            .all(|(_, id)| w2.session(id).is_some_and(|l| l.frames.len() >= 10))
    }));
    for ((_, new), old) in moved.iter().zip(&ids) {
        assert_eq!(&w2.session(new).unwrap().call_id, old);
    }
    eprintln!(
        "drain: {calls} calls asked to move after {asked:?}, all resumed on t2, t1 exited 0 \
         after {exited:?} (of a 60 s drain limit)"
    );
    assert!(
        exited < Duration::from_secs(10),
        "the drain took {exited:?}"
    );
}
