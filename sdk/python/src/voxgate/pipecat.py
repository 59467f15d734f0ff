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
  event handler, so the context can be truncated where the caller stopped hearing;
- the connection, as Pipecat's transports report it: once the pipeline runs and the caller's
  media flows, `on_client_connected(transport, call)` fires and the input pushes a
  `ClientConnectedFrame`; when the call ends `on_client_disconnected(transport, call)` fires and
  (`VoxgateParams.cancel_on_disconnect`) a `CancelWorkerFrame` goes upstream, since nobody is
  left to hear the pipeline;
- network quality: each measurement of the caller's network (every 5 s while connected: RTT,
  jitter, loss, MOS per direction) goes downstream as a `CallQualityFrame` and to the
  `on_call_quality(transport, quality)` event handler; the summary of the whole call is
  `call.quality_summary` by the time `on_client_disconnected` fires;
- turn latency: each turn's mouth-to-ear latency (the caller's end of speech to the reply's
  first audio at its ear, split into measured, estimated and client-reported parts that sum to
  the total), once per turn the caller's browser reported (the web client does; other callers
  produce none), goes downstream as a `CallTurnFrame` and to the `on_call_turn(transport, turn)`
  event handler;
- errors: a call that broke (the transceiver vanished, ...) is an `ErrorFrame` upstream
  (`push_error`) and a log line; a failed write, clear or message is logged (on Pipecat's
  logger), at debug level once the call has simply ended.

One worker serves many calls, each with its own pipeline: `serve(worker, bot)` runs
`bot(transport)` for every dispatched call, in a `TaskSet` cancelled when `serve` ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    CancelWorkerFrame,
    ClientConnectedFrame,
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

from voxgate.call import DATA_CHANNEL_TIMEOUT_S, Call
from voxgate.errors import CallEndedError, VoxgateError
from voxgate.task_set import TaskSet
from voxgate.types import AudioFrame, Cleared, Quality, Resumed, TurnLatency
from voxgate.worker import Worker

# Real-time pacing may run this far ahead of the caller (audio queued at the transceiver).
PACE_AHEAD_S = 0.04
# How long `serve` waits for a call's media before giving the call up.
CONNECT_TIMEOUT_S = 30.0


class VoxgateParams(TransportParams):
    """The parameters of a `VoxgateTransport`: Pipecat's `TransportParams` with audio on both
    ways (at the call's sample rate unless set), and voxgate's own below."""

    audio_in_enabled: bool = True
    audio_out_enabled: bool = True
    #: How far real-time pacing may run ahead of what the caller hears.
    pace_ahead_secs: float = PACE_AHEAD_S
    #: The data-channel label `OutputTransportMessageFrame`s go out on.
    message_label: str = "oai-events"
    #: How long an outgoing message waits for the caller's data channel to open.
    message_timeout_secs: float = DATA_CHANNEL_TIMEOUT_S
    #: Cancel the pipeline (`CancelWorkerFrame` upstream) when the call ends.
    cancel_on_disconnect: bool = True


@dataclass
class PlaybackClearedFrame(SystemFrame):
    """Upstream after an interruption: the caller heard `item_played_ms` of item `item_id`."""

    item_id: str = ""
    item_played_ms: int = 0
    played_ms: int = 0
    dropped_ms: int = 0


@dataclass
class CallQualityFrame(SystemFrame):
    """Downstream every 5 s while the call is connected: the caller's network as the
    transceiver measured it (`voxgate.Quality`: RTT, and jitter, loss and MOS per direction)."""

    quality: Quality = Quality()


@dataclass
class CallTurnFrame(SystemFrame):
    """Downstream once per turn the caller's browser reported: where the time from the caller's
    end of speech to the reply's first audio at its ear went (`voxgate.TurnLatency`)."""

    turn: TurnLatency = TurnLatency()


@dataclass
class CallResumedFrame(SystemFrame):
    """Downstream when the call continued on a new session (its transceiver died or drained,
    docs/continuity.md): the pipeline kept running; `resumed` says what the gap lost."""

    resumed: Resumed | None = None


def _log_failed(who: object, what: str, e: VoxgateError) -> None:
    """A failed call operation, logged: at debug level when the call has simply ended (every
    write after that fails the same way), as a warning otherwise."""
    if isinstance(e, CallEndedError):
        logger.debug(f"{who}: {what}: {e}")
    else:
        logger.warning(f"{who}: {what}: {e}")


class VoxgateInputTransport(BaseInputTransport):
    def __init__(self, transport: VoxgateTransport, params: VoxgateParams, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._transport = transport
        self._tasks: list[asyncio.Task] = []

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        if not self._tasks:
            self._tasks = [self.create_task(self._read_audio()),
                           self.create_task(self._read_messages()),
                           self.create_task(self._read_quality()),
                           self.create_task(self._read_turns()),
                           self.create_task(self._read_resumes()),
                           self.create_task(self._watch_call())]
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

    async def _watch_call(self) -> None:
        """Reports the call's connection and its end, and the error that broke it."""
        call = self._transport.call
        try:
            await call.wait_connected()
        except VoxgateError:
            pass  # ended before its media flowed: reported as any end, below
        else:
            await self._transport._client_connected()
            await self.push_frame(ClientConnectedFrame())
        await call.ended.wait()
        if call.error is not None:
            await self.push_error(f"{self}: voxgate call {call.session_id} broke: {call.error}",
                                  exception=call.error, force_treat_as_permanent=True)
        await self._transport._client_disconnected()
        if self._params.cancel_on_disconnect:
            await self.push_frame(CancelWorkerFrame(reason=f"call ended ({call.end_reason})"),
                                  FrameDirection.UPSTREAM)

    async def _read_audio(self) -> None:
        try:
            async for frame in self._transport.call.audio():
                if isinstance(frame, AudioFrame):
                    await self.push_audio_frame(InputAudioRawFrame(
                        audio=frame.pcm, sample_rate=frame.sample_rate, num_channels=1))
        except VoxgateError:
            return  # the call broke: `_watch_call` reports it, once

    async def _read_messages(self) -> None:
        try:
            async for msg in self._transport.call.messages():
                payload: Any = msg.text if msg.text is not None else msg.binary
                if msg.text is not None:
                    try:
                        payload = json.loads(msg.text)
                    except ValueError:
                        pass  # not JSON: the text as it came
                await self.broadcast_frame(InputTransportMessageFrame, message=payload)
        except VoxgateError:
            return  # the call broke: `_watch_call` reports it, once


    async def _read_quality(self) -> None:
        try:
            async for quality in self._transport.call.qualities():
                await self.push_frame(CallQualityFrame(quality=quality))
                await self._transport._call_quality(quality)
        except VoxgateError:
            return  # the call broke: `_watch_call` reports it, once

    async def _read_turns(self) -> None:
        try:
            async for turn in self._transport.call.turns():
                await self.push_frame(CallTurnFrame(turn=turn))
                await self._transport._call_turn(turn)
        except VoxgateError:
            return  # the call broke: `_watch_call` reports it, once

    async def _read_resumes(self) -> None:
        """Each resume of the call, as a frame and an `on_call_resumed` event; the input keeps
        reading the same `call.audio()` across it."""
        resumes: asyncio.Queue[Resumed] = asyncio.Queue()
        stop = self._transport.call.on_resumed(resumes.put_nowait)
        try:
            while True:
                resumed = await resumes.get()
                await self.push_frame(CallResumedFrame(resumed=resumed))
                await self._transport._call_resumed(resumed)
        finally:
            stop()


class VoxgateOutputTransport(BaseOutputTransport):
    def __init__(self, transport: VoxgateTransport, params: VoxgateParams, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._transport = transport
        self._items = 0
        self.item_id = "item-0"
        self._clock = 0.0  # monotonic time the played audio runs out
        self._write_failed = False

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
        except VoxgateError as e:
            _log_failed(self, "clear on interruption", e)
            return
        await self.push_frame(PlaybackClearedFrame(
            item_id=cleared.item_id, item_played_ms=cleared.item_played_ms,
            played_ms=cleared.played_ms, dropped_ms=cleared.dropped_ms), FrameDirection.UPSTREAM)
        await self._transport._playback_cleared(cleared)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        try:
            await self._transport.call.play(frame.audio, item_id=self.item_id)
        except VoxgateError as e:
            if not self._write_failed:  # once: every later frame fails the same way
                self._write_failed = True
                _log_failed(self, "audio not played", e)
            return False
        # Pace at real time: Pipecat's bot-speaking events then follow the caller's ears.
        now = time.monotonic()
        self._clock = max(self._clock, now) + len(frame.audio) / (2 * frame.sample_rate)
        ahead = self._clock - now - self._params.pace_ahead_secs
        if ahead > 0:
            await asyncio.sleep(ahead)
        return True

    async def send_message(
            self, frame: OutputTransportMessageFrame | OutputTransportMessageUrgentFrame) -> None:
        message = frame.message
        payload = message if isinstance(message, (str, bytes)) else json.dumps(message)
        try:
            await self._transport.call.send(payload, self._params.message_label,
                                            timeout=self._params.message_timeout_secs)
        except VoxgateError as e:
            _log_failed(self, "message not sent", e)


class VoxgateTransport(BaseTransport):
    """A Pipecat transport for one voxgate call. Events: `on_client_connected(transport, call)`,
    `on_client_disconnected(transport, call)`, `on_playback_cleared(transport, cleared)`,
    `on_call_quality(transport, quality)`, `on_call_turn(transport, turn)`,
    `on_call_resumed(transport, resumed)` (the call continued on a new session; the pipeline
    runs on)."""

    def __init__(self, call: Call, params: TransportParams | None = None) -> None:
        super().__init__()
        self.call = call
        self._params = _params_for(call, params)
        self._input: VoxgateInputTransport | None = None
        self._output: VoxgateOutputTransport | None = None
        self._connected = False
        self._ended = False
        self._register_event_handler("on_client_connected")
        self._register_event_handler("on_client_disconnected")
        self._register_event_handler("on_playback_cleared")
        self._register_event_handler("on_call_quality")
        self._register_event_handler("on_call_turn")
        self._register_event_handler("on_call_resumed")

    @property
    def params(self) -> VoxgateParams:
        return self._params

    def input(self) -> VoxgateInputTransport:
        if self._input is None:
            self._input = VoxgateInputTransport(self, self._params, name=self._input_name)
        return self._input

    def output(self) -> VoxgateOutputTransport:
        if self._output is None:
            self._output = VoxgateOutputTransport(self, self._params, name=self._output_name)
        return self._output

    async def _client_connected(self) -> None:
        if not self._connected:
            self._connected = True
            await self._call_event_handler("on_client_connected", self.call)

    async def _client_disconnected(self) -> None:
        if not self._ended:
            self._ended = True
            await self._call_event_handler("on_client_disconnected", self.call)

    async def _playback_cleared(self, cleared: Cleared) -> None:
        await self._call_event_handler("on_playback_cleared", cleared)

    async def _call_quality(self, quality: Quality) -> None:
        await self._call_event_handler("on_call_quality", quality)

    async def _call_turn(self, turn: TurnLatency) -> None:
        await self._call_event_handler("on_call_turn", turn)

    async def _call_resumed(self, resumed: Resumed) -> None:
        await self._call_event_handler("on_call_resumed", resumed)


def _params_for(call: Call, params: TransportParams | None) -> VoxgateParams:
    """`params` as `VoxgateParams` (plain `TransportParams` get voxgate's defaults), with the
    call's sample rate where no rate is set: the audio comes and goes at that rate."""
    if params is None:
        params = VoxgateParams()
    elif not isinstance(params, VoxgateParams):
        params = VoxgateParams(**dict(params))
    rates = {"audio_in_sample_rate": params.audio_in_sample_rate or call.sample_rate,
             "audio_out_sample_rate": params.audio_out_sample_rate or call.sample_rate}
    return params.model_copy(update=rates)


async def serve(worker: Worker, bot: Callable[[VoxgateTransport], Awaitable[None]], *,
                params: TransportParams | None = None,
                connect_timeout_secs: float = CONNECT_TIMEOUT_S) -> None:
    """For every call dispatched to `worker`: accept it, wait for its media, and run
    `bot(transport)` (which builds and runs the call's own pipeline); hang up when it returns.
    Runs until the worker closes; the calls' tasks are cancelled when it ends (or is
    cancelled). A call that fails is logged, and the others go on."""

    async def one(call: Call) -> None:
        try:
            async with call:
                await call.wait_connected(connect_timeout_secs)
                await bot(VoxgateTransport(call, params))
                await call.hangup("bot_finished")
        except (VoxgateError, TimeoutError) as e:
            logger.warning(f"voxgate call {call.session_id}: {e}")
        except Exception:
            logger.exception(f"voxgate call {call.session_id}: the bot failed")

    async with TaskSet("voxgate.pipecat.serve") as tasks:
        async for call in worker.calls():
            tasks.create_task(one(call), name=f"voxgate-bot-{call.session_id}")
