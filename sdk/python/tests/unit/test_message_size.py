"""A call's messages weighed by their serialized size, on fake gRPC streams (issue 37): a data
message that JSON escaping grew counts at its real size, a `Multiplex` batch stays within the
transceiver's limit on one message, and a message no batch could carry is refused for its own
call with a typed error, the stream and the call going on."""

from __future__ import annotations

import asyncio

import pytest

import voxgate
from voxgate._multiplex import Multiplex
from voxgate._proto import voxgate_pb2 as pb
from voxgate._session_stream import SessionStreams
from voxgate.types import CallState

LIMIT = 256 * 1024
# What the echo bot of issue 37 sent back for a caller's 60 KB text of control characters.
ECHOED = '{"echo":"' + "\\u0001" * 60_000 + '"}'


class FakeCall:
    """A grpc.aio stream-stream call that records what is written and never answers."""

    def __init__(self) -> None:
        self.written: list = []
        self.cancelled = False
        self._over = asyncio.Event()

    async def write(self, msg) -> None:
        self.written.append(msg)

    def done(self) -> bool:
        return self.cancelled

    def cancel(self) -> None:
        self.cancelled = True
        self._over.set()

    def __aiter__(self):
        return self

    async def __anext__(self):
        await self._over.wait()
        raise StopAsyncIteration


class FakeStub:
    def __init__(self) -> None:
        self.calls: list[FakeCall] = []

    def _open(self, metadata=()) -> FakeCall:
        call = FakeCall()
        self.calls.append(call)
        return call

    Multiplex = _open
    Session = _open


class Sink:
    session_id = "s1"

    def _on_uplink(self, up) -> None:
        pass

    def _on_closed(self, error) -> None:
        pass


def data(text: str) -> pb.Downlink:
    return pb.Downlink(data=pb.DataMessage(label="oai-events", text=text))


async def test_multiplex_batches_are_sized_by_serialized_size_within_the_limit():
    stub = FakeStub()
    mux = Multiplex(stub, ())
    channel = await mux.open(Sink(), pb.Attach(session_id="s1"))
    # Eight data messages of 100 KB queued at once: no audio among them, 800 KB in all.
    await asyncio.gather(*(channel.write(data(str(i) * 100_000)) for i in range(8)))
    (stream,) = stub.calls
    batches = stream.written[1:]  # after the attach's
    assert all(b.ByteSize() <= LIMIT for b in batches), [b.ByteSize() for b in batches]
    sent = [m.downlink.data.text[0] for b in batches for m in b.messages]
    assert sent == [str(i) for i in range(8)], "every message, in order"
    await mux.aclose()


async def test_an_oversized_message_is_refused_for_its_call_alone():
    stub = FakeStub()
    mux = Multiplex(stub, ())
    first = await mux.open(Sink(), pb.Attach(session_id="s1"))
    other = await mux.open(Sink(), pb.Attach(session_id="s2"))
    with pytest.raises(voxgate.MessageTooLargeError) as refused:
        await first.write(data(ECHOED))
    assert refused.value.size > 360_000 and refused.value.limit == LIMIT
    assert isinstance(refused.value, ValueError), "the caller's mistake, typed"
    # Nothing of it went out; the stream and both calls go on.
    await first.write(data("after"))
    await other.write(data("neighbour"))
    (stream,) = stub.calls
    assert not stream.cancelled
    texts = [m.downlink.data.text for b in stream.written for m in b.messages
             if m.downlink.HasField("data")]
    assert texts == ["after", "neighbour"]
    await mux.aclose()


async def test_an_oversized_message_on_a_session_stream_is_refused_before_the_wire():
    stub = FakeStub()
    streams = SessionStreams(stub, ())
    stream = await streams.open(Sink(), pb.Attach(session_id="s1"))
    with pytest.raises(voxgate.MessageTooLargeError):
        await stream.write(data(ECHOED))
    await stream.write(data("after"))
    (call,) = stub.calls
    assert [m.WhichOneof("kind") for m in call.written] == ["attach", "data"]
    assert not call.cancelled
    await stream.aclose()
    await streams.aclose()


async def test_a_call_that_sends_an_oversized_message_stays_attached():
    stub = FakeStub()
    mux = Multiplex(stub, ())
    call = voxgate.Call(session_id="s1", metadata={}, attempt=1, worker_id="w1", target="t:1",
                        transport=mux, sample_rate=16000, reject=lambda s, r: None,
                        on_done=lambda c: None)
    accepting = asyncio.ensure_future(call.accept())
    await asyncio.sleep(0.01)
    for kind in (pb.SessionEvent.ATTACHED, pb.SessionEvent.DATA_CHANNEL_OPEN):
        call._on_uplink(pb.Uplink(event=pb.SessionEvent(kind=kind)))
    await asyncio.wait_for(accepting, 1.0)
    with pytest.raises(voxgate.MessageTooLargeError, match="over the transceiver's"):
        await call.send(ECHOED)
    assert call.state is CallState.ATTACHED and call.error is None
    await call.send("short")
    await call.play(b"\0\0" * 100_000)  # chunked below the limit: plays
    await call.aclose()
    await mux.aclose()
