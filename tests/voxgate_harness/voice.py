"""Voice-to-voice measurement against the offline voice agent (examples/voice-agent).

A real caller (aiortc) speaks Piper-synthesized utterances with pauses between them; the agent
reports its own timestamps per turn on the data channel ({"type": "turn", "t": {...}}, wall clock
µs). Caller and agent run on the same machine, so one wall clock serves both, and each turn,
from the end of the caller's speech (its last frame sent) to the first reply frame the caller
decodes, splits into parts that add up to the total:

  vad alignment      the caller's end of speech -> the last frame the VAD called speech (a few
                     ms either way: VAD windows are 32 ms, frames 20 ms)
  uplink transport   that frame: caller socket -> transceiver socket (UDP, loopback) and
                     transceiver socket -> agent (Opus decode, gRPC); the frame is matched by
                     its RTP timestamp, so this is one frame's real trip
  agent              VAD end of turn (the silence it waits for) + ASR + TTS first chunk, until
                     the first play() returned
  downlink transport first play() -> the first reply RTP packet at the caller's socket (gRPC,
                     the transceiver's 20 ms pacing tick, Opus encode, UDP)
  caller jitter buf  RTP arrival -> decoded (aiortc holds 4 packets at the start of every talk
                     spurt; a browser's jitter buffer has its own, smaller, delay)

and barge-in: the caller's onset over a reply -> the last reply audio the caller heard.

A caller with the turns channel (`Caller(turns=True)`) also reports each turn to the
transceiver as the web client does, and keeps the transceiver's own split of it
(`transceiver`: capture_send, network_up, transceiver_up, backend, transceiver_down,
network_down, jitter_buffer; docs/operating.md "Turn latency"). Its total runs to the reply's
first frame loud by the transceiver's threshold (-50 dBFS), which can be a frame or two after
the first reply frame timed above (a reply's leading near-silence).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from voxgate_harness.caller import Caller

ROOT = Path(__file__).resolve().parents[2]
AGENT_DIR = ROOT / "examples" / "voice-agent"
CALLER_RATE = 48_000
SILENCE_LEVEL = 300


def speech(texts: list[str]) -> list[bytes]:
    """Piper speech (PCM16 mono 48 kHz), silence trimmed at both ends so that a say() future's
    time is the speech's real end. Deterministic: Piper samples its voice with random noise by
    default, so each run spoke a slightly different sentence, and once in a while one that
    Whisper tiny heard differently ("Look a table for two" in two tests of one run)."""
    sys.path.insert(0, str(AGENT_DIR))
    from piper import SynthesisConfig
    from voice_agent.tts import Synthesizer, resample

    voice = Synthesizer().voice
    same_every_time = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    out = []
    for text in texts:
        pcm = np.concatenate([np.frombuffer(c.audio_int16_bytes, dtype=np.int16)
                              for c in voice.synthesize(text, syn_config=same_every_time)])
        pcm = resample(pcm, voice.config.sample_rate, CALLER_RATE)
        loud = np.flatnonzero(np.abs(pcm) > SILENCE_LEVEL)
        out.append(pcm[max(0, loud[0] - 480):loud[-1] + 1].tobytes())
    return out


class AgentProcess:
    """`python -m voice_agent` as a worker of the given transceiver, its log in `log_path`."""

    def __init__(self, grpc_target: str, token: str | None, log_path: Path) -> None:
        self.log_path = log_path
        env = {**os.environ, "PYTHONPATH": str(AGENT_DIR), "VOXGATE_AGENT_TRANSCEIVER": grpc_target,
               "PYTHONUNBUFFERED": "1"}
        if token:
            env["VOXGATE_AGENT_TOKEN"] = token
        log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "voice_agent", "--capacity", "2"],
                                     env=env, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, cwd=AGENT_DIR)
        log.close()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the agent exited ({self.proc.returncode}):\n{self.log()}")
            if "registered at" in self.log():
                return
            time.sleep(0.1)
        raise TimeoutError(f"the agent did not register in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ms(us: float) -> float:
    return round(us / 1000.0, 1)


async def measure_turn(caller: Caller, utterance: bytes, timeout: float = 60.0) -> dict:
    """Speaks `utterance`, waits for the reply, returns the turn's parts in ms."""
    seen = len(caller.messages)
    _, done = caller.say(utterance)
    speech_end = await done
    turn = await caller.wait_message(lambda m: m.get("type") == "turn", timeout, start=seen)
    user = await caller.wait_message(lambda m: m.get("type") == "user", timeout, start=seen)
    await caller.wait_heard(speech_end, timeout)
    # The reply's onset: its first packet is the first to arrive after both the caller's end
    # of speech and the agent's first play() (one clock: the same machine). Its frame is the
    # one decoded from it, counted: aiortc decodes one 20 ms frame per packet, in order, so
    # the n-th packet of the call is its n-th frame heard (however quiet: the reply's own
    # leading silence counts). Not "the first frame heard after the speech": aiortc's jitter
    # buffer keeps a talk spurt's last packets until the next spurt pushes them out, so the
    # frames decoded first after a reply's first packet are the previous reply's quiet tail
    # (which read every turn after the first about 80 ms low).
    t = turn["t"]
    onset = max(speech_end, t["first_play_us"] / 1e6)
    arrivals = caller.packet_arrivals()
    first = next(i for i, a in enumerate(arrivals) if a > onset)
    arrived = arrivals[first]
    # Its frame may still be in aiortc's jitter buffer (4 packets at a spurt's start).
    deadline = time.monotonic() + 5.0
    while len(caller.heard) <= first and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if len(caller.heard) <= first or caller.heard[first].at < arrived:
        raise AssertionError(f"packet {first} and the frames heard do not pair up: "
                             f"{len(caller.heard)} frames for {len(arrivals)} packets")
    frame = caller.heard[first]
    sent = caller.sent_at(t["speech_end_rtp_ts"])
    if sent is None:
        raise AssertionError(f"the caller never sent RTP timestamp {t['speech_end_rtp_ts']}")
    sent_us, end_us = sent * 1e6, speech_end * 1e6
    parts = {
        "vad_alignment_ms": ms(sent_us - end_us),
        "caller_to_transceiver_ms": ms(t["speech_end_arrival_us"] - sent_us),
        "transceiver_to_agent_ms": ms(t["speech_end_received_us"] - t["speech_end_arrival_us"]),
        "vad_end_of_turn_ms": ms(t["end_of_turn_us"] - t["speech_end_received_us"]),
        "asr_ms": ms(t["asr_done_us"] - t["end_of_turn_us"]),
        "tts_first_chunk_ms": ms(t["tts_first_chunk_us"] - t["asr_done_us"]),
        "play_write_ms": ms(t["first_play_us"] - t["tts_first_chunk_us"]),
        "downlink_transport_ms": ms(arrived * 1e6 - t["first_play_us"]),
        "caller_jitter_buffer_ms": ms((frame.at - arrived) * 1e6),
        "total_ms": ms(frame.at * 1e6 - end_us),
    }
    parts["uplink_transport_ms"] = round(
        parts["caller_to_transceiver_ms"] + parts["transceiver_to_agent_ms"], 1)
    parts["agent_ms"] = ms(t["first_play_us"] - t["speech_end_received_us"])
    parts["transport_ms"] = round(parts["uplink_transport_ms"] + parts["downlink_transport_ms"], 1)
    parts["transcript"] = user["text"]
    if caller.turns:
        parts["transceiver"] = await transceiver_split(caller, speech_end)
    return parts


async def transceiver_split(caller: Caller, speech_end: float) -> dict:
    """Reports the turn on the turns channel and returns the transceiver's split of it (ms by
    part, and `total_ms`)."""
    onset = caller.reply_onset_after(speech_end)
    if onset is None:
        raise AssertionError("no reply frame reached the transceiver's onset level")
    arrived = caller.arrived_at(onset.rtp_timestamp)
    answer = await caller.report_turn((onset.at - speech_end) * 1e3, onset.rtp_timestamp,
                                      (onset.at - arrived) * 1e3)
    if answer is None:
        raise AssertionError(f"the transceiver did not split the turn (report dropped): {onset}")
    split = {f"{p['name']}_ms": p["ms"] for p in answer["parts"]}
    split["total_ms"] = answer["total_ms"]
    return split


async def measure_barge_in(caller: Caller, prompt: bytes, interruption: bytes,
                           timeout: float = 60.0) -> dict:
    """Asks for a reply, talks over it once it is audible, and measures how fast it stops: from
    the interruption's first frame sent to the last reply packet at the caller's socket, and to
    the last reply frame the caller decoded."""
    seen = len(caller.messages)
    _, done = caller.say(prompt)
    prompt_end = await done
    first = await caller.wait_heard(prompt_end, timeout)
    await asyncio.sleep(max(0.0, first + 0.6 - time.time()))
    started, done = caller.say(interruption)
    onset = await started
    barge = await caller.wait_message(lambda m: m.get("type") == "barge_in", timeout, start=seen)
    interruption_end = await done
    # The agent cannot answer the interruption before it is over: every packet that arrived
    # until then belongs to the first reply.
    reply = [a for a in caller.packet_arrivals() if first - 1.0 <= a <= interruption_end]
    last = max(reply)
    cleared = barge["cleared_us"] / 1e6
    return {
        "onset_to_vad_onset_ms": ms(barge["onset_us"] - onset * 1e6),
        "clear_round_trip_ms": ms(barge["cleared_us"] - barge["onset_us"]),
        # What the caller experiences: its first interrupting frame sent -> the last reply
        # packet at its socket (aiortc then plays out what its jitter buffer holds).
        "onset_to_reply_stopped_ms": ms((last - onset) * 1e6),
        "reply_heard_ms": barge["heard_ms"],
        "reply_dropped_ms": barge["dropped_ms"],
        # Reply packets that reached the caller after the agent had the Cleared answer back.
        "packets_after_clear": sum(1 for a in reply if a > cleared),
        "last_packet_after_clear_ms": ms(max(0.0, last - cleared) * 1e6),
    }
