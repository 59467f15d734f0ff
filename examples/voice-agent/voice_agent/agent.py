"""One conversation on the voxgate SDK: caller audio -> VAD -> Whisper -> brain -> Piper -> caller.

Per call, one task reads the caller's 20 ms frames and runs the streaming VAD on them (cheap,
inline). The turn detector's "end" starts a reply task (ASR, then TTS sentence by sentence,
each sentence played as soon as it exists); "start" while a reply is audible is a barge-in: the
reply task is cancelled and `clear()` goes out on the same frame, and the `Cleared` answer says
how much of the reply the caller heard. ASR and TTS run in worker threads so the frame loop
never waits on them.

Everything the agent does is reported to the caller as JSON on the data channel, which is what
the demo page and the tests read (a caller whose channel does not open within
EVENTS_WAIT_S gets none, and the log says so; the conversation goes on without them):
  {"type": "user", "text": ...}                       what it understood
  {"type": "agent", "text": ..., "item_id": ...}       what it answers
  {"type": "turn", "item_id": ..., "t": {...}}        the turn's timestamps (µs, wall clock)
  {"type": "barge_in", "item_id": ..., "heard_ms": ..., "onset_us": ..., "cleared_us": ...}
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass

import voxgate

from voice_agent import brain
from voice_agent.asr import Transcriber
from voice_agent.tts import Synthesizer
from voice_agent.turns import TurnConfig, TurnDetector
from voice_agent.vad import StreamingVad, load_session

log = logging.getLogger("voice_agent")

RATE = 16_000
PRE_ROLL_FRAMES = 15  # 300 ms before the VAD onset belong to the utterance
MAX_UTTERANCE_S = 15
# How long an event waits for the caller's data channel to open (`Call.send` waits for it);
# after one that timed out the call's events are off, so the replies are not held up.
EVENTS_WAIT_S = 2.0


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class Models:
    """Loaded once per process, shared by every call."""

    vad: object
    asr: Transcriber
    tts: Synthesizer

    @classmethod
    def load(cls) -> Models:
        t = time.monotonic()
        models = cls(vad=load_session(), asr=Transcriber(), tts=Synthesizer())
        log.info("models loaded in %.1f s", time.monotonic() - t)
        return models


class Conversation:
    """The agent's side of one call."""

    def __init__(self, call: voxgate.Call, models: Models, turns: TurnConfig | None = None):
        self.call = call
        self.models = models
        self.vad = StreamingVad(models.vad)
        self.turns = TurnDetector(turns)
        # The reply being spoken (at most one at a time); failed replies are logged.
        self.reply_task: asyncio.Task | None = None
        self.replies_running = voxgate.TaskSet(f"{call.session_id} replies")
        self.audible_until = 0.0  # monotonic time the queued reply audio runs out
        self.item_id = ""
        self.replies = 0
        self.utterance = bytearray()
        self.pre_roll: deque[bytes] = deque(maxlen=PRE_ROLL_FRAMES)
        self.last_speech_frame: voxgate.AudioFrame | None = None
        self.events_on = True

    async def run(self) -> None:
        async with self.call:
            await self.call.wait_connected(30)
            log.info("%s: connected", self.call.session_id)
            try:
                async for frame in self.call.audio():
                    await self.on_frame(frame)
            finally:
                await self.replies_running.aclose()

    def replying(self) -> bool:
        running = self.reply_task is not None and not self.reply_task.done()
        return running or time.monotonic() < self.audible_until

    async def on_frame(self, frame: voxgate.AudioFrame) -> None:
        if self.turns.speaking:
            self.utterance += frame.pcm
        else:
            self.pre_roll.append(frame.pcm)
        for prob in self.vad.push(frame.pcm):
            if prob >= self.turns.config.start_threshold:
                self.last_speech_frame = frame
            event = self.turns.push(prob)
            if event == "start":
                onset_us = now_us()
                self.utterance = bytearray(b"".join(self.pre_roll))
                self.pre_roll.clear()
                if self.replying():
                    await self.barge_in(onset_us)
            elif event == "end":
                self.start_reply(bytes(self.utterance))
                self.utterance = bytearray()
            elif event == "discard":
                self.utterance = bytearray()
        if len(self.utterance) > MAX_UTTERANCE_S * RATE * 2:
            self.start_reply(bytes(self.utterance))
            self.utterance = bytearray()

    async def barge_in(self, onset_us: int) -> None:
        """The caller talks over the reply: stop it now (the Clear goes out on this frame)."""
        if self.reply_task is not None:
            self.reply_task.cancel()
        self.audible_until = 0.0
        cleared = await self.call.clear()
        cleared_us = now_us()
        log.info("%s: barge-in, %s heard %d ms", self.call.session_id, cleared.item_id,
                 cleared.item_played_ms)
        await self.send({"type": "barge_in", "item_id": cleared.item_id,
                         "heard_ms": cleared.item_played_ms, "dropped_ms": cleared.dropped_ms,
                         "onset_us": onset_us, "cleared_us": cleared_us})

    def start_reply(self, utterance: bytes) -> None:
        last = self.last_speech_frame
        t = {
            # The caller's last speech frame: its RTP timestamp (which the caller can look up),
            # when it reached the transceiver's socket, and when it reached this process.
            "speech_end_rtp_ts": last.rtp_timestamp if last else 0,
            "speech_end_arrival_us": last.arrival_unix_micros if last else 0,
            "speech_end_received_us": last.received_unix_micros if last else 0,
            "end_of_turn_us": now_us(),
        }
        if self.reply_task is not None and not self.reply_task.done():
            self.reply_task.cancel()
        self.reply_task = self.replies_running.create_task(self.reply(utterance, t))

    async def reply(self, utterance: bytes, t: dict[str, int]) -> None:
        call = self.call
        text = await asyncio.to_thread(self.models.asr.transcribe, utterance)
        t["asr_done_us"] = now_us()
        log.info("%s: heard %r", call.session_id, text)
        await self.send({"type": "user", "text": text})
        if not text:
            return
        answer = brain.reply(text)
        self.replies += 1
        self.item_id = f"reply-{self.replies}"
        await self.send({"type": "agent", "text": answer, "item_id": self.item_id})
        chunks = self.models.tts.stream(answer, RATE)
        first = True
        while True:
            pcm = await asyncio.to_thread(next, chunks, None)
            if pcm is None:
                break
            if first:
                t["tts_first_chunk_us"] = now_us()
            await call.play(pcm, item_id=self.item_id)
            start = max(time.monotonic(), self.audible_until)
            self.audible_until = start + len(pcm) / (2 * RATE)
            if first:
                t["first_play_us"] = now_us()
                first = False
                await self.send({"type": "turn", "item_id": self.item_id, "t": t})

    async def send(self, event: dict) -> None:
        if not self.events_on:
            return
        try:
            await self.call.send(json.dumps(event), timeout=EVENTS_WAIT_S)
        except voxgate.DataChannelNotOpenError as e:
            self.events_on = False
            log.info("%s; no more events on this call", e)
        except voxgate.VoxgateError as e:
            log.debug("%s: event not sent: %s", self.call.session_id, e)  # the call is over


async def serve(worker: voxgate.Worker, models: Models) -> None:
    """Runs one Conversation per dispatched call until the worker closes; the conversations
    still running when it returns (or is cancelled) are cancelled."""
    async with voxgate.TaskSet("conversations") as tasks:
        async for call in worker.calls():
            tasks.create_task(Conversation(call, models).run(), name=f"call-{call.session_id}")
