"""A `Call`'s life on a fake stream (the `CallTransport` protocol of _call_stream.py, played by
the test): attach, the bounded queues, `send` before the caller's data channel is open, the
end of a call and the errors that break one."""

from __future__ import annotations

import asyncio

import pytest

import voxgate
from voxgate._proto import voxgate_pb2 as pb
from voxgate.call import TURN_QUEUE, DropOldestQueue
from voxgate.types import AudioMode, CallState


def event(kind: int, reason: str = "") -> pb.Uplink:
    return pb.Uplink(event=pb.SessionEvent(kind=kind, reason=reason))


class FakeStream:
    def __init__(self) -> None:
        self.written: list[pb.Downlink] = []
        self.dropped = False

    async def write(self, msg: pb.Downlink) -> None:
        self.written.append(msg)

    def drop(self) -> None:
        self.dropped = True

    async def aclose(self) -> None:
        self.drop()


class FakeTransport:
    """Answers every attach with ATTACHED (the events in `then` follow it)."""

    def __init__(self, *then: pb.Uplink) -> None:
        self.then = then
        self.attaches: list[pb.Attach] = []
        self.stream = FakeStream()
        self.sink = None

    async def open(self, sink, attach: pb.Attach) -> FakeStream:
        self.attaches.append(attach)
        self.sink = sink
        loop = asyncio.get_running_loop()
        for up in (event(pb.SessionEvent.ATTACHED), *self.then):
            loop.call_soon(sink._on_uplink, up)
        return self.stream

    async def aclose(self) -> None:
        pass


def make_call(transport: FakeTransport, **options) -> tuple[voxgate.Call, list, list]:
    rejected: list[tuple[str, str]] = []
    done: list[voxgate.Call] = []
    call = voxgate.Call(
        session_id="s1", metadata={"model": "small"}, attempt=1, worker_id="w1", target="t:1",
        transport=transport, sample_rate=16000, reject=lambda s, r: rejected.append((s, r)),
        on_done=done.append, **options)
    return call, rejected, done


async def attached(*then: pb.Uplink) -> tuple[voxgate.Call, FakeTransport]:
    """An accepted call on a fake stream (the events in `then` follow ATTACHED)."""
    transport = FakeTransport(*then)
    call, _, _ = make_call(transport)
    await call.accept()
    return call, transport


def sent_texts(transport: FakeTransport) -> list[str]:
    return [m.data.text for m in transport.stream.written if m.WhichOneof("kind") == "data"]


def test_signed_and_caller_metadata_are_kept_apart_and_default_to_empty():
    call, _, _ = make_call(FakeTransport())
    assert (call.signed_metadata, call.caller_metadata) == ({}, {})
    assert call.metadata == {"model": "small"}
    call, _, _ = make_call(FakeTransport(), signed_metadata={"user": "alice"},
                           caller_metadata={"user": "admin"})
    assert call.signed_metadata == {"user": "alice"}
    assert call.caller_metadata == {"user": "admin"}


async def test_accept_sends_the_workers_choices_and_the_call_is_attached():
    transport = FakeTransport()
    call, _, _ = make_call(transport, mode=AudioMode.OPUS_PASSTHROUGH, progress_interval_ms=100,
                           encoder=pb.OpusEncoder(complexity=3))
    assert call.state is CallState.PENDING and "pending" in repr(call)
    async with call:
        assert call.state is CallState.ATTACHED
        (attach,) = transport.attaches
        assert (attach.session_id, attach.worker_id, attach.sample_rate_hz) == ("s1", "w1", 16000)
        assert attach.mode == pb.AUDIO_MODE_OPUS_PASSTHROUGH
        assert attach.progress_interval_ms == 100 and attach.encoder.complexity == 3
    assert call.state is CallState.ENDED and call.end_reason == "closed"
    assert transport.stream.dropped


async def test_a_send_before_the_data_channel_opens_waits_for_it():
    call, transport = await attached()
    sending = asyncio.ensure_future(call.send("first"))
    await asyncio.sleep(0.05)
    assert not sending.done() and sent_texts(transport) == [], "sent into a closed channel"
    call._on_uplink(event(pb.SessionEvent.DATA_CHANNEL_OPEN))
    await asyncio.wait_for(sending, 1.0)
    assert sent_texts(transport) == ["first"]
    await call.send(b"\0\1", label="bin")  # open now: straight through
    assert transport.stream.written[-1].data.binary == b"\0\1"


async def test_a_send_raises_when_the_data_channel_stays_shut_and_sends_nothing():
    call, transport = await attached()
    with pytest.raises(voxgate.DataChannelNotOpenError, match="did not open within 0.05 s"):
        await call.send("lost?", timeout=0.05)
    assert sent_texts(transport) == []
    assert not call.ended.is_set(), "a shut channel does not end the call"
    with pytest.raises(TimeoutError):  # it is a TimeoutError too
        await call.wait_data_channel_open(timeout=0)


async def test_a_send_waiting_for_the_channel_fails_when_the_call_ends():
    call, transport = await attached()
    sending = asyncio.ensure_future(call.send("too late"))
    await asyncio.sleep(0.01)
    call._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
    with pytest.raises(voxgate.CallEndedError, match="deleted"):
        await asyncio.wait_for(sending, 1.0)
    assert sent_texts(transport) == []


async def test_writes_before_accept_are_refused():
    call, _, _ = make_call(FakeTransport())
    with pytest.raises(voxgate.VoxgateError, match="not accepted yet"):
        await call.send("early")
    with pytest.raises(voxgate.VoxgateError, match="not accepted yet"):
        await call.play(b"\0\0")
    with pytest.raises(ValueError, match="even number"):
        await call.play(b"\0")


async def test_the_uplink_is_sorted_and_the_end_event_ends_the_call():
    transport = FakeTransport(event(pb.SessionEvent.CONNECTED))
    call, _, done = make_call(transport)
    await call.accept()
    await call.wait_connected(1.0)
    sink = transport.sink
    sink._on_uplink(pb.Uplink(audio=pb.AudioFrame(sequence=0, pcm=b"\0\0" * 320,
                                                  sample_rate_hz=16000)))
    sink._on_uplink(pb.Uplink(data=pb.DataMessage(label="oai-events", text="hi")))
    sink._on_uplink(pb.Uplink(progress=pb.PlaybackProgress(played_ms=40, item_id="r1")))
    sink._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
    frames = [f async for f in call.audio()]
    assert [f.sequence for f in frames] == [0]
    assert [m.text async for m in call.messages()] == ["hi"]
    assert [f async for f in call.audio()] == [], "a second iterator ends too"
    assert call.progress.played_ms == 40 and call.progress.item_id == "r1"
    assert call.state is CallState.ENDED and call.end_reason == "deleted" and call.error is None
    assert done == [call]
    with pytest.raises(voxgate.CallEndedError, match="has ended"):
        await call.play(b"\0\0")


async def test_a_stream_that_closes_without_ended_breaks_the_call():
    call, transport = await attached()
    ended = []
    call.on_ended(lambda c: ended.append(c.end_reason))
    transport.sink._on_closed(None)
    assert ended == ["error"] and isinstance(call.error, voxgate.TransceiverGoneError)
    with pytest.raises(voxgate.TransceiverGoneError, match="without ENDED"):
        async for _ in call.audio():
            pass
    transport.sink._on_closed(voxgate.VoxgateError("later"))  # once over, it stays over
    assert isinstance(call.error, voxgate.TransceiverGoneError)


async def test_a_clear_is_answered_in_order_and_fails_when_the_call_ends():
    call, transport = await attached()
    first = asyncio.ensure_future(call.clear())
    second = asyncio.ensure_future(call.clear())
    await asyncio.sleep(0.01)
    transport.sink._on_uplink(pb.Uplink(cleared=pb.Cleared(played_ms=1, item_id="a")))
    assert (await first).item_id == "a"
    transport.sink._on_closed(voxgate.TransceiverGoneError("gone"))
    with pytest.raises(voxgate.TransceiverGoneError, match="gone"):
        await second


async def test_decline_and_close_of_a_pending_call_reject_the_offer():
    call, rejected, done = make_call(FakeTransport())
    await call.decline("busy")
    assert rejected == [("s1", "busy")] and call.end_reason == "declined" and done == [call]
    with pytest.raises(voxgate.VoxgateError, match="is ended, cannot accept"):
        await call.accept()
    other, rejected, _ = make_call(FakeTransport())
    await other.aclose()
    assert rejected == [("s1", "closed")]


async def test_an_attach_refused_by_the_stream_declines_so_the_call_is_offered_again():
    class Broken(FakeTransport):
        async def open(self, sink, attach):
            raise asyncio.InvalidStateError("closed")

    call, rejected, _ = make_call(Broken())
    with pytest.raises(voxgate.TransceiverGoneError, match="stream closed"):
        await call.accept()
    assert [s for s, _ in rejected] == ["s1"] and rejected[0][1].startswith("attach failed")


async def test_the_drop_oldest_queue_keeps_the_newest_and_counts_the_rest():
    q = DropOldestQueue(3)
    for i in range(5):
        q.put(i)
    assert q.dropped == 2 and len(q) == 3
    assert [await q.get() for _ in range(3)] == [2, 3, 4]
    waiting = asyncio.ensure_future(q.get())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    q.put("late")
    assert await asyncio.wait_for(waiting, 1.0) == "late"


def quality(at_ms: int, mos: float = 4.4) -> pb.Uplink:
    return pb.Uplink(quality=pb.Quality(at_ms=at_ms, rtt_ms=1.0,
                                        uplink=pb.DirectionQuality(mos=mos)))


async def test_quality_updates_reach_the_attribute_the_listeners_and_the_iterators():
    call, transport = await attached()
    assert call.quality is None and call.quality_summary is None
    heard: list[int] = []
    stop = call.on_quality(lambda q: heard.append(q.at_ms))
    call.on_quality(lambda q: 1 / 0)  # a failing listener is logged, the others go on
    updates = call.qualities()
    transport.sink._on_uplink(quality(5000))
    assert call.quality.at_ms == 5000 and call.quality.rtt_ms == 1.0
    assert call.quality.uplink.mos == 4.4 and call.quality.downlink.mos is None
    stop()
    transport.sink._on_uplink(quality(10000, mos=3.9))
    assert heard == [5000], "stopped listeners hear no more"
    assert call.quality.at_ms == 10000
    transport.sink._on_uplink(pb.Uplink(event=pb.SessionEvent(
        kind=pb.SessionEvent.ENDED, reason="deleted", quality=pb.QualitySummary(
            samples=2, mos_mean=4.15, mos_min=3.9))))
    assert [q.at_ms async for q in updates] == [5000, 10000], "then it ends with the call"
    assert call.quality_summary == voxgate.QualitySummary(samples=2, mos_mean=4.15, mos_min=3.9)
    assert [q async for q in call.qualities()] == [], "an ended call has no more"


async def test_a_call_without_a_quality_sample_has_no_summary_and_a_broken_one_raises():
    call, transport = await attached()
    transport.sink._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
    assert call.quality_summary is None and call.quality is None
    call, transport = await attached()
    updates = call.qualities()
    transport.sink._on_closed(voxgate.TransceiverGoneError("gone"))
    with pytest.raises(voxgate.TransceiverGoneError, match="gone"):
        async for _ in updates:
            pass


def turn(n: int, backend_ms: float = 300.0) -> pb.Uplink:
    return pb.Uplink(turn=pb.TurnLatency(turn=n, total_ms=backend_ms + 100.0,
                                         backend_ms=backend_ms, capture_send_ms=100.0,
                                         rtt_source="rtcp"))


async def test_turns_reach_the_attribute_the_listeners_and_the_iterators():
    call, transport = await attached()
    assert call.last_turn is None, "no turn until the caller's browser reports one"
    heard: list[int] = []
    stop = call.on_turn(lambda t: heard.append(t.turn))
    call.on_turn(lambda t: 1 / 0)  # a failing listener is logged, the others go on
    turns = call.turns()
    transport.sink._on_uplink(turn(1))
    assert call.last_turn == voxgate.TurnLatency(turn=1, total_ms=400.0, backend_ms=300.0,
                                                 capture_send_ms=100.0, rtt_source="rtcp")
    stop()
    transport.sink._on_uplink(turn(2, backend_ms=50.0))
    assert heard == [1], "stopped listeners hear no more"
    assert call.last_turn.turn == 2 and call.last_turn.total_ms == 150.0
    assert call.quality is None, "a turn is not a quality sample"
    transport.sink._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
    assert [t.turn async for t in turns] == [1, 2], "then it ends with the call"
    assert call.last_turn.turn == 2, "the last turn outlives the call"
    assert [t async for t in call.turns()] == [], "an ended call has no more"


async def test_a_slow_turn_iterator_keeps_the_newest_and_a_broken_call_raises():
    call, transport = await attached()
    turns = call.turns()
    for n in range(1, TURN_QUEUE + 6):
        transport.sink._on_uplink(turn(n))
    got = [(await anext(turns)).turn for _ in range(TURN_QUEUE)]
    assert got == list(range(6, TURN_QUEUE + 6)), "the oldest were dropped"
    transport.sink._on_closed(voxgate.TransceiverGoneError("gone"))
    with pytest.raises(voxgate.TransceiverGoneError, match="gone"):
        await anext(turns)
