//! A call record with both legs: `examples/recorder/recorder.py` (on the Python SDK) taps a
//! real call beside the backend that owns it and writes a stereo WAV (caller left, agent right)
//! and a JSON timeline. The test decodes the WAV and checks each leg's tone, where the agent's
//! reply starts against where the caller stopped (measured independently, by the caller's own
//! clock), that the clear cut the reply where the timeline says, and the timeline's events.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::backend::{tone, TestWorker};
use support::{repo_root, ServerProcess};
use voxgate_testkit::signal::dominant_frequency;
use voxgate_testkit::{Fleet, SessionConfig};

const RATE: u32 = 48_000;
/// Louder than anything but the tones (both about -11 dBFS, peaks near 9,000).
const LOUD: i16 = 2_000;

/// A 16-bit stereo WAV's rate and its two channels.
fn read_stereo_wav(path: &std::path::Path) -> (u32, Vec<i16>, Vec<i16>) {
    let bytes = std::fs::read(path).expect("read wav");
    assert_eq!(&bytes[0..4], b"RIFF");
    assert_eq!(&bytes[8..12], b"WAVE");
    let channels = u16::from_le_bytes(bytes[22..24].try_into().unwrap());
    let rate = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    let bits = u16::from_le_bytes(bytes[34..36].try_into().unwrap());
    assert_eq!((channels, bits), (2, 16));
    let data = bytes.windows(4).position(|w| w == b"data").unwrap() + 8;
    let samples: Vec<i16> = bytes[data..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let left = samples.iter().step_by(2).copied().collect();
    let right = samples.iter().skip(1).step_by(2).copied().collect();
    (rate, left, right)
}

/// First and one-past-last index of the loud stretch.
fn loud_span(pcm: &[i16]) -> (usize, usize) {
    let first = pcm.iter().position(|s| s.abs() > LOUD).expect("a tone");
    let last = pcm.iter().rposition(|s| s.abs() > LOUD).unwrap();
    (first, last + 1)
}

fn secs(samples: usize) -> f64 {
    samples as f64 / f64::from(RATE)
}

#[test]
fn the_recorder_writes_both_legs_aligned_and_the_calls_timeline() {
    let python = repo_root().join(".venv/bin/python");
    assert!(python.exists(), "run scripts/setup first (.venv missing)");
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "agent", 4, RATE);
    let out_dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("call-record-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();

    // The recorder first, waiting for session ids on stdin, so it taps as soon as the call
    // exists (before the caller stops talking).
    let grpc = server.grpc_url.trim_start_matches("http://").to_string();
    let mut recorder = Command::new(&python)
        .arg(repo_root().join("examples/recorder/recorder.py"))
        .args(["--target", &grpc, "--timeout", "90", "--out-dir"])
        .arg(&out_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the recorder");
    let stderr = recorder.stderr.take().unwrap();
    let (said_tx, said) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("recorder: {line}");
            let _ = said_tx.send(line);
        }
    });
    let wait_for = |what: &str, fleet: Option<&mut Fleet>| {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut fleet = fleet;
        while Instant::now() < deadline {
            if let Some(f) = fleet.as_deref_mut() {
                f.run_for(Duration::from_millis(10));
            }
            while let Ok(line) = said.try_recv() {
                if line.contains(what) {
                    return;
                }
            }
            if fleet.is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("the recorder never said {what:?}");
    };
    wait_for("reading session ids", None);

    // The caller talks for 3 s from the moment media flows.
    let send_for = Duration::from_secs(3);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            base_url: server.signal_url.clone(),
            tone_hz: 440.0,
            send_for,
            ..Default::default()
        })
        .unwrap();
    let id = fleet.report(i).session_id;
    let mut stdin = recorder.stdin.take().unwrap();
    writeln!(stdin, "{id}").unwrap();
    drop(stdin); // one call: the recorder exits when it ends
    wait_for("tapping", Some(&mut fleet));
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected()
            && f.report(i).t_first_audio_sent.is_some())
    );
    let until = |fleet: &Fleet| fleet.report(i).t_first_audio_sent.unwrap() + send_for;
    // The caller's tone ends; 300 ms later the agent answers, and is cut 800 ms in.
    let start = Instant::now() - fleet.report(i).t_first_audio_sent.unwrap();
    fleet.run_until(start + until(&fleet) + Duration::from_millis(300), |_| {
        false
    });
    assert!(worker.attached().contains(&id), "the agent owns the call");
    worker.play(&id, &tone(660.0, 2.0, RATE), "reply");
    fleet.run_for(Duration::from_millis(800));
    worker.clear(&id);
    // Past 5 s of call, for a quality sample in the timeline.
    fleet.run_for(Duration::from_millis(2_500));
    let report = fleet.report(i);
    fleet.delete(i).unwrap();

    let stdout = recorder.stdout.take().unwrap();
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with('{'))
        .expect("the recorder reports the call");
    let status = recorder.wait().unwrap();
    assert!(status.success(), "recorder exit {status:?}");
    let summary: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(summary["session_id"], id.as_str());
    assert_eq!(summary["reason"], "deleted");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(summary["timeline"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let (rate, left, right) =
        read_stereo_wav(std::path::Path::new(summary["wav"].as_str().unwrap()));
    assert_eq!(rate, RATE);

    // Each leg holds its own tone and nothing of the other's.
    let (l_start, l_end) = loud_span(&left);
    let (r_start, r_end) = loud_span(&right);
    let hz = |pcm: &[i16]| dominant_frequency(pcm, RATE);
    assert!(
        (hz(&left[l_start..l_end]) - 440.0).abs() <= 10.0,
        "caller leg"
    );
    assert!(
        (hz(&right[r_start..r_end]) - 660.0).abs() <= 10.0,
        "agent leg"
    );
    assert!(right[..r_start].iter().all(|s| s.abs() <= LOUD));
    assert!(left[l_end..].iter().all(|s| s.abs() <= LOUD));

    // Where the reply starts after the caller stopped, in the WAV and by the caller's clock:
    // its last frame left at (first + send_for - 20 ms), the reply's first packet reached it
    // at t_first_audio_received. Over loopback the two differ by the transit both ways and
    // the loops' scheduling (a few ms on a busy 2-core machine); a placement error is a
    // frame (20 ms) or more.
    let heard = report
        .t_first_audio_received
        .expect("the caller heard the reply");
    let last_sent = report.t_first_audio_sent.unwrap() + send_for - Duration::from_millis(20);
    let truth = heard.as_secs_f64() - last_sent.as_secs_f64();
    let in_wav = secs(r_start) - secs(l_end);
    eprintln!(
        "reply after the caller stopped: {in_wav:.4} s in the WAV, {truth:.4} s by the caller; \
         caller leg {:.3}-{:.3} s, agent leg {:.3}-{:.3} s",
        secs(l_start),
        secs(l_end),
        secs(r_start),
        secs(r_end)
    );
    assert!(
        (in_wav - truth).abs() <= 0.015,
        "reply starts {in_wav:.4} s after the caller stopped in the WAV, {truth:.4} s by the caller"
    );

    // The clear: where the timeline puts it is where the agent's audio stops, after exactly
    // what it says was played.
    let timeline = record["timeline"].as_array().unwrap();
    let of = |event: &str| -> Vec<&serde_json::Value> {
        timeline.iter().filter(|e| e["event"] == event).collect()
    };
    let cleared = of("cleared");
    assert_eq!(cleared.len(), 1, "{timeline:?}");
    let played = cleared[0]["item_played_ms"].as_f64().unwrap() / 1000.0;
    assert_eq!(cleared[0]["item_id"], "reply");
    assert!((0.6..=1.0).contains(&played), "{played}");
    assert!((secs(r_end) - secs(r_start) - played).abs() <= 0.025);
    let t_clear = cleared[0]["t"].as_f64().unwrap();
    assert!(
        (t_clear - secs(r_end)).abs() <= 0.025,
        "clear at {t_clear}, audio ends {}",
        secs(r_end)
    );
    assert_eq!(record["agent_frames"].as_f64().unwrap(), played * 50.0);

    // The call's events, in order, on the WAV's time axis.
    let connected = of("connected");
    assert_eq!(connected.len(), 1);
    assert!(connected[0]["t"].as_f64().unwrap() <= secs(l_start) + 0.05);
    assert!(!of("quality").is_empty(), "a quality sample in a 6 s call");
    let ended = timeline.last().unwrap();
    assert_eq!(
        (ended["event"].as_str(), ended["reason"].as_str()),
        (Some("ended"), Some("deleted"))
    );
    let t_ended = ended["t"].as_f64().unwrap();
    assert!(t_ended >= t_clear);
    assert!(
        (secs(left.len()) - t_ended).abs() <= 0.001,
        "the record lasts as long as the call"
    );
    assert!(ended["quality"]["samples"].as_u64().unwrap() >= 1);
    assert_eq!(record["late_samples_dropped"], 0);
    assert_eq!(record["reanchored"]["caller"], 0);
}

/// A recorder that stops reading (a frozen process, a full disk) loses its own frames,
/// counted; the call it listens to keeps its pace both ways and its owner loses nothing.
#[test]
fn a_downlink_tap_that_never_reads_costs_only_its_own_frames() {
    use support::{snapshot, wait_metric};
    use voxgate_proto::bridge::bridge_client::BridgeClient;
    use voxgate_proto::bridge::TapRequest;
    let server = ServerProcess::start(&["--loops", "1"]);
    let worker = TestWorker::start(&server.grpc_url, "agent", 4, RATE);
    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            base_url: server.signal_url.clone(),
            send_for: Duration::from_secs(30),
            ..Default::default()
        })
        .unwrap();
    let id = fleet.report(i).session_id;
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(15), |f| f
            .all_connected()
            && worker.attached().contains(&id))
    );
    worker.play(&id, &tone(700.0, 20.0, RATE), "reply");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // Two stuck recorders: their streams stay open and are never read. Small HTTP/2 windows,
    // so the transceiver's queues fill in a second rather than after hyper's 2 MiB.
    let url = server.grpc_url.clone();
    let _stuck = rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .unwrap();
        let mut c = BridgeClient::new(channel);
        let mut taps = Vec::new();
        for _ in 0..2 {
            let req = TapRequest {
                session_id: id.clone(),
                downlink: true,
                ..Default::default()
            };
            taps.push(c.tap(req).await.unwrap().into_inner());
        }
        taps
    });
    fleet.run_for(Duration::from_millis(500));
    let frames_before = worker.session(&id).unwrap().frames.len();
    let heard_before = fleet.report(i).audio_packets_received;
    fleet.run_for(Duration::from_secs(4));
    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let heard = fleet.report(i).audio_packets_received - heard_before;
    // 4 s is 200 frames each way.
    assert!(frames >= 190, "the owner got {frames} caller frames in 4 s");
    assert!(heard >= 190, "the caller got {heard} agent packets in 4 s");
    let dropped = wait_metric(&server, "voxgate_bridge_tap_dropped_total", &[], 300);
    assert!(
        dropped >= 300,
        "the stuck taps' losses are counted: {dropped}"
    );
    let state = snapshot(&server, &id);
    assert_eq!(state["bridge"]["uplink_dropped"], 0, "{state}");
    assert_eq!(state["taps"], 2, "{state}");
}
