"""One `Multiplex` stream to a transceiver: every call a worker owns there rides it, a channel
each (the contract is in proto/grpc/voxgate.proto).

Why: with a `Session` stream per call, each 20 ms frame of each call is its own gRPC message
for the transceiver to send and for this process to read; on one stream the transceiver hands
over everything its media loop produced at once, and the calls' writes leave together too. Both
sides spend less per frame (docs/BENCHMARKS.md measures the transceiver's side).

A `Multiplex` is a `CallTransport` (_call_stream.py): `open()` gives a call a channel. Writes: a
channel's `write()` weighs its message (_message_size.py: one no batch could carry is refused
for that call alone, with `MessageTooLargeError`), queues it and waits until the batch holding
it was written, so a call sees its own write fail and gRPC flow control, as on a `Session`
stream; one writer task drains the queue into `MultiplexDownlink`s, in order, each within the
transceiver's limit by serialized size. Reads: one reader task hands each
channel's uplink to its call. A broken stream fails every call on it; the next attach opens a
new one.
"""

from __future__ import annotations

import asyncio
from collections import deque

import grpc

from voxgate._call_stream import UplinkSink
from voxgate._message_size import MAX_MESSAGE_BYTES, channel_entry_len, check_channel
from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate.errors import VoxgateError, from_rpc_error, from_status
from voxgate.task_set import TaskSet

# Most channel messages per MultiplexDownlink (and at most MAX_MESSAGE_BYTES of them, serialized).
MAX_BATCH = 256


class Multiplex:
    """The calls of one worker on one transceiver, on one stream (see the module doc)."""

    def __init__(self, stub: pb_grpc.BridgeStub, auth: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._auth = auth
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._calls: dict[int, UplinkSink] = {}
        self._next_channel = 0
        # Queued messages, each with its entry length and the future its writer waits on.
        self._pending: deque[tuple[pb.ChannelDownlink, int, asyncio.Future[None]]] = deque()
        self._wake = asyncio.Event()
        self._tasks = TaskSet("voxgate multiplex")
        self._open_lock = asyncio.Lock()

    async def open(self, sink: UplinkSink, attach: pb.Attach) -> Channel:
        """Opens a channel for a call (opening the stream if needed) and sends its attach. The
        answer comes to `sink` as its ATTACHED event, or as the channel's `closed`."""
        await self._ensure_open()
        self._next_channel += 1
        channel = self._next_channel
        self._calls[channel] = sink
        await self.write(channel, pb.Downlink(attach=attach))
        return Channel(self, channel)

    async def write(self, channel: int, downlink: pb.Downlink) -> None:
        """Sends one of a channel's messages; returns once written, raises what the write
        raised (`MessageTooLargeError`, before anything is queued, for one no batch could
        carry)."""
        msg = pb.ChannelDownlink(channel=channel, downlink=downlink)
        size = check_channel(msg)
        await self._put(msg, size)

    def release(self, channel: int) -> None:
        """Gives the channel's session up (the transceiver dispatches it again); no wait."""
        if self._stream is None or self._stream.done():
            return
        msg = pb.ChannelDownlink(channel=channel, release=True)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Nobody waits for a release: a failed write is the stream's end, which releases it too.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._pending.append((msg, channel_entry_len(msg), fut))
        self._wake.set()

    async def aclose(self) -> None:
        """Drops the stream: the transceiver releases every channel still on it."""
        if self._stream is not None:
            self._stream.cancel()
        await self._tasks.aclose()

    async def _put(self, msg: pb.ChannelDownlink, size: int) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((msg, size, fut))
        self._wake.set()
        await fut

    async def _ensure_open(self) -> None:
        async with self._open_lock:
            if self._stream is not None and not self._stream.done():
                return
            await self.aclose()
            stream = self._stub.Multiplex(metadata=self._auth)
            self._stream = stream
            self._tasks.create_task(self._write_batches(stream), name="voxgate-mux-writer")
            self._tasks.create_task(self._read(stream), name="voxgate-mux-reader")

    async def _write_batches(self, stream: grpc.aio.StreamStreamCall) -> None:
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            batch: list[tuple[pb.ChannelDownlink, asyncio.Future[None]]] = []
            size = 0
            while self._pending and len(batch) < MAX_BATCH:
                msg, n, fut = self._pending[0]
                if batch and size + n > MAX_MESSAGE_BYTES:
                    break
                self._pending.popleft()
                batch.append((msg, fut))
                size += n
            try:
                await stream.write(pb.MultiplexDownlink(messages=[m for m, _ in batch]))
            except (grpc.RpcError, asyncio.InvalidStateError) as e:
                # The stream is broken: this batch and everything queued fail with it.
                failed = batch + [(m, f) for m, _, f in self._pending]
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
                        call._on_closed(_channel_closed(call.session_id, m.closed))
        except grpc.RpcError as e:
            error = e
        except asyncio.CancelledError:
            pass
        # The stream is over: every call still on it learns why.
        calls, self._calls = self._calls, {}
        for call in calls.values():
            call._on_closed(
                None if error is None else from_rpc_error(error, f"session {call.session_id}"))


class Channel:
    """One call's channel: its `CallStream` (writes go out batched with other calls')."""

    def __init__(self, mux: Multiplex, channel: int) -> None:
        self._mux = mux
        self.channel = channel

    async def write(self, msg: pb.Downlink) -> None:
        await self._mux.write(self.channel, msg)

    def drop(self) -> None:
        self._mux.release(self.channel)

    async def aclose(self) -> None:
        self.drop()


def _channel_closed(session_id: str, closed: pb.ChannelClosed) -> VoxgateError | None:
    """The error a channel's `closed` means for its call: none for a clean close (after ENDED,
    or the release the call asked for), the mapped status otherwise."""
    if closed.code == 0:
        return None
    return from_status(closed.code, closed.message, f"session {session_id}")

