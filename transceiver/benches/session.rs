//! Where a packet's CPU goes inside one `Session`: a real transceiver session (str0m, SRTP,
//! the audio bridge and its queues) driven through one second of recorded audio with no
//! sockets, so kernel receive/send and gRPC are not in these figures (the whole-process cost
//! per packet is in docs/BENCHMARKS.md). `scripts/bench-session` runs this and prints the
//! per-packet medians; docs/SESSION_COST.md has the figures and what they say.
//!
//! One iteration is one second of audio: 50 packets of 20 ms (criterion's time is per second;
//! divide by 50 for a packet). Benchmarks, each its own row so the breakdown shows:
//!
//! - `uplink/passthrough`: the whole session, 50 recorded SRTP packets in (str0m: SRTP decrypt,
//!   RTP and jitter handling; the bridge: an Opus packet into the backend's bounded queue),
//!   plus the session's timers of that second (20 ms bridge ticks with nothing to play).
//! - `uplink/pcm`: the same with the bridge decoding Opus to 48 kHz PCM frames.
//! - `uplink/str0m_only`: the same second into a session without a backend: the bridge
//!   returns at once, so this is str0m plus the session's bookkeeping (and no bridge ticks).
//! - `uplink/bridge_passthrough`, `uplink/bridge_pcm`: the audio bridge alone, fed the same
//!   Opus packets without str0m: the hand-off (and the decode).
//! - `downlink/passthrough`: a second of backend Opus packets queued (as the gRPC side queues
//!   them), then the session's 20 ms ticks: poll the queue, write RTP, SRTP-encrypt, drain.
//! - `downlink/pcm`: a second of backend PCM, Opus-encoded by the session on each tick.
//! - `downlink/idle`: a session with a backend but nothing queued: the ticks and str0m timers
//!   alone, the floor under both directions.
//! - `downlink/bridge_passthrough`, `downlink/bridge_pcm`: the bridge's tick alone (pop, or
//!   encode) with no str0m.
//!
//! - `setup/accept`, `setup/handshake`: what a new session costs before media: the offer
//!   accepted (the server's part of the answer), and a whole in-memory set-up, both sides.
//!
//! Why a fresh session per iteration (`iter_batched`, setup untimed): SRTP replay protection
//! drops a packet a session has already seen, so a recorded second can be fed to a session only
//! once; recording more seconds up front would only move the same handshake cost elsewhere.
//! The setup (in-memory ICE + DTLS + data channel, then recording) costs milliseconds, so a
//! run takes several times its measurement time.

#[path = "support/session_rig.rs"]
mod session_rig;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use session_rig::{
    client_offer, opus_second, pcm_second, server_cert, Backend, Call, RecordedSecond, ENCODER,
    PACKETS_PER_SECOND,
};
use str0m::config::DtlsCert;
use voxgate_proto::bridge::AudioMode;
use voxgate_transceiver::media::audio_bridge::{AudioBridge, FRAME};
use voxgate_transceiver::media::session::SessionId;

const MODES: [(&str, AudioMode); 2] = [
    ("passthrough", AudioMode::OpusPassthrough),
    ("pcm", AudioMode::Pcm),
];

fn uplink(c: &mut Criterion) {
    let cert = server_cert();
    let mut g = c.benchmark_group("uplink");
    g.throughput(Throughput::Elements(PACKETS_PER_SECOND as u64));
    let sessions = MODES.map(|(name, mode)| (name, Some(mode)));
    for (name, mode) in sessions.into_iter().chain([("str0m_only", None)]) {
        g.bench_function(name, |b| {
            b.iter_batched(
                || recorded_call(&cert, mode),
                |(mut call, second)| {
                    let before = call.session.counters().audio_packets_in;
                    black_box(call.feed_uplink(&second));
                    // One compare per second of audio: the bench checks it measured real work.
                    let audio = call.session.counters().audio_packets_in - before;
                    assert_eq!(audio, PACKETS_PER_SECOND as u64, "audio packets taken");
                    call // dropped outside the timing
                },
                BatchSize::PerIteration,
            )
        });
    }
    let packets = opus_second();
    for (name, mode) in MODES {
        g.bench_function(format!("bridge_{name}"), |b| {
            b.iter_batched(
                || attached_bridge(mode),
                |(mut bridge, backend)| {
                    let arrival = Instant::now();
                    for (i, p) in packets.iter().enumerate() {
                        let ts = i as u32 * 960;
                        bridge.on_audio_packet(arrival, i as u64, ts, black_box(p.clone()));
                    }
                    (bridge, backend)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn downlink(c: &mut Criterion) {
    let cert = server_cert();
    let packets = opus_second();
    let pcm = pcm_second();
    let queue = |backend: &Backend, mode| match mode {
        AudioMode::Pcm => backend.send_pcm(&pcm),
        _ => backend.send_opus(&packets),
    };
    let mut g = c.benchmark_group("downlink");
    g.throughput(Throughput::Elements(PACKETS_PER_SECOND as u64));
    // (name, owner's mode, whether a second of audio is queued)
    let runs = [
        ("passthrough", AudioMode::OpusPassthrough, true),
        ("pcm", AudioMode::Pcm, true),
        ("idle", AudioMode::OpusPassthrough, false),
    ];
    for (name, mode, queued) in runs {
        let expected = if queued { PACKETS_PER_SECOND } else { 0 };
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let call = Call::connect(&cert, Some(mode));
                    if queued {
                        queue(call.backend.as_ref().expect("an owner"), mode);
                    }
                    call
                },
                |mut call| {
                    let end = call.now + FRAME * PACKETS_PER_SECOND as u32;
                    // One compare per second of audio: the bench checks it measured real work.
                    assert_eq!(call.run_until(end), expected, "SRTP packets sent");
                    call
                },
                BatchSize::PerIteration,
            )
        });
    }
    for (name, mode) in MODES {
        g.bench_function(format!("bridge_{name}"), |b| {
            b.iter_batched(
                || {
                    let (mut bridge, backend) = attached_bridge(mode);
                    bridge.on_connected(Instant::now());
                    queue(&backend, mode);
                    (bridge, backend)
                },
                |(mut bridge, backend)| {
                    // What `Session::audio_tick` asks of the bridge, minus str0m's writer.
                    for _ in 0..PACKETS_PER_SECOND {
                        let Some(at) = bridge.next_tick() else { break };
                        while bridge.poll_downlink().is_some() {}
                        black_box(bridge.tick(at).map(|(p, _)| p.len()));
                    }
                    (bridge, backend)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// What one new session costs before its media flows. `setup/accept`: the control plane's
/// work on a POSTed offer (validate, then str0m builds the `Rtc` and accepts the offer), per
/// offer. `setup/handshake`: a whole in-memory call set-up (offer, accept, ICE, DTLS, SCTP and
/// the data channel), client and server together, per call.
fn setup(c: &mut Criterion) {
    let cert = server_cert();
    let offer = client_offer();
    let mut g = c.benchmark_group("setup");
    g.throughput(Throughput::Elements(1));
    g.bench_function("accept", |b| {
        b.iter(|| {
            black_box(session_rig::accept(
                &cert,
                SessionId::random(),
                Instant::now(),
                offer.as_bytes(),
            ))
        })
    });
    g.bench_function("handshake", |b| {
        b.iter(|| black_box(Call::connect(&cert, Some(AudioMode::OpusPassthrough))))
    });
    g.finish();
}

/// A connected call and the second of uplink its client recorded.
fn recorded_call(cert: &DtlsCert, mode: Option<AudioMode>) -> (Call, RecordedSecond) {
    let mut call = Call::connect(cert, mode);
    let second = call.record_uplink_second();
    assert_eq!(second.srtp_packets(), PACKETS_PER_SECOND);
    (call, second)
}

/// An audio bridge with an owner in `mode` (48 kHz), as a session's is once a backend attached.
fn attached_bridge(mode: AudioMode) -> (AudioBridge, Backend) {
    let (endpoints, backend) = Backend::endpoints(mode);
    let mut bridge = AudioBridge::new("bench".into(), ENCODER);
    bridge
        .attach_owner(endpoints, Instant::now(), &Default::default())
        .expect("owner attaches");
    (bridge, backend)
}

fn config() -> Criterion {
    // Short by default (shared 2-core machine); the command line (--warm-up-time,
    // --measurement-time, --sample-size) overrides these.
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = uplink, downlink, setup
}
criterion_main!(benches);
