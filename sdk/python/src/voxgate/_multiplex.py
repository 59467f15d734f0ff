"""One `Multiplex` stream to a transceiver: every call a worker owns there rides it, a channel
each (the contract is in proto/grpc/voxgate.proto).

Why: with a `Session` stream per call, each 20 ms frame of each call is its own gRPC message
for the transceiver to send and for this process to read; on one stream the transceiver hands
over everything its media loop produced at once, and the calls' writes leave together too. Both
sides spend less per frame (docs/BENCHMARKS.md measures the transceiver's side).

Writes: a call's `write()` queues its message and waits until the batch holding it was written,
so a call sees its own write fail and gRPC flow control, as on a `Session` stream; one writer
task drains the queue into `MultiplexDownlink`s, in order. Reads: one reader task hands each
channel's uplink to its `Call`. A broken stream fails every call on it; the next attach opens a
new one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

import grpc

from voxgate._proto import voxgate_pb2 as pb
from voxgate.errors import from_rpc_error

if TYPE_CHECKING:
    from voxgate._proto import voxgate_pb2_grpc as pb_grpc
    from voxgate.call import Call

log = logging.getLogger("voxgate.multiplex")

# Most channel messages per MultiplexDownlink (a batch of 256 KiB audio chunks stays far below
# the transceiver's limit only because calls rarely queue that many at once; see MAX_BATCH_BYTES).
MAX_BATCH = 256
# Bytes of audio per MultiplexDownlink: the transceiver refuses gRPC messages over 256 KiB.
MAX_BATCH_BYTES = 192 * 1024


class Multiplex:
    """The calls of one worker on one transceiver, on one stream (see the module doc)."""

    def __init__(self, stub: pb_grpc.BridgeStub, auth: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._auth = auth
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._calls: dict[int, Call] = {}
        self._next_channel = 0
        self._pending: deque[tuple[pb.ChannelDownlink, asyncio.Future[None]]] = deque()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._open_lock = asyncio.Lock()

    async def attach(self, call: Call, attach: pb.Attach) -> int:
        """Opens a channel for `call` (opening the stream if needed) and sends its attach;
        returns the channel. The answer comes to `call` as its ATTACHED event or `closed`."""
        await self._ensure_open()
        self._next_channel += 1
        channel = self._next_channel
        self._calls[channel] = call
        await self.write(channel, pb.Downlink(attach=attach))
        return channel

    async def write(self, channel: int, downlink: pb.Downlink) -> None:
        """Sends one of a channel's messages; returns once written, raises what the write
        raised."""
        await self._put(pb.ChannelDownlink(channel=channel, downlink=downlink))

    def release(self, channel: int) -> None:
        """Gives the channel's session up (the transceiver dispatches it again); no wait."""
        if self._stream is None or self._stream.done():
            return
        msg = pb.ChannelDownlink(channel=channel, release=True)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nobody waits for a release: a failed write is the stream's end, which releases it too.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._pending.append((msg, fut))
        self._wake.set()

    async def close(self) -> None:
        """Drops the stream: the transceiver releases every channel still on it."""
        if self._stream is not None:
            self._stream.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()

    async def _put(self, msg: pb.ChannelDownlink) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((msg, fut))
        self._wake.set()
        await fut

    async def _ensure_open(self) -> None:
        async with self._open_lock:
            if self._stream is not None and not self._stream.done():
                return
            await self.close()
            stream = self._stub.Multiplex(metadata=self._auth)
            self._stream = stream
            self._tasks = [
                asyncio.create_task(self._write_batches(stream), name="voxgate-mux-writer"),
                asyncio.create_task(self._read(stream), name="voxgate-mux-reader"),
            ]

    async def _write_batches(self, stream: grpc.aio.StreamStreamCall) -> None:
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            batch: list[tuple[pb.ChannelDownlink, asyncio.Future[None]]] = []
            size = 0
            while self._pending and len(batch) < MAX_BATCH:
                msg, fut = self._pending[0]
                n = _audio_bytes(msg)
                if batch and size + n > MAX_BATCH_BYTES:
                    break
                self._pending.popleft()
                batch.append((msg, fut))
                size += n
            try:
                await stream.write(pb.MultiplexDownlink(messages=[m for m, _ in batch]))
            except (grpc.RpcError, asyncio.InvalidStateError) as e:
                # The stream is broken: this batch and everything queued fail with it.
                failed = batch + list(self._pending)
                self._pending.clear()
                for _, fut in failed:
                    if not fut.done():
                        fut.set_exception(e)
                stream.cancel()
                return
            for _, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    async def _read(self, stream: grpc.aio.StreamStreamCall) -> None:
        error: grpc.RpcError | None = None
        try:
            async for batch in stream:
                for m in batch.messages:
                    call = self._calls.get(m.channel)
                    if call is None:
                        continue
                    if m.HasField("uplink"):
                        call._on_uplink(m.uplink)
                    if m.HasField("closed"):
                        del self._calls[m.channel]
                        call._on_channel_closed(m.closed.code, m.closed.message)
        except grpc.RpcError as e:
            error = e
        except asyncio.CancelledError:
            pass
        # The stream is over: every call still on it learns why.
        calls, self._calls = self._calls, {}
        for call in calls.values():
            call._on_transport_gone(
                None if error is None else from_rpc_error(error, f"session {call.session_id}"))


def _audio_bytes(msg: pb.ChannelDownlink) -> int:
    d = msg.downlink
    which = d.WhichOneof("kind")
    if which == "audio":
        return len(d.audio.pcm)
    if which == "opus":
        return len(d.opus.data)
    return 0
