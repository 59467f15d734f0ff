"""The offline voice agent end to end: a real WebRTC caller speaks (Piper speech through Opus),
the transceiver hands the audio to the agent process over gRPC, the agent answers with speech."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import wave
from pathlib import Path

import pytest
from voxgate_harness.voice import measure_barge_in, measure_turn, speech

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 90.0  # model inference on a busy 2-core machine


@pytest.fixture(scope="module")
def utterances():
    return dict(zip(
        ["book", "long", "stop", "hello", "time"],
        speech(["Book a table for two.",
                "Please repeat after me: the quick brown fox jumps over the lazy dog, "
                "and then it runs all the way home to its family.",
                "Wait, stop, stop talking, I have a question.",
                "Hello there.",
                "What time is it?"])))


PARTS = ("vad_alignment_ms", "uplink_transport_ms", "agent_ms", "downlink_transport_ms",
         "caller_jitter_buffer_ms")


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


async def test_agent_understands_a_spoken_sentence_and_answers(caller, utterances):
    turn = await measure_turn(caller, utterances["book"], TIMEOUT)
    assert "book a table for two" in words(turn["transcript"]), turn
    agent = await caller.wait_message(lambda m: m.get("type") == "agent", TIMEOUT)
    assert agent["text"] == "Sure, I booked a table for 2. See you tonight."
    # The whole reply is heard (Piper makes about 2.5 s of it).
    deadline = time.monotonic() + TIMEOUT
    while caller.heard_seconds() < 1.5 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert caller.heard_seconds() >= 1.5
    # Parts are differences of timestamps taken in different processes (caller, transceiver,
    # agent); on one host their clocks agree to well under a millisecond, but under load a
    # loopback hop can read slightly below zero. A real negative part (a wrong pairing of
    # packets) is tens of ms off.
    for key in ("uplink_transport_ms", "agent_ms", "downlink_transport_ms", "total_ms"):
        assert turn[key] >= -1.0, turn
    assert abs(sum(turn[p] for p in PARTS) - turn["total_ms"]) < 1.0, turn
    print("turn:", json.dumps(turn))


async def test_caller_speaking_over_the_reply_cuts_it(caller, utterances):
    result = await measure_barge_in(caller, utterances["long"], utterances["stop"], TIMEOUT)
    print("barge-in:", json.dumps(result))
    # The agent noticed the caller and cleared the queued reply: most of it was never played.
    assert result["reply_dropped_ms"] > 500, result
    # The reply stopped at the caller: no packet of it arrived later than a generous margin
    # after the agent had the transceiver's Cleared answer (on loopback, in-flight packets take
    # well under a millisecond; the margin is for a busy machine's scheduling).
    assert result["last_packet_after_clear_ms"] < 200, result


async def test_voice_to_voice_latency_is_measured_per_turn_and_split(caller, utterances):
    """Two turns with a pause: each is timed from the caller's end of speech to the first reply
    frame it decodes, and split into parts that add up (the numbers go to the bench report;
    here only their consistency is checked)."""
    turns = []
    for key, expected in (("hello", "hello there"), ("time", "what time is it")):
        turn = await measure_turn(caller, utterances[key], TIMEOUT)
        print("turn:", json.dumps(turn))
        assert expected in words(turn["transcript"]), turn
        assert abs(sum(turn[p] for p in PARTS) - turn["total_ms"]) < 1.0, turn
        # Each part is a real interval (the VAD's alignment may fall either side of the end).
        for p in PARTS[1:] + ("vad_end_of_turn_ms", "asr_ms", "tts_first_chunk_ms"):
            assert turn[p] >= -1.0, (p, turn)
        check_transceiver_split(turn)
        turns.append(turn)
        await caller.wait_quiet(0.3, TIMEOUT)  # the reply plays out, then a pause
        await asyncio.sleep(1.0)
    assert len(turns) == 2


SPLIT = ("capture_send_ms", "network_up_ms", "transceiver_up_ms", "backend_ms",
         "transceiver_down_ms", "network_down_ms", "jitter_buffer_ms")


def check_transceiver_split(turn: dict) -> None:
    """The transceiver's split of the turn the caller reported (voice.py) adds up, and its
    backend part agrees with what the caller and the agent timed themselves."""
    split = turn["transceiver"]
    # Parts come rounded to 0.1 ms each.
    assert abs(sum(split[p] for p in SPLIT) - split["total_ms"]) < 0.5, split
    for p in SPLIT[1:]:
        assert split[p] >= 0.0, (p, split)
    # Loopback: the network halves are a fraction of a millisecond.
    assert split["network_up_ms"] < 5.0, split
    # The transceiver's backend + downlink parts run from the caller's last loud packet to the
    # reply's first loud packet at the caller; the caller's own timing covers the same stretch
    # as VAD alignment (its end of speech -> the VAD's last speech frame), transceiver -> agent,
    # agent and downlink transport, to the reply's first packet. What is left between them is
    # where each side puts the end (the level's and the frame's 20 ms granularity) and the
    # onset (the first frame at -50 dBFS, or the first packet: Piper's reply can open with a
    # near-silent frame or two): a few frames. 100 ms is five; a turn paired with the wrong
    # reply is off by seconds.
    ours = split["backend_ms"] + split["transceiver_down_ms"] + split["network_down_ms"]
    theirs = (turn["vad_alignment_ms"] + turn["transceiver_to_agent_ms"] + turn["agent_ms"]
              + turn["downlink_transport_ms"])
    assert abs(ours - theirs) < 100.0, (ours, theirs, split, turn)


async def test_demo_page_shows_the_conversation_levels_and_latency(stack, tmp_path):
    """The demo page in headless Chromium (its fake microphone speaks, once, after 3 s of
    silence): the transcript pane shows what the agent heard and answered, the meters move and
    the latency line shows the turn's voice-to-voice time."""
    t, _ = stack
    wav = tmp_path / "speech.wav"
    pcm = b"\0\0" * 48_000 * 3 + speech(["Book a table for two."])[0] + b"\0\0" * 48_000 * 2
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(48_000)
        w.writeframes(pcm)
    proc = await asyncio.create_subprocess_exec(
        "node", str(ROOT / "tests" / "browser" / "demo_page.mjs"),
        env={**os.environ, "SIGNAL_URL": t.signal_url, "WAV": str(wav), "TIMEOUT_MS": "90000"},
        stdout=asyncio.subprocess.PIPE, cwd=ROOT / "tests" / "browser")
    out, _ = await asyncio.wait_for(proc.communicate(), 150)
    result = json.loads(out.decode().strip().splitlines()[-1])
    print("demo page:", json.dumps(result))
    assert result["ok"], result
    assert "book a table for two" in words(result["user"][0]), result
    assert result["agent"][0] == "Sure, I booked a table for 2. See you tonight.", result
    assert result["maxIn"] > 0 and result["maxOut"] > 0, result
    # The page's own voice-to-voice time (its clock, its level meters) covers at least what
    # the agent reported spending (end of turn + ASR + first speech), and not much more.
    latency = int(re.match(r"(\d+) ms", result["latency"]).group(1))
    agent_ms = sum(int(x) for note in result["notes"] if note.startswith("agent:")
                   for x in re.findall(r"(\d+) ms", note))
    assert agent_ms > 0 and agent_ms - 300 <= latency <= agent_ms + 1500, result
