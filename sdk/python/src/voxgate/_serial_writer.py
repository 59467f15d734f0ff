"""One write at a time on a gRPC stream.

grpc.aio lets a stream have one message write in flight. A second `write()` started while the
first waits (for HTTP/2 flow control, or just for the event loop) fails inside gRPC Core with
`INTERNAL: Internal error from Core`, and that ends the whole stream: a call, or a worker's
registration. Agents do write from several tasks at once (a TTS task plays audio while another
sends events), so every SDK write goes through this lock, in the order the tasks asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc


class SerialWriter:
    """Serializes `write()`s to one grpc.aio stream (FIFO: asyncio.Lock wakes waiters in
    order)."""

    def __init__(self, stream: grpc.aio.StreamStreamCall) -> None:
        self.stream = stream
        self._lock = asyncio.Lock()

    async def write(self, msg: Any) -> None:
        async with self._lock:
            await self.stream.write(msg)
