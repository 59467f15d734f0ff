"""A Pipecat transport on a voxgate `Call` (the `[pipecat]` extra, pipecat-ai 1.x).

Pipecat's own WebRTC transport runs a WebRTC stack in the bot process per call; here WebRTC ends
at the transceiver and the pipeline sees plain PCM over gRPC:

- input: the caller's 20 ms frames become `InputAudioRawFrame`s, data-channel messages become
  `InputTransportMessageFrame`s (JSON-decoded when they parse);
- output: `OutputAudioRawFrame`s are played with `call.play()` and paced at real time, so
  Pipecat's bot-speaking events follow what the caller hears (the transceiver keeps only about a
  chunk queued); each TTS response is one item (`TTSStartedFrame` opens a new item id);
  `OutputTransportMessageFrame`s go out on the data channel (JSON for non-strings);
- an `InterruptionFrame` (the user spoke over the bot) becomes `call.clear()`: the queued reply
  is dropped at the transceiver at once, and the `Cleared` answer (how much of the item the caller
  actually heard) goes upstream as a `PlaybackClearedFrame` and to the `on_playback_cleared`
  event handler, so the context can be truncated where the caller stopped hearing.

One worker serves many calls, each with its own pipeline: `serve(worker, bot)` runs
`bot(transport)` for every dispatched call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    InputTransportMessageFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
    OutputTransportMessageFrame,
    OutputTransportMessageUrgentFrame,
    StartFrame,
    SystemFrame,
    TTSStartedFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import BaseTransport, TransportParams

from voxgate.call import Call
from voxgate.errors import VoxgateError
from voxgate.types import AudioFrame, Cleared
from voxgate.worker import Worker

# Real-time pacing may run this far ahead of the caller (audio queued at the transceiver).
PACE_AHEAD_S = 0.04


@dataclass
class PlaybackClearedFrame(SystemFrame):
    """Upstream after an interruption: the caller heard `item_played_ms` of item `item_id`."""

    item_id: str = ""
    item_played_ms: int = 0
    played_ms: int = 0
    dropped_ms: int = 0


class VoxgateInputTransport(BaseInputTransport):
    def __init__(self, transport: VoxgateTransport, params: TransportParams, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._transport = transport
        self._tasks: list[asyncio.Task] = []

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        if not self._tasks:
            self._tasks = [self.create_task(self._read_audio()),
                           self.create_task(self._read_messages())]
        await self.set_transport_ready(frame)

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._stop_tasks()

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            await self.cancel_task(task)
        self._tasks = []

    async def _read_audio(self) -> None:
        call = self._transport.call
        try:
            async for frame in call.audio():
                if isinstance(frame, AudioFrame):
                    await self.push_audio_frame(InputAudioRawFrame(
                        audio=frame.pcm, sample_rate=frame.sample_rate_hz, num_channels=1))
        except VoxgateError:
            pass
        await self._transport.on_call_ended()

    async def _read_messages(self) -> None:
        try:
            async for msg in self._transport.call.messages():
                payload: Any = msg.text if msg.text is not None else msg.binary
                if msg.text is not None:
                    try:
                        payload = json.loads(msg.text)
                    except ValueError:
                        pass
                await self.broadcast_frame(InputTransportMessageFrame, message=payload)
        except VoxgateError:
            pass


class VoxgateOutputTransport(BaseOutputTransport):
    def __init__(self, transport: VoxgateTransport, params: TransportParams, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._transport = transport
        self._items = 0
        self.item_id = "item-0"
        self._clock = 0.0  # monotonic time the played audio runs out

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TTSStartedFrame):
            self._items += 1
            self.item_id = f"item-{self._items}"
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            await self._clear()

    async def _clear(self) -> None:
        self._clock = 0.0
        try:
            cleared = await self._transport.call.clear()
        except VoxgateError:
            return
        await self.push_frame(PlaybackClearedFrame(
            item_id=cleared.item_id, item_played_ms=cleared.item_played_ms,
            played_ms=cleared.played_ms, dropped_ms=cleared.dropped_ms), FrameDirection.UPSTREAM)
        await self._transport.on_cleared(cleared)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        try:
            await self._transport.call.play(frame.audio, item_id=self.item_id)
        except VoxgateError:
            return False
        # Pace at real time: Pipecat's bot-speaking events then follow the caller's ears.
        now = time.monotonic()
        self._clock = max(self._clock, now) + len(frame.audio) / (2 * frame.sample_rate)
        ahead = self._clock - now - PACE_AHEAD_S
        if ahead > 0:
            await asyncio.sleep(ahead)
        return True

    async def send_message(
            self, frame: OutputTransportMessageFrame | OutputTransportMessageUrgentFrame) -> None:
        message = frame.message
        payload = message if isinstance(message, (str, bytes)) else json.dumps(message)
        try:
            await self._transport.call.send(payload)
        except VoxgateError:
            pass


class VoxgateTransport(BaseTransport):
    """A Pipecat transport for one voxgate call. Events: `on_client_connected(transport, call)`,
    `on_client_disconnected(transport, call)`, `on_playback_cleared(transport, cleared)`."""

    def __init__(self, call: Call, params: TransportParams | None = None) -> None:
        super().__init__()
        self.call = call
        rate = call.sample_rate
        self._params = params or TransportParams(
            audio_in_enabled=True, audio_out_enabled=True,
            audio_in_sample_rate=rate, audio_out_sample_rate=rate)
        self._input: VoxgateInputTransport | None = None
        self._output: VoxgateOutputTransport | None = None
        self._ended = False
        self._register_event_handler("on_client_connected")
        self._register_event_handler("on_client_disconnected")
        self._register_event_handler("on_playback_cleared")

    def input(self) -> VoxgateInputTransport:
        if self._input is None:
            self._input = VoxgateInputTransport(self, self._params, name=self._input_name)
        return self._input

    def output(self) -> VoxgateOutputTransport:
        if self._output is None:
            self._output = VoxgateOutputTransport(self, self._params, name=self._output_name)
        return self._output

    async def on_connected(self) -> None:
        await self._call_event_handler("on_client_connected", self.call)

    async def on_call_ended(self) -> None:
        if not self._ended:
            self._ended = True
            await self._call_event_handler("on_client_disconnected", self.call)

    async def on_cleared(self, cleared: Cleared) -> None:
        await self._call_event_handler("on_playback_cleared", cleared)


async def serve(worker: Worker, bot: Callable[[VoxgateTransport], Awaitable[None]]) -> None:
    """For every call dispatched to `worker`: accept it, wait for its media, and run
    `bot(transport)` (which builds and runs the call's own pipeline); hang up when it returns."""

    async def one(call: Call) -> None:
        try:
            async with call:
                await call.wait_connected(30)
                transport = VoxgateTransport(call)
                await transport.on_connected()
                await bot(transport)
                await call.hangup("bot_finished")
        except (VoxgateError, TimeoutError):
            pass

    tasks: set[asyncio.Task] = set()
    async for call in worker.calls():
        task = asyncio.create_task(one(call))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
