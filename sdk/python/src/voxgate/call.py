"""One caller, as a backend sees it: a channel of the worker's `Multiplex` stream to the
transceiver that owns the call, or a `Session` stream of its own.

A `Call` starts pending (dispatched to this worker); `accept()` attaches (`Attach` first on its
channel or stream), `decline()` sends `Reject` on the worker stream instead. Once attached its
uplink is sorted as it comes (by the stream's reader, `_on_uplink`): audio frames into a bounded
queue (the oldest frame is dropped, and counted, when the consumer falls behind), data-channel
messages into another, progress into `call.progress`, `Cleared` answers to the `clear()` that
asked, and the session events into `connected` / `ended`. Writes (play, clear, send, hangup) go
to the channel or stream, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

import grpc

from voxgate._proto import voxgate_pb2 as pb
from voxgate._serial_writer import SerialWriter
from voxgate.errors import (
    CallEndedError,
    TransceiverGoneError,
    VoxgateError,
    from_rpc_error,
    from_status,
)
from voxgate.types import AudioFrame, Cleared, Message, OpusFrame, Progress

if TYPE_CHECKING:
    from voxgate._multiplex import Multiplex
    from voxgate._proto import voxgate_pb2_grpc as pb_grpc

log = logging.getLogger("voxgate.call")

# Frames buffered for `audio()` before the oldest is dropped: 10 s of audio.
AUDIO_QUEUE_FRAMES = 500
# Data-channel messages buffered for `messages()` before the oldest is dropped.
MESSAGE_QUEUE = 1000
# Largest audio chunk per Downlink message: the transceiver refuses gRPC messages over 256 KiB,
# and a chunk must fit one with its framing (and, on a Multiplex stream, beside other calls').
MAX_CHUNK_BYTES = 128 * 1024
ATTACH_TIMEOUT_S = 10.0
HANGUP_TIMEOUT_S = 5.0

_END = object()  # queue sentinel: the call is over


class _DropOldestQueue:
    """A bounded FIFO for one consumer: a full queue drops its oldest item and counts it."""

    def __init__(self, maxlen: int) -> None:
        self._items: deque = deque()
        self._maxlen = maxlen
        self._ready = asyncio.Event()
        self.dropped = 0

    def put(self, item) -> None:
        if len(self._items) >= self._maxlen:
            self._items.popleft()
            self.dropped += 1
        self._items.append(item)
        self._ready.set()

    async def get(self):
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class Call:
    """A session dispatched to this worker (see the module doc for its life)."""

    def __init__(
        self,
        *,
        session_id: str,
        metadata: Mapping[str, str],
        attempt: int,
        worker_id: str,
        ingress: str = "",
        ingress_reason: str = "",
        target: str,
        stub: pb_grpc.BridgeStub,
        auth: tuple[tuple[str, str], ...],
        sample_rate: int,
        mode: int,
        progress_interval_ms: int,
        encoder: pb.OpusEncoder | None = None,
        reject: Callable[[str, str], None],
        on_done: Callable[[Call], None],
        mux: Multiplex | None = None,
    ) -> None:
        self.session_id = session_id
        #: Query parameters of the caller's POST and its X-Voxgate-* headers.
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
        self.sample_rate = sample_rate
        #: Latest playback progress (updated every `progress_interval_ms` of played audio).
        self.progress = Progress()
        #: Set when the caller's media flows (ICE + DTLS done).
        self.connected = asyncio.Event()
        #: Set when the caller's data channel is open (`send` before that is dropped by the
        #: transceiver).
        self.data_channel_open = asyncio.Event()
        #: Set when the session is over; `end_reason` says why.
        self.ended = asyncio.Event()
        self.end_reason: str | None = None
        #: Set when the stream broke rather than ended (e.g. the transceiver died).
        self.error: VoxgateError | None = None
        self._worker_id = worker_id
        self._stub = stub
        self._auth = auth
        self._mode = mode
        self._progress_interval_ms = progress_interval_ms
        self._encoder = encoder
        self._reject = reject
        self._on_done = on_done
        # The worker's Multiplex stream to this call's transceiver (None: a Session stream).
        self._mux = mux
        self._channel: int | None = None
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._writer: SerialWriter | _ChannelWriter | None = None
        self._reader: asyncio.Task | None = None
        self._attached = asyncio.Event()
        self._audio = _DropOldestQueue(AUDIO_QUEUE_FRAMES)
        self._messages = _DropOldestQueue(MESSAGE_QUEUE)
        self._clears: deque[asyncio.Future[Cleared]] = deque()
        self._state = "pending"  # -> attached | declined, -> done
        self._end_listeners: list[Callable[[Call], None]] = []

    def __repr__(self) -> str:
        return f"Call({self.session_id!r}, attempt={self.attempt}, state={self._state})"

    @property
    def frames_dropped(self) -> int:
        """Caller frames dropped because `audio()` was not consumed fast enough."""
        return self._audio.dropped

    # ---- accept / decline ---------------------------------------------------------------

    async def accept(self) -> Call:
        """Attaches: this worker owns the call from now on. Raises `UnknownSessionError` if the
        session is gone, `SessionOwnedError` if another backend took it."""
        if self._state != "pending":
            raise VoxgateError(f"call {self.session_id} is {self._state}, cannot accept")
        self._state = "attached"
        attach = pb.Attach(
            session_id=self.session_id, worker_id=self._worker_id,
            sample_rate_hz=self.sample_rate, mode=self._mode,
            progress_interval_ms=self._progress_interval_ms, encoder=self._encoder)
        try:
            if self._mux is not None:
                self._channel = await self._mux.attach(self, attach)
                self._writer = _ChannelWriter(self._mux, self._channel)
            else:
                self._stream = self._stub.Session(metadata=self._auth)
                self._writer = SerialWriter(self._stream)
                await self._writer.write(pb.Downlink(attach=attach))
                self._reader = asyncio.create_task(self._read_uplink(),
                                                   name=f"voxgate-{self.session_id}")
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            err = (from_rpc_error(e, f"attach to session {self.session_id}")
                   if isinstance(e, grpc.RpcError) else
                   TransceiverGoneError(f"attach to session {self.session_id}: stream closed"))
            self._finish(None, err)
            self._decline_unanswered()
            raise self.error from None
        attached = asyncio.create_task(self._attached.wait())
        ended = asyncio.create_task(self.ended.wait())
        await asyncio.wait({attached, ended}, timeout=ATTACH_TIMEOUT_S,
                           return_when=asyncio.FIRST_COMPLETED)
        attached.cancel()
        ended.cancel()
        if not self._attached.is_set():
            if self.error is None and not self.ended.is_set():
                self._drop()
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
        if self._state != "pending":
            raise VoxgateError(f"call {self.session_id} is {self._state}, cannot decline")
        self._state = "declined"
        self._reject(self.session_id, reason)
        self._finish("declined", None)

    async def __aenter__(self) -> Call:
        if self._state == "pending":
            await self.accept()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ---- uplink ---------------------------------------------------------------------------

    async def audio(self) -> AsyncIterator[AudioFrame | OpusFrame]:
        """The caller's audio, 20 ms per frame, until the call ends. Raises
        `TransceiverGoneError` if the stream broke instead."""
        while True:
            item = await self._audio.get()
            if item is _END:
                self._audio.put(_END)  # later iterators end too
                if self.error is not None:
                    raise self.error
                return
            yield item

    async def messages(self) -> AsyncIterator[Message]:
        """Data-channel messages from the caller, until the call ends."""
        while True:
            item = await self._messages.get()
            if item is _END:
                self._messages.put(_END)
                if self.error is not None:
                    raise self.error
                return
            yield item

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Waits until the caller's media flows; raises `CallEndedError` if it ends first."""
        connected = asyncio.create_task(self.connected.wait())
        ended = asyncio.create_task(self.ended.wait())
        done, _ = await asyncio.wait({connected, ended}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        connected.cancel()
        ended.cancel()
        if not self.connected.is_set():
            if self.ended.is_set():
                raise self.error or CallEndedError(
                    f"session {self.session_id} ended ({self.end_reason}) before connecting")
            raise TimeoutError(f"session {self.session_id} not connected within {timeout} s")

    def on_ended(self, listener: Callable[[Call], None]) -> None:
        """Calls `listener(call)` once when the call ends (at once if it already has)."""
        if self._state == "done":
            listener(self)
        else:
            self._end_listeners.append(listener)

    async def _read_uplink(self) -> None:
        """A Session stream's reader: sorts the uplink until ENDED or the stream breaks."""
        assert self._stream is not None
        reason: str | None = "stream_closed"
        error: VoxgateError | None = None
        try:
            async for up in self._stream:
                ended = self._on_uplink(up)
                if ended is not None:
                    reason = ended
                    break
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED and self._state == "closing":
                reason = "closed"
            else:
                reason = None
                error = from_rpc_error(e, f"session {self.session_id}")
        except asyncio.CancelledError:
            reason = "closed"
        if error is None and reason == "stream_closed":
            error = TransceiverGoneError(
                f"session {self.session_id}: the transceiver closed the stream without ENDED")
            reason = None
        self._finish(reason, error)
        if self._stream is not None:
            self._stream.cancel()

    def _on_uplink(self, up: pb.Uplink) -> str | None:
        """Sorts one uplink message; returns the end reason when it is the ENDED event."""
        kind = up.WhichOneof("kind")
        if kind == "audio":
            a = up.audio
            self._audio.put(AudioFrame(
                pcm=a.pcm, sequence=a.sequence, concealed=a.concealed,
                sample_rate_hz=a.sample_rate_hz, rtp_timestamp=a.rtp_timestamp,
                arrival_unix_micros=a.arrival_unix_micros))
        elif kind == "opus":
            o = up.opus
            self._audio.put(OpusFrame(
                data=o.data, rtp_sequence=o.rtp_sequence, rtp_timestamp=o.rtp_timestamp,
                arrival_unix_micros=o.arrival_unix_micros))
        elif kind == "progress":
            p = up.progress
            self.progress = Progress(p.played_ms, p.queued_ms, p.item_id, p.item_played_ms)
        elif kind == "cleared":
            c = up.cleared
            if self._clears:
                fut = self._clears.popleft()
                if not fut.done():
                    fut.set_result(Cleared(c.played_ms, c.dropped_ms, c.item_id,
                                           c.item_played_ms))
        elif kind == "data":
            d = up.data
            which = d.WhichOneof("payload")
            self._messages.put(Message(
                label=d.label, text=d.text if which == "text" else None,
                binary=d.binary if which == "binary" else None))
        elif kind == "event":
            ev = up.event
            if ev.kind == pb.SessionEvent.ATTACHED:
                self._attached.set()
            elif ev.kind == pb.SessionEvent.CONNECTED:
                self.connected.set()
            elif ev.kind == pb.SessionEvent.DATA_CHANNEL_OPEN:
                self.data_channel_open.set()
            elif ev.kind == pb.SessionEvent.ENDED:
                reason = ev.reason or "ended"
                if self._mux is not None:
                    self._finish(reason, None)  # a channel has no reader of its own to end
                return reason
        return None

    def _on_channel_closed(self, code: int, details: str) -> None:
        """The transceiver closed this call's channel (after ENDED, or instead of attaching)."""
        if self._state == "done":
            return
        if code == 0:
            if self._state == "closing":
                self._finish("closed", None)
            else:
                self._finish(None, TransceiverGoneError(
                    f"session {self.session_id}: the transceiver closed the channel without "
                    f"ENDED ({details})"))
        else:
            self._finish(None, from_status(code, details, f"session {self.session_id}"))

    def _on_transport_gone(self, error: VoxgateError | None) -> None:
        """The Multiplex stream this call rode ended or broke."""
        if self._state == "done":
            return
        if error is None and self._state == "closing":
            self._finish("closed", None)
            return
        self._finish(None, error or TransceiverGoneError(
            f"session {self.session_id}: the transceiver closed the stream without ENDED"))

    def _drop(self) -> None:
        """Lets go of the call on the wire without hanging up (the transceiver dispatches it
        again): cancels its Session stream, or releases its channel."""
        if self._mux is not None:
            if self._channel is not None:
                self._mux.release(self._channel)
        elif self._stream is not None:
            self._stream.cancel()

    def _finish(self, reason: str | None, error: VoxgateError | None) -> None:
        if self._state == "done":
            return
        self._state = "done"
        self.error = error
        self.end_reason = reason if error is None else "error"
        if error is not None:
            log.warning("%s", error)
        else:
            log.info("session %s ended (%s)", self.session_id, reason)
        self._audio.put(_END)
        self._messages.put(_END)
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
        if self._writer is None or self._state != "attached":
            if self._state == "pending":
                raise VoxgateError(f"call {self.session_id} is not accepted yet")
            raise self._ended_error()
        try:
            await self._writer.write(msg)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            if isinstance(e, grpc.RpcError):
                self._finish(None, from_rpc_error(e, f"session {self.session_id}"))
                # A write can fail on this side only (gRPC Core sets the status locally), with
                # the HTTP/2 stream still open: let go of the call on the wire too, so that the
                # transceiver sees its owner go and dispatches the call again instead of
                # waiting on a dead stream.
                self._drop()
            raise self._ended_error() from None

    async def play(self, pcm: bytes, item_id: str = "") -> None:
        """Queues PCM16 mono audio (at the attach sample rate, any length) for the caller.
        `item_id` labels the response it belongs to; progress and clear report per item."""
        if len(pcm) % 2:
            raise ValueError("PCM16 audio must have an even number of bytes")
        for i in range(0, len(pcm), MAX_CHUNK_BYTES):
            await self._write(pb.Downlink(audio=pb.AudioChunk(
                pcm=pcm[i:i + MAX_CHUNK_BYTES], item_id=item_id)))

    async def play_opus(self, packet: bytes) -> None:
        """Queues one 20 ms Opus packet (AUDIO_MODE_OPUS_PASSTHROUGH only)."""
        await self._write(pb.Downlink(opus=pb.OpusPacket(data=packet)))

    async def clear(self) -> Cleared:
        """Barge-in: drops all queued audio now. Returns what was played and dropped."""
        fut: asyncio.Future[Cleared] = asyncio.get_running_loop().create_future()
        self._clears.append(fut)
        try:
            await self._write(pb.Downlink(clear=pb.Clear()))
        except VoxgateError:
            if fut in self._clears:
                self._clears.remove(fut)
            raise
        return await fut

    async def send(self, payload: str | bytes, label: str = "oai-events") -> None:
        """Sends a data-channel message (text for `str`, binary for `bytes`) to the caller."""
        if isinstance(payload, str):
            msg = pb.DataMessage(label=label, text=payload)
        else:
            msg = pb.DataMessage(label=label, binary=bytes(payload))
        await self._write(pb.Downlink(data=msg))

    async def hangup(self, reason: str = "backend_hangup") -> str | None:
        """Ends the call for the caller too; returns the end reason the transceiver gave."""
        if self._state == "attached":
            try:
                await self._write(pb.Downlink(hangup=pb.Hangup(reason=reason)))
            except VoxgateError:
                pass
            try:
                await asyncio.wait_for(self.ended.wait(), HANGUP_TIMEOUT_S)
            except asyncio.TimeoutError:
                await self.close()
        return self.end_reason

    async def close(self) -> None:
        """Drops this backend's stream without hanging up: the transceiver re-dispatches the
        call to another worker (or ends it). A no-op on an ended call."""
        if self._state == "pending":
            await self.decline("closed")
            return
        if self._state == "attached":
            self._state = "closing"
            self._drop()
            if self._mux is not None:
                self._finish("closed", None)
        if self._reader is not None:
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        if self._state != "done":
            self._finish("closed", None)


class _ChannelWriter:
    """A call's writes on its Multiplex channel (the stream's writer task sends them in order,
    batched with other calls')."""

    def __init__(self, mux: Multiplex, channel: int) -> None:
        self._mux = mux
        self._channel = channel

    async def write(self, msg: pb.Downlink) -> None:
        await self._mux.write(self._channel, msg)
