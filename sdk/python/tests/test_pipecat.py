"""voxgate.pipecat with a minimal Pipecat pipeline, a real transceiver and a real caller:
audio and data-channel messages both ways, an interruption that clears the reply, the
connection reported as Pipecat's transports report it, and the caller's network quality."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("pipecat", reason="the [pipecat] extra is not installed")

from pipecat.frames.frames import (  # noqa: E402
    ClientConnectedFrame,
    Frame,
    InputAudioRawFrame,
    InputTransportMessageFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
    OutputTransportMessageFrame,
    TTSStartedFrame,
)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402
from voxgate_harness.audio import dominant_hz, rms, tone  # noqa: E402
from voxgate_harness.caller import Caller  # noqa: E402
from voxgate_harness.pipecat_frames import Recorder  # noqa: E402
from voxgate_harness.transceiver import Transceiver  # noqa: E402

import voxgate  # noqa: E402
from voxgate.pipecat import (  # noqa: E402
    CallQualityFrame,
    CallResumedFrame,
    PlaybackClearedFrame,
    VoxgateParams,
    VoxgateTransport,
    serve,
)

RATE = 16_000
TIMEOUT = 30.0


class EchoBot(FrameProcessor):
    """Echoes the caller's speech; on {"do": "speak"} plays 4 s of 880 Hz as one TTS response,
    on {"do": "interrupt"} interrupts it; reports the Cleared answer back as a message."""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            if rms(frame.audio) > 500:  # the caller's speech, not the silence between
                await self.push_frame(OutputAudioRawFrame(frame.audio, frame.sample_rate, 1))
        elif isinstance(frame, InputTransportMessageFrame):
            msg = frame.message
            if msg == {"do": "speak"}:
                await self.push_frame(TTSStartedFrame())
                pcm = tone(880, 4.0, RATE)
                for i in range(0, len(pcm), 640):
                    await self.push_frame(OutputAudioRawFrame(pcm[i:i + 640], RATE, 1))
            elif msg == {"do": "interrupt"}:
                await self.push_frame(InterruptionFrame())
            else:
                await self.push_frame(OutputTransportMessageFrame(message={"echo": msg}))
        elif isinstance(frame, PlaybackClearedFrame):
            await self.push_frame(OutputTransportMessageFrame(message={
                "cleared": frame.item_id, "heard_ms": frame.item_played_ms}))
        else:
            await self.push_frame(frame, direction)


async def test_minimal_pipeline_echoes_audio_and_messages_and_clears_on_interruption(
        transceiver, caller_factory, token):
    async def bot(transport: VoxgateTransport) -> None:
        pipeline = Pipeline([transport.input(), EchoBot(), transport.output()])
        task = PipelineWorker(pipeline, params=PipelineParams(
            audio_in_sample_rate=RATE, audio_out_sample_rate=RATE))

        @transport.event_handler("on_client_disconnected")
        async def _gone(transport, call):
            await task.cancel()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(task)
        await runner.run()

    async with voxgate.Worker(transceiver.grpc_target, token=token, capacity=2,
                              sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        server = asyncio.create_task(serve(worker, bot))
        try:
            caller = await caller_factory()
            await asyncio.wait_for(caller.dc_open.wait(), TIMEOUT)
            # Audio: the caller's 440 Hz comes back through the pipeline.
            said = time.time()
            caller.say(tone(440, 2.0, 48_000))
            await caller.wait_heard(said, TIMEOUT)
            await asyncio.sleep(1.0)
            echoed = [h for h in caller.heard if h.at > said and h.rms > 1000]
            assert len(echoed) >= 20
            assert abs(dominant_hz(bytes(caller.heard_pcm[-48_000 // 2 * 2:]), 48_000) - 440) < 20

            # Messages: JSON in, JSON out.
            caller.dc.send('{"hello": "pipecat"}')
            reply = await caller.wait_message(lambda m: "echo" in m, TIMEOUT)
            assert reply == {"echo": {"hello": "pipecat"}}

            # A 4 s response, interrupted after about a second: the transceiver drops the rest
            # and the pipeline learns how much of the item the caller heard.
            caller.dc.send('{"do": "speak"}')
            started = await caller.wait_heard(time.time(), TIMEOUT)
            await asyncio.sleep(max(0.0, started + 1.0 - time.time()))
            caller.dc.send('{"do": "interrupt"}')
            cleared = await caller.wait_message(lambda m: "cleared" in m, TIMEOUT)
            assert cleared["cleared"] == "item-1"
            assert 500 <= cleared["heard_ms"] <= 3000, cleared
            stop = time.time()
            await asyncio.sleep(1.0)
            assert caller.heard_seconds(after=stop + 0.3) == 0, "the reply kept playing"
        finally:
            server.cancel()


async def test_the_transport_reports_the_connection_and_ends_the_pipeline_when_the_call_ends(
        transceiver, caller_factory, token):
    # As Pipecat's own transports do: `on_client_connected` (here registered inside the bot,
    # after `serve` saw the media flow) and a ClientConnectedFrame once the pipeline runs; when
    # the caller leaves, `on_client_disconnected`, and the pipeline ends without the bot's help.
    events: list[str] = []
    finished = asyncio.Event()
    recorder = Recorder((ClientConnectedFrame,))

    async def bot(transport: VoxgateTransport) -> None:
        assert isinstance(transport.params, VoxgateParams)
        assert transport.params.audio_in_sample_rate == RATE
        task = PipelineWorker(Pipeline([transport.input(), recorder, transport.output()]),
                              params=PipelineParams(audio_in_sample_rate=RATE,
                                                    audio_out_sample_rate=RATE))

        @transport.event_handler("on_client_connected")
        async def _connected(transport, call):
            events.append("connected")

        @transport.event_handler("on_client_disconnected")
        async def _gone(transport, call):
            events.append(f"disconnected: {call.end_reason}")

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(task)
        await runner.run()
        finished.set()

    async with voxgate.Worker(transceiver.grpc_target, token=token, sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        server = asyncio.create_task(serve(worker, bot))
        try:
            caller = await caller_factory()
            deadline = time.monotonic() + TIMEOUT
            while not recorder.seen and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(recorder.seen) == 1, "no ClientConnectedFrame"
            assert events == ["connected"]
            assert await caller.delete() == 204
            await asyncio.wait_for(finished.wait(), TIMEOUT)
            assert events == ["connected", "disconnected: deleted"]
        finally:
            server.cancel()


async def test_the_callers_network_quality_reaches_the_pipeline_as_a_frame_and_an_event(
        transceiver, caller_factory, token):
    recorder = Recorder((CallQualityFrame,))
    events: list[voxgate.Quality] = []
    summaries: list[voxgate.QualitySummary | None] = []
    finished = asyncio.Event()

    async def bot(transport: VoxgateTransport) -> None:
        task = PipelineWorker(Pipeline([transport.input(), recorder, transport.output()]),
                              params=PipelineParams(audio_in_sample_rate=RATE,
                                                    audio_out_sample_rate=RATE))

        @transport.event_handler("on_call_quality")
        async def _quality(transport, quality):
            events.append(quality)

        @transport.event_handler("on_client_disconnected")
        async def _gone(transport, call):
            summaries.append(call.quality_summary)

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(task)
        await runner.run()
        finished.set()

    async with voxgate.Worker(transceiver.grpc_target, token=token, sample_rate=RATE) as worker:
        await worker.wait_registered(TIMEOUT)
        server = asyncio.create_task(serve(worker, bot))
        try:
            caller = await caller_factory()
            deadline = time.monotonic() + TIMEOUT
            while not (recorder.seen and events) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert recorder.seen, "no CallQualityFrame within 30 s (one is due every 5 s)"
            quality = recorder.seen[0].quality
            assert isinstance(quality, voxgate.Quality) and events[0] == quality
            # The caller always sends (silence, as a microphone would): the uplink is measured.
            assert quality.uplink.jitter_ms is not None and quality.uplink.packets > 100
            assert await caller.delete() == 204
            await asyncio.wait_for(finished.wait(), TIMEOUT)
            assert len(summaries) == 1 and summaries[0] is not None
            assert summaries[0].samples >= 1
        finally:
            server.cancel()


async def test_the_pipeline_keeps_running_when_its_call_resumes_on_another_transceiver(
        tmp_path, token):
    import secrets

    key = tmp_path / "resume.key"
    key.write_text(secrets.token_hex(32))
    args = ("--grpc-token", token, "--resume-key-file", str(key))
    t1 = Transceiver(*args, log_dir=tmp_path / "t1").start()
    t2 = Transceiver(*args, log_dir=tmp_path / "t2").start()
    recorder = Recorder((CallResumedFrame,))
    events: list[voxgate.Resumed] = []
    pipelines = 0

    async def bot(transport: VoxgateTransport) -> None:
        nonlocal pipelines
        pipelines += 1
        pipeline = Pipeline([transport.input(), recorder, EchoBot(), transport.output()])
        task = PipelineWorker(pipeline, params=PipelineParams(
            audio_in_sample_rate=RATE, audio_out_sample_rate=RATE))

        @transport.event_handler("on_call_resumed")
        async def _resumed(transport, resumed):
            events.append(resumed)

        @transport.event_handler("on_client_disconnected")
        async def _gone(transport, call):
            await task.cancel()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(task)
        await runner.run()

    caller = Caller(t1.signal_url)
    try:
        async with voxgate.Worker([t1.grpc_target, t2.grpc_target], token=token, capacity=2,
                                  sample_rate=RATE) as worker:
            await worker.wait_registered(TIMEOUT)
            server = asyncio.create_task(serve(worker, bot))
            try:
                await caller.connect()
                await asyncio.wait_for(caller.dc_open.wait(), TIMEOUT)
                said = time.time()
                caller.say(tone(440, 1.0, 48_000))
                await caller.wait_heard(said, TIMEOUT)
                t1.kill()
                await asyncio.sleep(0.3)
                await caller.resume(t2.signal_url)
                await asyncio.wait_for(caller.dc_open.wait(), TIMEOUT)
                # The same pipeline echoes on the new session, and heard of the resume.
                said = time.time()
                caller.say(tone(440, 1.5, 48_000))
                await caller.wait_heard(said, TIMEOUT)
                deadline = time.monotonic() + TIMEOUT
                while not (events and recorder.seen) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                assert events and recorder.seen, (events, recorder.seen)
                assert events[0].generation == 2
                assert pipelines == 1, "a second pipeline was started for the resumed call"
                caller.dc.send('{"after": "resume"}')
                reply = await caller.wait_message(lambda m: "echo" in m, TIMEOUT)
                assert reply == {"echo": {"after": "resume"}}
            finally:
                server.cancel()
    finally:
        await caller.close()
        t1.stop()
        t2.stop()
