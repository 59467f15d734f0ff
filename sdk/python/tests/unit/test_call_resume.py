"""A `Call` across sessions on fake streams (the transport protocol of _call_stream.py, played by
the test): the resume decision, waiting in RESUMING, the same `audio()` iterator going on after a
resume, what a resume reports lost, and a window that passes."""

from __future__ import annotations

import asyncio

import pytest
from test_call import FakeTransport, event, make_call

import voxgate
from voxgate._proto import voxgate_pb2 as pb
from voxgate._resume import LossLedger, resume_decision
from voxgate.types import CallState


def frame(seq: int, arrival_us: int) -> pb.Uplink:
    return pb.Uplink(audio=pb.AudioFrame(sequence=seq, sample_rate_hz=16000, pcm=b"\0\0" * 320,
                                         arrival_unix_micros=arrival_us))


def test_a_resume_is_taken_only_at_the_generation_the_call_is_served_at():
    assert resume_decision(True, 1, 1) is None
    assert resume_decision(True, 2, 1) == "resume_stale"  # used already
    assert resume_decision(True, 1, 2) == "resume_unknown"  # minted by a session not ours
    assert resume_decision(False, 0, 1) == "resume_unknown"


def test_the_ledger_reports_what_was_queued_past_the_last_progress():
    ledger = LossLedger(16000)
    ledger.queued(32_000, "a")  # 1 s
    ledger.queued(32_000, "b")
    ledger.progress(1_200, "b")
    assert ledger.unplayed() == (800, ("b",))
    ledger.dropped(16_000, "c")
    assert ledger.unplayed() == (1_300, ("b", "c"))
    ledger.cleared(1_300, 0)
    assert ledger.unplayed() == (0, ())


async def resuming_call(window: float = 5.0):
    first = FakeTransport(event(pb.SessionEvent.CONNECTED))
    call, rejected, done = make_call(first, resume_window_s=window)
    await call.accept()
    first.sink._on_uplink(frame(0, 1_000_000))
    call._on_uplink(event(pb.SessionEvent.ENDED, "ice_disconnected"))
    return call, first, done


async def test_a_lost_session_waits_for_a_resume_and_the_same_call_goes_on():
    call, first, done = await resuming_call()
    assert call.state is CallState.RESUMING and not done
    got = []

    async def listen():
        async for f in call.audio():
            got.append(f.sequence)

    listening = asyncio.ensure_future(listen())
    await asyncio.sleep(0)
    await call.play(b"\0\0" * 8_000, item_id="lost")  # 500 ms nobody hears
    assert first.stream.written == [], "written into a lost session"
    assert (await call.clear()).dropped_ms == 0
    resumed = []
    call.on_resumed(resumed.append)
    second = FakeTransport(event(pb.SessionEvent.CONNECTED))
    assert await call._resume(second, "t:2", "s2", 1)
    assert (call.state, call.session_id, call.target, call.generation) == (
        CallState.ATTACHED, "s2", "t:2", 2)
    assert call.call_id == "s1"
    second.sink._on_uplink(frame(0, 1_500_000))
    await asyncio.sleep(0.01)
    assert got == [0, 0], "audio() stopped at the lost session"
    (r,) = resumed
    assert (r.previous_session_id, r.session_id, r.generation) == ("s1", "s2", 2)
    assert r.caller_audio_lost_ms == 480 and r.unplayed_ms == 500 and r.unplayed_items == ("lost",)
    # The old session's late messages change nothing.
    first.sink._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
    first.sink._on_closed(None)
    assert call.state is CallState.ATTACHED and not done
    listening.cancel()


async def test_a_live_old_session_is_hung_up_once_the_new_one_holds():
    first = FakeTransport()
    call, _, _ = make_call(first, resume_window_s=5.0)
    await call.accept()
    second = FakeTransport()
    assert await call._resume(second, "t:2", "s2", 1)
    kinds = [m.WhichOneof("kind") for m in first.stream.written]
    assert kinds == ["hangup"] and first.stream.written[0].hangup.reason == "resumed"


async def test_a_window_that_passes_ends_the_call_as_the_session_ended():
    call, _, done = await resuming_call(window=0.05)
    await asyncio.wait_for(call.ended.wait(), 1.0)
    assert call.end_reason == "ice_disconnected" and done == [call]


async def test_a_broken_stream_waits_too_and_a_final_end_does_not():
    first = FakeTransport()
    call, _, _ = make_call(first, resume_window_s=5.0)
    await call.accept()
    first.sink._on_closed(voxgate.TransceiverGoneError("gone"))
    assert call.state is CallState.RESUMING
    await call.hangup()
    assert call.state is CallState.ENDED
    second = FakeTransport()
    call2, _, _ = make_call(second, resume_window_s=5.0)
    await call2.accept()
    call2._on_uplink(event(pb.SessionEvent.ENDED, "backend_hangup"))
    assert call2.state is CallState.ENDED


async def test_a_resume_whose_attach_fails_leaves_the_call_waiting():
    call, _, _ = await resuming_call()

    class Refused(FakeTransport):
        async def open(self, sink, attach):
            loop = asyncio.get_running_loop()
            loop.call_soon(sink._on_closed, voxgate.UnknownSessionError("gone"))
            return self.stream

    assert not await call._resume(Refused(), "t:2", "s2", 1)
    assert call.state is CallState.RESUMING and call.generation == 1
    assert await call._resume(FakeTransport(), "t:3", "s3", 1)


@pytest.fixture(autouse=True)
def _quiet_fallback(monkeypatch):
    import voxgate._resumable

    monkeypatch.setattr(voxgate._resumable, "RESUMED_FALLBACK_S", 0.01)
