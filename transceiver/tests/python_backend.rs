//! The Python example backend (`examples/recorder/recorder.py`, on the voxgate SDK of
//! sdk/python, whose stubs are generated from proto/grpc/voxgate.proto) records a real caller's
//! audio to a WAV that matches what was sent: proof the bridge API is usable outside Rust.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{repo_root, ServerProcess};
use voxgate_testkit::signal::dominant_frequency;
use voxgate_testkit::{Fleet, SessionConfig};

/// Reads a mono 16-bit PCM WAV (the canonical 44-byte header the recorder writes).
fn read_wav(path: &std::path::Path) -> (u32, Vec<i16>) {
    let bytes = std::fs::read(path).expect("read wav");
    assert_eq!(&bytes[0..4], b"RIFF");
    assert_eq!(&bytes[8..12], b"WAVE");
    let rate = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
    let channels = u16::from_le_bytes(bytes[22..24].try_into().unwrap());
    let bits = u16::from_le_bytes(bytes[34..36].try_into().unwrap());
    assert_eq!((channels, bits), (1, 16));
    let data = bytes
        .windows(4)
        .position(|w| w == b"data")
        .expect("data chunk")
        + 8;
    let pcm = bytes[data..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    (rate, pcm)
}

#[test]
fn python_recorder_writes_a_wav_matching_the_callers_tone() {
    let python = repo_root().join(".venv/bin/python");
    assert!(python.exists(), "run scripts/setup first (.venv missing)");
    let server = ServerProcess::start(&["--loops", "1"]);
    let out_dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("recorder-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let grpc = server.grpc_url.trim_start_matches("http://").to_string();
    let mut recorder = Command::new(&python)
        .arg(repo_root().join("examples/recorder/recorder.py"))
        .args([
            "--target",
            &grpc,
            "--worker-id",
            "py-recorder",
            "--capacity",
            "4",
        ])
        .args([
            "--sample-rate",
            "16000",
            "--max-sessions",
            "1",
            "--timeout",
            "60",
        ])
        .arg("--out-dir")
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the recorder");
    // Wait for its registration before the caller arrives.
    let stderr = recorder.stderr.take().unwrap();
    let (reg_tx, reg_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("recorder: {line}");
            if line.contains("registered") {
                let _ = reg_tx.send(());
            }
        }
    });
    reg_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the recorder registered as a worker");

    let mut fleet = Fleet::new().unwrap();
    let i = fleet
        .open(SessionConfig {
            base_url: server.signal_url.clone(),
            tone_hz: 660.0,
            send_for: Duration::from_secs(30),
            ..Default::default()
        })
        .unwrap();
    assert!(
        fleet.run_until(Instant::now() + Duration::from_secs(10), |f| f
            .all_connected())
    );
    fleet.run_for(Duration::from_secs(3));
    let snap = fleet.server_state(i).unwrap();
    assert_eq!(snap["backend_attached"], true, "{snap}");
    let frames_at_server = || {
        fleet.server_state(i).unwrap()["bridge"]["uplink_frames"]
            .as_u64()
            .unwrap()
    };
    let sent_frames = frames_at_server();
    fleet.delete(i).unwrap();

    let stdout = recorder.stdout.take().unwrap();
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with('{'))
        .expect("the recorder reports the session");
    let status = recorder.wait().unwrap();
    assert!(status.success(), "recorder exit {status:?}");
    let report: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(report["session_id"], fleet.report(i).session_id);
    let (rate, pcm) = read_wav(std::path::Path::new(report["path"].as_str().unwrap()));
    assert_eq!(rate, 16_000);
    let frames = report["frames"].as_u64().unwrap();
    assert!(
        frames >= sent_frames && frames >= 140,
        "recorder wrote {frames} frames, the server had sent {sent_frames}"
    );
    assert_eq!(pcm.len() as u64, frames * 320, "20 ms at 16 kHz per frame");
    let hz = dominant_frequency(&pcm[3_200..], 16_000);
    assert!(
        (hz - 660.0).abs() <= 10.0,
        "the WAV holds {hz} Hz, the caller sent 660 Hz"
    );
}
