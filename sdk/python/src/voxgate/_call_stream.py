"""Where a call meets its transport: the small protocol between a `Call` and the stream it
rides, a `Multiplex` channel (_multiplex.py) or a `Session` stream of its own
(_session_stream.py). Neither side imports the other; both import this.

- A `CallTransport` opens a `CallStream` for a call: it sends the call's `Attach` first, and
  from then on hands every uplink message of that session to the call (`UplinkSink`).
- A `CallStream` takes the call's writes, one at a time and in order, and lets go of the
  session on the wire (`drop`: the transceiver dispatches it again).
- The transport tells the call once that its stream is over (`_on_closed`): with the error
  that broke it, or None when it closed without one (the call knows whether it asked for that).
"""

from __future__ import annotations

from typing import Protocol

from voxgate._proto import voxgate_pb2 as pb
from voxgate.errors import VoxgateError


class UplinkSink(Protocol):
    """The call side: what a transport hands a session's uplink to."""

    session_id: str

    def _on_uplink(self, up: pb.Uplink) -> None:
        """One uplink message of the session, in the order the transceiver sent them."""

    def _on_closed(self, error: VoxgateError | None) -> None:
        """The stream is over (after ENDED, or instead of it); called once."""


class CallStream(Protocol):
    """One call's stream on the wire."""

    async def write(self, msg: pb.Downlink) -> None:
        """Sends one downlink message; returns once written, raises what the write raised
        (grpc.RpcError, or asyncio.InvalidStateError on a stream already closed)."""

    def drop(self) -> None:
        """Lets go of the session without hanging up (no wait)."""

    async def aclose(self) -> None:
        """Drops the session and waits until the stream has told its call `_on_closed`."""


class CallTransport(Protocol):
    """Opens call streams to one transceiver."""

    async def open(self, sink: UplinkSink, attach: pb.Attach) -> CallStream:
        """Sends `attach` and returns the call's stream; the answer (ATTACHED, or the error)
        comes to `sink`. Raises what the attach's write raised."""

    async def aclose(self) -> None:
        """Closes every stream this transport opened and stops its tasks."""
