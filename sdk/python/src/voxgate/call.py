"""One caller, as a backend sees it, on the stream its worker's transport opens for it (a
channel of the worker's `Multiplex` stream, or a `Session` stream of its own; the call sees
either only through the protocol in _call_stream.py).

A `Call` starts `PENDING` (dispatched to this worker); `accept()` attaches (`Attach` first on its
stream), `decline()` sends `Reject` on the worker stream instead. Once attached its uplink is
sorted as it comes (`_on_uplink`): audio frames into a bounded queue (the oldest frame is
dropped, and counted, when the consumer falls behind), data-channel messages into another,
progress into `call.progress`, `Cleared` answers to the `clear()` that asked, network quality
(every 5 s) into `call.quality` and to its listeners (`on_quality`, `qualities()`), each turn's
mouth-to-ear latency (a `TurnLatency`, once per turn the caller's browser reported: none from a
caller without the web client's reports) into `call.last_turn` and to its listeners (`on_turn`,
`turns()`), both through a `Feed` (_feed.py), and the session events into `connected` /
`data_channel_open` / `ended` (the ENDED event's quality summary into `call.quality_summary`).
Writes (play, clear, send, hangup) go to the stream, one at a time. A `send` before the caller's
data channel is open waits for it (bounded): the transceiver would drop the message.

A call outlives its session (docs/continuity.md): when the stream breaks (the transceiver died)
or the session ends for a transport reason (`ice_disconnected`, `shutdown`), the call waits in
`RESUMING` for `resume_window_s` for the caller to resume it on a new session; the worker then
attaches that session to this same object (`_resume`), `audio()` goes on yielding, and
`on_resumed` listeners get a `Resumed` record of what was lost. Each session is a `Leg`
(_resume.py): only the current one's messages count.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc

from voxgate import _wire
from voxgate._call_stream import CallStream, CallTransport
from voxgate._feed import END as _END
from voxgate._feed import DropOldestQueue, Feed
from voxgate._resumable import Resumable, wait_either
from voxgate._resume import RESUMABLE_REASONS, Leg, LossLedger
from voxgate._proto import voxgate_pb2 as pb
from voxgate.errors import (
    CallEndedError,
    DataChannelNotOpenError,
    TransceiverGoneError,
    VoxgateError,
    from_rpc_error,
)
from voxgate.types import (
    AudioFrame,
    AudioMode,
    CallState,
    Cleared,
    Message,
    OpusFrame,
    Progress,
    Quality,
    QualitySummary,
    Resumed,
    TurnLatency,
)

log = logging.getLogger("voxgate.call")

# Frames buffered for `audio()` before the oldest is dropped: 10 s of audio.
AUDIO_QUEUE_FRAMES = 500
# Data-channel messages buffered for `messages()` before the oldest is dropped.
MESSAGE_QUEUE = 1000
# Largest audio chunk per Downlink message: a message over the transceiver's 256 KiB limit is
# refused (_message_size.py), and a chunk must fit one with its framing (and, on a Multiplex
# stream, beside other calls').
MAX_CHUNK_BYTES = 128 * 1024
ATTACH_TIMEOUT_S = 10.0
HANGUP_TIMEOUT_S = 5.0
# Quality updates buffered per `qualities()` iterator before the oldest is dropped: a minute.
QUALITY_QUEUE = 12
# Turns buffered per `turns()` iterator before the oldest is dropped.
TURN_QUEUE = 32
# How long `send` waits, by default, for the caller's data channel to open. It opens shortly
# after the media connects; a caller whose channel stays shut this long likely has none.
DATA_CHANNEL_TIMEOUT_S = 10.0

class Call(Resumable):
    """A session dispatched to this worker (see the module doc for its life)."""

    def __init__(
        self,
        *,
        session_id: str,
        metadata: Mapping[str, str],
        attempt: int,
        signed_metadata: Mapping[str, str] | None = None,
        caller_metadata: Mapping[str, str] | None = None,
        worker_id: str,
        ingress: str = "",
        ingress_reason: str = "",
        target: str,
        transport: CallTransport,
        sample_rate: int,
        mode: AudioMode | int = AudioMode.PCM,
        progress_interval_ms: int = 0,
        encoder: pb.OpusEncoder | None = None,
        reject: Callable[[str, str], None],
        on_done: Callable[[Call], None],
        call_id: str = "",
        resume_window_s: float = 0.0,
    ) -> None:
        self.session_id = session_id
        #: The call this session carries: the id of its first session (it stays when the call
        #: resumes on a new session, whose id `session_id` then is).
        self.call_id = call_id or session_id
        #: The session's generation in the call: 1, then 2 after the first resume, ...
        self.generation = 1
        #: Every resume of this call so far (see `on_resumed`).
        self.resumes: list[Resumed] = []
        #: What the application server signed into the caller's per-call token (its `meta`):
        #: the only metadata the caller cannot choose. Empty for the static token.
        self.signed_metadata: dict[str, str] = dict(signed_metadata or {})
        #: What the caller sent: its POST's query parameters and X-Voxgate-* headers. Anyone
        #: with a token chooses these; never take them for who the caller is.
        self.caller_metadata: dict[str, str] = dict(caller_metadata or {})
        #: Both merged, a signed value winning a key in both (the transceiver's older,
        #: merged map, kept for backends written before the split): a key the token did not
        #: set may come from the caller here.
        self.metadata: dict[str, str] = dict(metadata)
        #: 1 for the first dispatch, 2 after a worker was lost or declined, ...
        self.attempt = attempt
        #: The relay ingress the caller was told to send media to (a name from the
        #: transceiver's --ingress map), "" when the transceiver runs without relays.
        self.ingress = ingress
        #: Why that ingress: "header" (a trusted proxy's header), "cidr" (the caller's
        #: network) or "default"; "" without relays.
        self.ingress_reason = ingress_reason
        #: The transceiver this call lives on.
        self.target = target
        #: The PCM rate (Hz) of the caller's frames and of the audio `play` takes.
        self.sample_rate = sample_rate
        self.mode = AudioMode(mode)
        #: Latest playback progress (updated every `progress_interval_ms` of played audio).
        self.progress = Progress()
        #: The network quality of the whole call, set when it ends; None if the call had no
        #: sample (under 5 s) or ended without the transceiver's ENDED.
        self.quality_summary: QualitySummary | None = None
        #: Set when the caller's media flows (ICE + DTLS done).
        self.connected = asyncio.Event()
        #: Set when the caller's data channel is open (`send` waits for it).
        self.data_channel_open = asyncio.Event()
        #: Set when the session is over; `end_reason` says why.
        self.ended = asyncio.Event()
        self.end_reason: str | None = None
        #: Set when the stream broke rather than ended (e.g. the transceiver died).
        self.error: VoxgateError | None = None
        self._worker_id = worker_id
        self._transport = transport
        self._progress_interval_ms = progress_interval_ms
        self._encoder = encoder
        self._reject = reject
        self._on_done = on_done
        self._stream: CallStream | None = None
        self._attached = asyncio.Event()
        self._audio = DropOldestQueue(AUDIO_QUEUE_FRAMES)
        self._messages = DropOldestQueue(MESSAGE_QUEUE)
        self._clears: deque[asyncio.Future[Cleared]] = deque()
        self._state = CallState.PENDING
        self._end_listeners: list[Callable[[Call], None]] = []
        self._qualities: Feed[Quality] = Feed("on_quality", QUALITY_QUEUE,
                                              lambda: self.session_id)
        self._turns: Feed[TurnLatency] = Feed("on_turn", TURN_QUEUE, lambda: self.session_id)
        self._resume_window_s = resume_window_s
        self._attach_timeout_s = ATTACH_TIMEOUT_S
        self._leg: Leg | None = None
        # A resume's new session until its ATTACHED, and whether its stream failed first.
        self._pending_leg: Leg | None = None
        self._pending_failed = asyncio.Event()
        self._ledger = LossLedger(sample_rate)
        self._resume_listeners: list[Callable[[Resumed], None]] = []
        # While RESUMING: how the session was lost (its end reason or error), and the task that
        # ends the call when the window passes.
        self._lost: tuple[str | None, VoxgateError | None] | None = None
        self._window: asyncio.Task | None = None
        # After a resume, until the new session's first frame: what the record is built from.
        self._pending_resumed: tuple[str, LossLedger] | None = None
        self._fallback: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"Call({self.session_id!r}, attempt={self.attempt}, state={self._state})"

    @property
    def state(self) -> CallState:
        return self._state

    @property
    def quality(self) -> Quality | None:
        """The caller's network as last measured (every 5 s while connected); None until the
        first measurement."""
        return self._qualities.latest

    @property
    def last_turn(self) -> TurnLatency | None:
        """The latest turn's mouth-to-ear latency; None until the caller's browser reported
        one (a caller without the web client's turn reports has none)."""
        return self._turns.latest

    @property
    def frames_dropped(self) -> int:
        """Caller frames dropped because `audio()` was not consumed fast enough."""
        return self._audio.dropped

    # ---- accept / decline ---------------------------------------------------------------

    async def accept(self) -> Call:
        """Attaches: this worker owns the call from now on. Raises `UnknownSessionError` if the
        session is gone, `SessionOwnedError` if another backend took it."""
        if self._state is not CallState.PENDING:
            raise VoxgateError(f"call {self.session_id} is {self._state}, cannot accept")
        self._state = CallState.ATTACHED
        attach = pb.Attach(
            session_id=self.session_id, worker_id=self._worker_id,
            sample_rate_hz=self.sample_rate, mode=int(self.mode),
            progress_interval_ms=self._progress_interval_ms, encoder=self._encoder)
        self._leg = Leg(self, self.session_id)
        try:
            self._stream = await self._transport.open(self._leg, attach)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            err = (from_rpc_error(e, f"attach to session {self.session_id}")
                   if isinstance(e, grpc.RpcError) else
                   TransceiverGoneError(f"attach to session {self.session_id}: stream closed"))
            self._finish(None, err)
            self._decline_unanswered()
            raise self._ended_error() from None
        await wait_either(self._attached, self.ended, ATTACH_TIMEOUT_S)
        if not self._attached.is_set():
            if self.error is None and not self.ended.is_set():
                self._stream.drop()
                self._finish(None, TransceiverGoneError(
                    f"attach to session {self.session_id}: no answer in {ATTACH_TIMEOUT_S:.0f} s"))
            if self.error is not None:
                self._decline_unanswered()
                raise self.error
            raise CallEndedError(f"session {self.session_id} ended while attaching "
                                 f"({self.end_reason})")
        return self

    def _decline_unanswered(self) -> None:
        """An attach that failed because the stream broke (or went unanswered) declines the
        offer, so the transceiver offers the call again now instead of after its attach timeout.
        The transceiver re-offers the sessions of a stream it lost at once, so an offer can come
        after it saw the break and before this worker did, and its attach go into a dead stream.
        A refusal (unknown session, owned elsewhere) needs no decline; the transceiver acts on a
        decline only while it is offering this very attempt to this worker."""
        if isinstance(self.error, TransceiverGoneError):
            self._reject(self.session_id, f"attach failed: {self.error}")

    async def decline(self, reason: str = "declined") -> None:
        """Refuses the call: the transceiver offers it to another worker."""
        if self._state is not CallState.PENDING:
            raise VoxgateError(f"call {self.session_id} is {self._state}, cannot decline")
        self._reject(self.session_id, reason)
        self._finish("declined", None)

    async def __aenter__(self) -> Call:
        if self._state is CallState.PENDING:
            await self.accept()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- uplink ---------------------------------------------------------------------------

    def audio(self) -> AsyncIterator[AudioFrame | OpusFrame]:
        """The caller's audio, 20 ms per frame, until the call ends. Raises
        `TransceiverGoneError` if the stream broke instead."""
        return self._drain(self._audio)

    def messages(self) -> AsyncIterator[Message]:
        """Data-channel messages from the caller, until the call ends (raises as `audio()`)."""
        return self._drain(self._messages)

    async def _drain(self, queue: DropOldestQueue) -> AsyncIterator[Any]:
        """The queue's items until the call's end (the sentinel stays for other iterators)."""
        while True:
            item = await queue.get()
            if item is _END:
                queue.put(_END)
                if self.error is not None:
                    raise self.error
                return
            yield item

    def qualities(self) -> AsyncIterator[Quality]:
        """Each network-quality measurement from now on (every 5 s while the call is
        connected), until the call ends (raises as `audio()`). `call.quality` has the latest."""
        return self._qualities.updates()

    def on_quality(self, listener: Callable[[Quality], None]) -> Callable[[], None]:
        """Calls `listener(quality)` with each network-quality measurement (every 5 s while
        the call is connected) until the call ends. Returns a function that stops it."""
        return self._qualities.listen(listener)

    def turns(self) -> AsyncIterator[TurnLatency]:
        """Each turn's latency from now on (once per turn the caller's browser reported), until
        the call ends (raises as `audio()`). `call.last_turn` has the latest."""
        return self._turns.updates()

    def on_turn(self, listener: Callable[[TurnLatency], None]) -> Callable[[], None]:
        """Calls `listener(turn)` with each turn's latency (once per turn the caller's browser
        reported) until the call ends. Returns a function that stops it."""
        return self._turns.listen(listener)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Waits until the caller's media flows; raises `CallEndedError` if it ends first."""
        await wait_either(self.connected, self.ended, timeout)
        if not self.connected.is_set():
            if self.ended.is_set():
                raise self.error or CallEndedError(
                    f"session {self.session_id} ended ({self.end_reason}) before connecting")
            raise TimeoutError(f"session {self.session_id} not connected within {timeout} s")

    async def wait_data_channel_open(self, timeout: float | None = DATA_CHANNEL_TIMEOUT_S) -> None:
        """Waits until the caller's data channel is open (at most `timeout` seconds; None: no
        bound). Raises `DataChannelNotOpenError` when it is not open in time, `CallEndedError`
        (or the error that broke the call) when the call ends first."""
        if self._state is CallState.PENDING:
            raise VoxgateError(f"call {self.session_id} is not accepted yet")
        if not self.data_channel_open.is_set():
            await wait_either(self.data_channel_open, self.ended, timeout)
        if self.ended.is_set():
            raise self._ended_error()
        if not self.data_channel_open.is_set():
            raise DataChannelNotOpenError(
                f"session {self.session_id}: the caller's data channel did not open within "
                f"{timeout} s")

    def on_ended(self, listener: Callable[[Call], None]) -> None:
        """Calls `listener(call)` once when the call ends (at once if it already has)."""
        if self._state is CallState.ENDED:
            listener(self)
        else:
            self._end_listeners.append(listener)

    # ---- what the stream hands over (UplinkSink, _call_stream.py) -------------------------

    def _leg_uplink(self, leg: Leg, up: pb.Uplink) -> None:
        if leg is self._pending_leg and up.WhichOneof("kind") == "event" and (
                up.event.kind == pb.SessionEvent.ATTACHED):
            # The resumed session is ours: from here only its messages count (its CONNECTED
            # and DATA_CHANNEL_OPEN follow).
            self._leg, self._pending_leg = leg, None
            self.connected.clear()
            self.data_channel_open.clear()
        if leg is self._leg:
            self._on_uplink(up)

    def _leg_closed(self, leg: Leg, error: VoxgateError | None) -> None:
        if leg is self._pending_leg:
            self._pending_failed.set()  # the resume's attach was refused or broke
        elif leg is self._leg:
            self._on_closed(error)

    def _on_uplink(self, up: pb.Uplink) -> None:
        """Sorts one uplink message of the current session; the ENDED event ends the call
        (or, for a transport reason, waits for a resume)."""
        kind = up.WhichOneof("kind")
        if kind == "audio":
            self._on_caller_frame(up.audio.arrival_unix_micros)
            self._audio.put(_wire.audio_frame(up.audio))
        elif kind == "opus":
            self._on_caller_frame(up.opus.arrival_unix_micros)
            self._audio.put(_wire.opus_frame(up.opus))
        elif kind == "progress":
            self.progress = _wire.progress(up.progress)
            self._ledger.progress(self.progress.played_ms, self.progress.item_id)
        elif kind == "cleared":
            self._ledger.cleared(up.cleared.played_ms, up.cleared.dropped_ms)
            if self._clears:
                fut = self._clears.popleft()
                if not fut.done():
                    fut.set_result(_wire.cleared(up.cleared))
        elif kind == "data":
            self._messages.put(_wire.message(up.data))
        elif kind == "quality":
            self._qualities.publish(_wire.quality(up.quality))
        elif kind == "turn":
            self._turns.publish(_wire.turn_latency(up.turn))
        elif kind == "event":
            ev = up.event
            if ev.kind == pb.SessionEvent.ATTACHED:
                if ev.generation:
                    self.generation = ev.generation
                self._attached.set()
            elif ev.kind == pb.SessionEvent.CONNECTED:
                self.connected.set()
                if self._pending_resumed is not None and self._fallback is None:
                    self._fallback = asyncio.get_running_loop().create_task(
                        self._resumed_without_frame())
            elif ev.kind == pb.SessionEvent.DATA_CHANNEL_OPEN:
                self.data_channel_open.set()
            elif ev.kind == pb.SessionEvent.ENDED:
                self.quality_summary = _wire.quality_summary(ev)
                if ev.reason in RESUMABLE_REASONS and self._may_resume():
                    self._enter_resuming(ev.reason, None)
                else:
                    self._finish(ev.reason or "ended", None)

    def _on_closed(self, error: VoxgateError | None) -> None:
        """The stream is over: after ENDED nothing is left to do; a close this call asked for
        ends it as "closed"; anything else broke it."""
        if self._state in (CallState.ENDED, CallState.RESUMING):
            return
        if error is None:
            if self._state is CallState.CLOSING:
                self._finish("closed", None)
                return
            error = TransceiverGoneError(
                f"session {self.session_id}: the transceiver closed the stream without ENDED")
        if isinstance(error, TransceiverGoneError) and self._may_resume():
            self._enter_resuming(None, error)
            return
        self._finish(None, error)

    def _finish(self, reason: str | None, error: VoxgateError | None) -> None:
        if self._state is CallState.ENDED:
            return
        self._state = CallState.ENDED
        self._resume_listeners.clear()
        for task in (self._window, self._fallback):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self.error = error
        self.end_reason = reason if error is None else "error"
        if error is not None:
            log.warning("%s", error)
        else:
            log.info("session %s ended (%s)", self.session_id, reason)
        self._audio.put(_END)
        self._messages.put(_END)
        self._qualities.close(error)
        self._turns.close(error)
        while self._clears:
            fut = self._clears.popleft()
            if not fut.done():
                fut.set_exception(self._ended_error())
        self.ended.set()
        self._on_done(self)
        for listener in self._end_listeners:
            try:
                listener(self)
            except Exception:
                log.exception("on_ended listener of %s failed", self.session_id)

    # ---- downlink -------------------------------------------------------------------------

    def _ended_error(self) -> VoxgateError:
        if self.error is not None:
            return self.error
        return CallEndedError(f"session {self.session_id} has ended ({self.end_reason})")

    async def _write(self, msg: pb.Downlink) -> None:
        if self._state is CallState.RESUMING:
            log.debug("call %s is resuming: %s dropped", self.call_id, msg.WhichOneof("kind"))
            return
        if self._stream is None or self._state is not CallState.ATTACHED:
            if self._state is CallState.PENDING:
                raise VoxgateError(f"call {self.session_id} is not accepted yet")
            raise self._ended_error()
        stream = self._stream
        try:
            await stream.write(msg)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            if isinstance(e, grpc.RpcError) and stream is self._stream:
                err = from_rpc_error(e, f"session {self.session_id}")
                # A write can fail on this side only (gRPC Core sets the status locally), with
                # the HTTP/2 stream still open: let go of the call on the wire too, so that the
                # transceiver sees its owner go and dispatches the call again instead of
                # waiting on a dead stream.
                # A failed write ends the call as before: the transceiver offers the session
                # again if it lives (a resume needs the caller to lose its session).
                stream.drop()
                self._finish(None, err)
            if self._state is CallState.RESUMING or stream is not self._stream:
                return  # the session was lost (or replaced) under the write: dropped
            raise self._ended_error() from None

    async def play(self, pcm: bytes, item_id: str = "") -> None:
        """Queues PCM16 mono audio (at `sample_rate`, any length) for the caller. `item_id`
        labels the response it belongs to; progress and clear report per item."""
        if len(pcm) % 2:
            raise ValueError("PCM16 audio must have an even number of bytes")
        if self._state is CallState.RESUMING:
            # Nobody would hear it: counted for the resume's report instead.
            self._ledger.dropped(len(pcm), item_id)
            return
        self._ledger.queued(len(pcm), item_id)
        for i in range(0, len(pcm), MAX_CHUNK_BYTES):
            await self._write(pb.Downlink(audio=pb.AudioChunk(
                pcm=pcm[i:i + MAX_CHUNK_BYTES], item_id=item_id)))

    async def play_opus(self, packet: bytes) -> None:
        """Queues one 20 ms Opus packet (`AudioMode.OPUS_PASSTHROUGH` only)."""
        await self._write(pb.Downlink(opus=pb.OpusPacket(data=packet)))

    async def clear(self) -> Cleared:
        """Barge-in: drops all queued audio now. Returns what was played and dropped."""
        if self._state is CallState.RESUMING:
            return Cleared(played_ms=0, dropped_ms=0, item_id="", item_played_ms=0)
        fut: asyncio.Future[Cleared] = asyncio.get_running_loop().create_future()
        self._clears.append(fut)
        try:
            await self._write(pb.Downlink(clear=pb.Clear()))
        except VoxgateError:
            if fut in self._clears:
                self._clears.remove(fut)
            raise
        return await fut

    async def send(self, payload: str | bytes, label: str = "oai-events", *,
                   timeout: float | None = DATA_CHANNEL_TIMEOUT_S) -> None:
        """Sends a data-channel message (text for `str`, binary for `bytes`) to the caller.
        Before the caller's data channel is open it waits for it, at most `timeout` seconds
        (None: no bound), then raises `DataChannelNotOpenError`: a message is never dropped
        unsent and unsaid. One over the transceiver's limit on one message (256 KiB serialized)
        raises `MessageTooLargeError` and is not sent; the call goes on."""
        msg = _wire.data_message(payload, label)
        await self.wait_data_channel_open(timeout)
        await self._write(pb.Downlink(data=msg))

    async def hangup(self, reason: str = "backend_hangup") -> str | None:
        """Ends the call for the caller too; returns the end reason the transceiver gave."""
        if self._state is CallState.RESUMING:
            self._finish(reason, None)
        if self._state is CallState.ATTACHED:
            try:
                await self._write(pb.Downlink(hangup=pb.Hangup(reason=reason)))
            except VoxgateError:
                pass  # the stream is gone: the call has ended already
            try:
                await asyncio.wait_for(self.ended.wait(), HANGUP_TIMEOUT_S)
            except asyncio.TimeoutError:
                await self.aclose()
        return self.end_reason

    async def aclose(self) -> None:
        """Drops this backend's stream without hanging up: the transceiver re-dispatches the
        call to another worker (or ends it). Declines a pending call; a no-op on an ended
        one."""
        if self._state is CallState.PENDING:
            await self.decline("closed")
            return
        if self._state is CallState.RESUMING:
            self._finish("closed", None)
            return
        if self._state is CallState.ATTACHED:
            self._state = CallState.CLOSING
            if self._stream is not None:
                await self._stream.aclose()
        if self._state is not CallState.ENDED:
            self._finish("closed", None)

    #: The former name of `aclose`.
    close = aclose
