"""A `Session` stream per call: the `CallTransport` of a worker made with `multiplex=False`.

Each call gets its own gRPC stream; `Attach` is its first message, and a reader task (kept in
the transport's task set) hands the uplink to the call until the ENDED event or the stream's end.
A message over the transceiver's limit (by serialized size, _message_size.py) is refused before
it is written.
"""

from __future__ import annotations

import asyncio

import grpc

from voxgate import _wire
from voxgate._call_stream import UplinkSink
from voxgate._message_size import check_session
from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate._serial_writer import SerialWriter
from voxgate.errors import VoxgateError, from_rpc_error
from voxgate.task_set import TaskSet


class SessionStreams:
    """Opens a `Session` stream for each call on one transceiver."""

    def __init__(self, stub: pb_grpc.BridgeStub, auth: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._auth = auth
        self._tasks = TaskSet("voxgate session readers")

    async def open(self, sink: UplinkSink, attach: pb.Attach) -> _SessionStream:
        stream = _SessionStream(self._stub.Session(metadata=self._auth), sink)
        try:
            await stream.write(pb.Downlink(attach=attach))
        except BaseException:
            stream.drop()
            raise
        stream.reader = self._tasks.create_task(stream.read(),
                                                name=f"voxgate-session-{sink.session_id}")
        return stream

    async def aclose(self) -> None:
        await self._tasks.aclose()


class _SessionStream:
    """One call's `Session` stream: its writes, one at a time, and its reader."""

    def __init__(self, stream: grpc.aio.StreamStreamCall, sink: UplinkSink) -> None:
        self._stream = stream
        self._writer = SerialWriter(stream)
        self._sink = sink
        self._dropped = False
        self.reader: asyncio.Task[None] | None = None

    async def write(self, msg: pb.Downlink) -> None:
        """Writes `msg`; one over the transceiver's limit is refused first
        (`MessageTooLargeError`), the stream untouched."""
        check_session(msg)
        await self._writer.write(msg)

    def drop(self) -> None:
        self._dropped = True
        self._stream.cancel()

    async def aclose(self) -> None:
        self.drop()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)

    async def read(self) -> None:
        """Hands the uplink to the call until ENDED, then tells it the stream is over: a stream
        cancelled by `drop()` (or this task cancelled) closed without an error."""
        error: VoxgateError | None = None
        cancelled = False
        try:
            async for up in self._stream:
                self._sink._on_uplink(up)
                if _wire.is_ended(up):
                    break
        except grpc.RpcError as e:
            if not (self._dropped and e.code() == grpc.StatusCode.CANCELLED):
                error = from_rpc_error(e, f"session {self._sink.session_id}")
        except asyncio.CancelledError:
            cancelled = True
        self._stream.cancel()
        self._sink._on_closed(error)
        if cancelled:
            raise asyncio.CancelledError
