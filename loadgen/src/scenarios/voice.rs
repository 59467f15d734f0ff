//! Voice to voice: a real caller (aiortc) talks to the offline voice agent
//! (`examples/voice-agent`: Silero VAD, Whisper tiny.en, Piper) through the transceiver under
//! test, turn after turn with pauses, then talks over one reply. The measuring is done in
//! Python (`tests/voxgate_harness/voice_bench.py`, the same code as the agent's tests), which
//! prints one JSON object; this scenario runs it and keeps what it printed.
//!
//! Each turn splits the time from the end of the caller's speech to the first reply frame it
//! decodes (the frame of the reply's first packet: aiortc keeps a spurt's last packets until
//! the next spurt, so the first frames decoded after a reply's first packet are the previous
//! reply's tail; `voice.py` says how it pairs them) into transport (caller → transceiver → agent for the last speech frame, matched by
//! RTP timestamp; agent's first `play` → first reply packet at the caller) and agent (VAD end of
//! turn, ASR, TTS first chunk), plus the caller's own jitter buffer.
//!
//! The caller also reports each turn on the `voxgate.turns` channel, as the web client does, and
//! keeps the transceiver's own split of it (`media/turn_timing.rs`): the section prints its
//! medians, part by part, with who measures each.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::report::cells::{at_most, med, num};
use crate::suite::runner::{Ledger, Runner};

/// The transport's share of a turn's voice-to-voice time (issue 14: a few milliseconds of a
/// budget of hundreds).
pub const TRANSPORT_SHARE_LIMIT_PCT: f64 = 5.0;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct VoiceSection {
    pub turns: Vec<Turn>,
    pub barge_in: Vec<BargeIn>,
    /// Why it did not run (no Python venv).
    pub skipped: Option<String>,
}

/// One turn, in ms (see `tests/voxgate_harness/voice.py` for each part).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Turn {
    pub said: String,
    pub transcript: String,
    pub total_ms: f64,
    pub transport_ms: f64,
    pub uplink_transport_ms: f64,
    pub downlink_transport_ms: f64,
    pub agent_ms: f64,
    pub vad_end_of_turn_ms: f64,
    pub asr_ms: f64,
    pub tts_first_chunk_ms: f64,
    pub caller_jitter_buffer_ms: f64,
    pub vad_alignment_ms: f64,
    /// The transceiver's split of the turn the caller reported (absent in reports made before
    /// the caller reported turns).
    pub transceiver: Option<TransceiverSplit>,
}

/// The transceiver's split of one turn's mouth-to-ear time, ms (docs/operating.md "Turn
/// latency").
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TransceiverSplit {
    pub total_ms: f64,
    pub capture_send_ms: f64,
    pub network_up_ms: f64,
    pub transceiver_up_ms: f64,
    pub backend_ms: f64,
    pub transceiver_down_ms: f64,
    pub network_down_ms: f64,
    pub jitter_buffer_ms: f64,
}

/// One row of the split's table: name, who measures it, the field.
type SplitRow = (&'static str, &'static str, fn(&TransceiverSplit) -> f64);

const SPLIT_ROWS: [SplitRow; 8] = [
    ("capture + send", "estimated (the remainder)", |s| {
        s.capture_send_ms
    }),
    ("network up", "estimated (RTT / 2)", |s| s.network_up_ms),
    ("transceiver up", "measured", |s| s.transceiver_up_ms),
    ("backend", "measured", |s| s.backend_ms),
    ("transceiver down", "measured", |s| s.transceiver_down_ms),
    ("network down", "estimated (RTT / 2)", |s| s.network_down_ms),
    ("jitter buffer", "client-reported (aiortc's)", |s| {
        s.jitter_buffer_ms
    }),
    ("total", "client-measured, one clock", |s| s.total_ms),
];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BargeIn {
    pub onset_to_reply_stopped_ms: f64,
    pub onset_to_vad_onset_ms: f64,
    pub clear_round_trip_ms: f64,
    pub reply_heard_ms: f64,
    pub reply_dropped_ms: f64,
    pub packets_after_clear: u64,
}

/// Runs the Python measurement once with the planned number of turns.
pub fn run<R: Ledger>(s: &mut Runner<R>, section: fn(&mut R) -> &mut VoiceSection) {
    let turns = s.plan.voice_turns;
    if turns == 0 {
        return;
    }
    let python = s.args.python.clone();
    if !python.exists() {
        section(&mut s.results).skipped = Some(format!(
            "{} missing: run scripts/setup (the voice agent's models are Python packages)",
            python.display()
        ));
        return;
    }
    s.say(&format!(
        "voice: {turns} turns and a barge-in with the offline voice agent"
    ));
    let log_dir = s.args.work_dir.join("voice");
    let out = log_dir.join("voice.json");
    let bin = s.args.bin_dir.join("transceiver");
    let r = measure(&python, &s.args.python_tests, &bin, turns, &log_dir, &out);
    match r {
        Ok(v) => *section(&mut s.results) = v,
        Err(e) => s.record_error("voice", e),
    }
}

fn measure(
    python: &Path,
    tests: &Path,
    transceiver: &Path,
    turns: usize,
    log_dir: &Path,
    out: &Path,
) -> anyhow::Result<VoiceSection> {
    std::fs::create_dir_all(log_dir)?;
    let status = Command::new(python)
        .args([
            "-m",
            "voxgate_harness.voice_bench",
            "--turns",
            &turns.to_string(),
        ])
        .arg("--transceiver")
        .arg(transceiver)
        .arg("--log-dir")
        .arg(log_dir)
        .arg("--out")
        .arg(out)
        .env("PYTHONPATH", tests)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log_dir.join("voice_bench.log"))?)
        .status()
        .context("starting the Python voice benchmark")?;
    if !status.success() {
        bail!(
            "voice_bench exited {status}; see {}",
            log_dir.join("voice_bench.log").display()
        );
    }
    let text = std::fs::read_to_string(out)?;
    serde_json::from_str(&text).context("parsing voice_bench's JSON")
}

fn share_pct(t: &Turn) -> f64 {
    100.0 * t.transport_ms / t.total_ms.max(1.0)
}

/// The Targets row: the transport's share of voice to voice.
pub fn targets(md: &mut String, v: &VoiceSection) {
    if v.turns.is_empty() {
        return;
    }
    let share = med(&v.turns, share_pct);
    let _ = writeln!(
        md,
        "| transport ≤ {TRANSPORT_SHARE_LIMIT_PCT:.0} % of voice to voice (issue 14; median of {} turns) | {} % ({} ms of {} ms) | {} |",
        v.turns.len(),
        num(share, 1),
        num(med(&v.turns, |t| t.transport_ms), 1),
        num(med(&v.turns, |t| t.total_ms), 0),
        at_most(share, TRANSPORT_SHARE_LIMIT_PCT, "%")
    );
}

/// The "Voice to voice" section.
pub fn section(md: &mut String, v: &VoiceSection) {
    let _ = writeln!(md, "## Voice to voice (offline voice agent)\n");
    if let Some(why) = &v.skipped {
        let _ = writeln!(md, "Skipped: {why}.\n");
        return;
    }
    if v.turns.is_empty() {
        let _ = writeln!(md, "Not measured in this profile.\n");
        return;
    }
    let _ = writeln!(
        md,
        "A real WebRTC caller (aiortc, Opus) speaks Piper-made sentences with pauses to `examples/voice-agent` \
         (Silero VAD, 480 ms end-of-turn silence; faster-whisper tiny.en int8; Piper en_US-joe-medium) through the \
         transceiver under test, all on this machine's CPU. Per turn, from the caller's last speech frame sent to \
         the first reply frame it decodes (ms): transport is caller → transceiver → agent for the last speech frame \
         (matched by RTP timestamp) plus the agent's first `play` → the first reply packet at the caller (which \
         includes up to one 20 ms pacing tick); the caller's jitter buffer is aiortc's.\n"
    );
    let _ = writeln!(
        md,
        "| said | heard by the agent | total | transport | share | uplink | downlink | agent | VAD end of turn | ASR | TTS first chunk | caller jitter buffer |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &v.turns {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.1} | {:.1} % | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            t.said,
            t.transcript,
            t.total_ms,
            t.transport_ms,
            share_pct(t),
            t.uplink_transport_ms,
            t.downlink_transport_ms,
            t.agent_ms,
            t.vad_end_of_turn_ms,
            t.asr_ms,
            t.tts_first_chunk_ms,
            t.caller_jitter_buffer_ms
        );
    }
    md.push('\n');
    split_section(md, v);
    if !v.barge_in.is_empty() {
        let _ = writeln!(
            md,
            "Barge-in: the caller talks over a reply. Onset → the last reply packet at the caller; the agent's VAD \
             needs two 32 ms windows of speech, then `clear` goes out on that frame.\n"
        );
        let _ = writeln!(
            md,
            "| onset → reply stopped ms | onset → VAD onset ms | clear round trip ms | reply heard ms | reply dropped ms | packets after Cleared |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|");
        for b in &v.barge_in {
            let _ = writeln!(
                md,
                "| {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {} |",
                b.onset_to_reply_stopped_ms,
                b.onset_to_vad_onset_ms,
                b.clear_round_trip_ms,
                b.reply_heard_ms,
                b.reply_dropped_ms,
                b.packets_after_clear
            );
        }
        md.push('\n');
    }
}

/// Medians of the transceiver's own splits of the turns the caller reported.
fn split_section(md: &mut String, v: &VoiceSection) {
    let splits: Vec<&TransceiverSplit> = v
        .turns
        .iter()
        .filter_map(|t| t.transceiver.as_ref())
        .collect();
    if splits.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "Mouth-to-ear per turn as the transceiver splits it (the caller reports each turn on the \
         `voxgate.turns` channel as the web client does; the total runs to the reply's first frame at -50 dBFS; \
         medians of {} turns, ms):\n",
        splits.len()
    );
    let _ = writeln!(md, "| part | median ms | who measures it |");
    let _ = writeln!(md, "|---|---|---|");
    for (name, source, field) in SPLIT_ROWS {
        let _ = writeln!(
            md,
            "| {name} | {} | {source} |",
            num(med(&splits, |s| field(s)), 1)
        );
    }
    md.push('\n');
}
