"""The Pipecat transport hands each reported turn to the pipeline, as it hands network quality:
a `CallTurnFrame` downstream and the `on_call_turn` event. A real pipeline on a call on a fake
stream (test_call.py's): no transceiver (needs the [pipecat] extra)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pipecat", reason="the [pipecat] extra is not installed")

from pipecat.frames.frames import ClientConnectedFrame  # noqa: E402
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402
from test_call import FakeTransport, event, make_call, turn  # noqa: E402
from voxgate_harness.pipecat_frames import Recorder  # noqa: E402

import voxgate  # noqa: E402
from voxgate._proto import voxgate_pb2 as pb  # noqa: E402
from voxgate.pipecat import CallQualityFrame, CallTurnFrame, VoxgateTransport  # noqa: E402


async def until(condition, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.01)


async def test_each_turn_reaches_the_pipeline_as_a_frame_and_an_event():
    fake = FakeTransport(event(pb.SessionEvent.CONNECTED))
    call, _, _ = make_call(fake)
    await call.accept()
    transport = VoxgateTransport(call)
    recorder = Recorder((CallTurnFrame, CallQualityFrame))
    connected = Recorder((ClientConnectedFrame,))
    events: list[voxgate.TurnLatency] = []

    @transport.event_handler("on_call_turn")
    async def _turn(transport, turn):
        events.append(turn)

    task = PipelineWorker(Pipeline([transport.input(), connected, recorder,
                                   transport.output()]),
                          params=PipelineParams(audio_in_sample_rate=16000,
                                                audio_out_sample_rate=16000))
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(task)
    running = asyncio.ensure_future(runner.run())
    try:
        # Pushed once the input's readers run (they start before the watch that pushes it).
        await until(lambda: connected.seen, "ClientConnectedFrame")
        fake.sink._on_uplink(turn(1))
        fake.sink._on_uplink(turn(2, backend_ms=50.0))
        await until(lambda: len(recorder.seen) == 2 and len(events) == 2, "two turns")
        assert [f.turn.turn for f in recorder.seen] == [1, 2]
        assert all(isinstance(f, CallTurnFrame) for f in recorder.seen), "a turn is no quality"
        assert events == [f.turn for f in recorder.seen] and events[-1] == call.last_turn
        assert events[1].backend_ms == 50.0
    finally:
        fake.sink._on_uplink(event(pb.SessionEvent.ENDED, "deleted"))
        await asyncio.wait_for(running, 10.0)  # the call's end ends the pipeline
