"""The fault suite's backend (fleet-tests/tests/continuity_netns.rs): a voxgate Python SDK
worker that echoes each caller frame straight back and reports, as JSON lines on stdout, what
the suite asserts and measures:

- {"ev": "call", ...}     a call accepted (call id, session id, generation, worker);
- {"ev": "resumed", ...}  the same Call continued on a new session (what it lost);
- {"ev": "gap", ...}      loud caller audio came back after more than GAP_MS without it (the
                          uplink gap at the backend, by this process's clock: wall time, as the
                          browser's stamps, so the suite can line both up);
- {"ev": "first_loud"}    the first loud frame this worker got for a call (after a backend
                          change, the new worker's uplink starts here);
- {"ev": "loud", ...}     once per second per call: loud and concealed frames in that second;
- {"ev": "ended", ...}    a call ended, with its reason.

Usage: continuity_worker.py WORKER_ID TARGET[,TARGET...] (token in VOXGATE_GRPC_TOKEN).
"""

from __future__ import annotations

import array
import asyncio
import json
import math
import os
import sys
import time

import voxgate

RATE = 16_000
# A 20 ms frame louder than this is the caller's tone (-6 dBFS at the fake microphone, a few dB
# lower after Opus); silence and concealment are far below it.
LOUD_DBFS = -30.0
# A stretch without loud frames longer than this is reported as a gap (three frames: jitter
# alone does not reach it).
GAP_MS = 60


def emit(**fields: object) -> None:
    fields["t"] = time.time()
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def level_dbfs(pcm: bytes) -> float:
    samples = array.array("h", pcm)
    if not samples:
        return -120.0
    rms = math.sqrt(sum(s * s for s in samples) / len(samples)) / 32768.0
    return 20.0 * math.log10(rms) if rms > 0 else -120.0


async def serve(call: voxgate.Call, worker_id: str) -> None:
    await call.accept()
    emit(ev="call", call_id=call.call_id, session_id=call.session_id,
         generation=call.generation, target=call.target, worker=worker_id)
    call.on_resumed(lambda r: emit(
        ev="resumed", call_id=call.call_id, session_id=r.session_id,
        previous_session_id=r.previous_session_id, generation=r.generation, target=r.target,
        caller_audio_lost_ms=r.caller_audio_lost_ms, unplayed_ms=r.unplayed_ms,
        worker=worker_id))
    last_loud: float | None = None
    second = int(time.time())
    loud_in_second = concealed_in_second = 0
    async for frame in call.audio():
        now = time.time()
        if not isinstance(frame, voxgate.AudioFrame):
            continue
        concealed_in_second += frame.concealed
        if level_dbfs(frame.pcm) > LOUD_DBFS and not frame.concealed:
            if last_loud is None:
                emit(ev="first_loud", call_id=call.call_id, session_id=call.session_id,
                     worker=worker_id)
            elif (now - last_loud) * 1000 > GAP_MS:
                emit(ev="gap", call_id=call.call_id, session_id=call.session_id,
                     ms=round((now - last_loud) * 1000), worker=worker_id)
            last_loud = now
            loud_in_second += 1
        if int(now) != second:
            emit(ev="loud", call_id=call.call_id, session_id=call.session_id,
                 frames=loud_in_second, concealed=concealed_in_second, worker=worker_id)
            second, loud_in_second, concealed_in_second = int(now), 0, 0
        try:
            await call.play(frame.pcm)
        except voxgate.VoxgateError:
            pass  # resuming: the SDK counts what it dropped
    emit(ev="ended", call_id=call.call_id, reason=call.end_reason, worker=worker_id)


async def main() -> None:
    worker_id, targets = sys.argv[1], sys.argv[2].split(",")
    async with voxgate.Worker(targets, token=os.environ.get("VOXGATE_GRPC_TOKEN"),
                              capacity=8, sample_rate=RATE, worker_id=worker_id) as worker:
        emit(ev="started", worker=worker_id)
        tasks: set[asyncio.Task[None]] = set()
        async for call in worker.calls():
            task = asyncio.create_task(serve(call, worker_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(main())
