"""Voice-to-voice measurement against the offline voice agent (examples/voice-agent).

A real caller (aiortc) speaks Piper-synthesized utterances with pauses between them; the agent
reports its own timestamps per turn on the data channel ({"type": "turn", "t": {...}}, wall clock
µs). Caller and agent run on the same machine, so one wall clock serves both, and each turn
splits into:

  uplink transport   caller's last speech frame sent -> that frame received by the agent
                     (aiortc Opus encode, UDP, transceiver decode, gRPC)
  agent              VAD end of turn + ASR + TTS first chunk, until the first play() returned
  downlink transport first play() -> its first RTP packet at the caller's socket
                     (gRPC, transceiver queue and Opus encode, UDP)
  caller jitter buf  RTP arrival -> decoded frame (aiortc's receive buffer; a browser has its own)

and barge-in: the caller's onset over a reply -> the last reply audio the caller heard.
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
    time is the speech's real end."""
    sys.path.insert(0, str(AGENT_DIR))
    from voice_agent.tts import Synthesizer, resample

    voice = Synthesizer().voice
    out = []
    for text in texts:
        pcm = np.concatenate([np.frombuffer(c.audio_int16_bytes, dtype=np.int16)
                              for c in voice.synthesize(text)])
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
    frame = caller.first_frame_after(speech_end)
    t = turn["t"]
    heard_us = frame.at * 1e6
    arrived_us = frame.arrived * 1e6
    end_us = speech_end * 1e6
    parts = {
        "uplink_transport_ms": ms(t["speech_end_received_us"] - end_us),
        "vad_end_of_turn_ms": ms(t["end_of_turn_us"] - t["speech_end_received_us"]),
        "asr_ms": ms(t["asr_done_us"] - t["end_of_turn_us"]),
        "tts_first_chunk_ms": ms(t["tts_first_chunk_us"] - t["asr_done_us"]),
        "play_write_ms": ms(t["first_play_us"] - t["tts_first_chunk_us"]),
        "downlink_transport_ms": ms(arrived_us - t["first_play_us"]),
        "caller_jitter_buffer_ms": ms(heard_us - arrived_us),
        "total_ms": ms(heard_us - end_us),
    }
    parts["agent_ms"] = ms(t["first_play_us"] - t["speech_end_received_us"])
    parts["transport_ms"] = round(parts["uplink_transport_ms"] + parts["downlink_transport_ms"], 1)
    parts["transcript"] = user["text"]
    return parts


async def measure_barge_in(caller: Caller, prompt: bytes, interruption: bytes,
                           timeout: float = 60.0) -> dict:
    """Asks for a reply, talks over it once it is audible, and measures how fast it stops."""
    seen = len(caller.messages)
    _, done = caller.say(prompt)
    prompt_end = await done
    first = await caller.wait_heard(prompt_end, timeout)
    await asyncio.sleep(max(0.0, first + 0.6 - time.time()))
    started, done = caller.say(interruption)
    onset = await started
    barge = await caller.wait_message(lambda m: m.get("type") == "barge_in", timeout, start=seen)
    interruption_end = await done
    reply = [h for h in caller.heard if first <= h.at <= interruption_end and h.rms > 200]
    last_heard = max((h.at for h in reply if h.at < barge["cleared_us"] / 1e6 + 0.5),
                     default=onset)
    return {
        "onset_to_reply_stopped_ms": ms((last_heard - onset) * 1e6),
        "onset_to_vad_onset_ms": ms(barge["onset_us"] - onset * 1e6),
        "clear_round_trip_ms": ms(barge["cleared_us"] - barge["onset_us"]),
        "reply_heard_ms": barge["heard_ms"],
        "reply_dropped_ms": barge["dropped_ms"],
        # Reply audio heard from clear + 300 ms until the caller stopped talking: must be none.
        "heard_after_clear_ms": round(1000 * sum(
            0.02 for h in reply if h.at > barge["cleared_us"] / 1e6 + 0.3), 1),
    }
