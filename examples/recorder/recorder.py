#!/usr/bin/env python3
"""A voxgate backend that records every caller to a WAV file, on the voxgate SDK (sdk/python).

Each dispatched call's 20 ms PCM frames go to OUT_DIR/<session_id>.wav (mono, 16-bit, the attach
sample rate; concealed frames included as delivered; a gap in the sequence, which the contract
rules out, is filled with silence so the file stays time-true). When a call ends, one JSON line
goes to stdout:

    {"session_id": "...", "frames": 250, "concealed": 3, "path": "out/abc.wav", "reason": "deleted"}

Logs go to stderr. Run after scripts/setup (which installs the SDK into .venv):

    .venv/bin/python examples/recorder/recorder.py --out-dir /tmp/rec --max-sessions 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import wave
from pathlib import Path

import voxgate

log = logging.getLogger("recorder")


class Recorder:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out_dir)
        self.ended = 0
        self.done = asyncio.Event()

    def path_for(self, session_id: str) -> Path:
        path, n = self.out / f"{session_id}.wav", 1
        while path.exists():  # the same session dispatched to us again
            n += 1
            path = self.out / f"{session_id}-{n}.wav"
        return path

    async def record(self, call: voxgate.Call) -> None:
        frames = concealed = 0
        next_sequence = None
        path = self.path_for(call.session_id)
        try:
            async with call:
                log.info("%s: attached (attempt %d)", call.session_id, call.attempt)
                with wave.open(str(path), "wb") as wav:
                    wav.setnchannels(1)
                    wav.setsampwidth(2)
                    wav.setframerate(call.sample_rate)
                    try:
                        async for frame in call.audio():
                            if next_sequence is not None and frame.sequence > next_sequence:
                                gap = frame.sequence - next_sequence
                                log.warning("%s: %d frames missing", call.session_id, gap)
                                wav.writeframes(b"\0\0" * (call.sample_rate // 50) * gap)
                            wav.writeframes(frame.pcm)
                            next_sequence = frame.sequence + 1
                            frames += 1
                            concealed += int(frame.concealed)
                    except voxgate.TransceiverGoneError as e:
                        log.warning("%s", e)
        except voxgate.VoxgateError as e:
            log.warning("%s: %s", call.session_id, e)
        print(json.dumps({"session_id": call.session_id, "frames": frames,
                          "concealed": concealed, "path": str(path),
                          "reason": call.end_reason}), flush=True)
        self.ended += 1
        if self.args.max_sessions and self.ended >= self.args.max_sessions:
            self.done.set()

    async def run(self) -> None:
        # Leaving the block cancels the recordings still running (their calls are dropped, so
        # the transceiver can hand them to another worker), then closes the worker.
        async with (voxgate.Worker(self.args.target, token=self.args.token,
                                   capacity=self.args.capacity, worker_id=self.args.worker_id,
                                   sample_rate=self.args.sample_rate) as worker,
                    voxgate.TaskSet("recordings") as tasks):

            async def dispatch() -> None:
                async for call in worker.calls():
                    tasks.create_task(self.record(call), name=f"record-{call.session_id}")

            await worker.wait_registered(30)
            log.info("registered as %s (capacity %d) at %s", worker.worker_id,
                     self.args.capacity, self.args.target)
            tasks.create_task(dispatch(), name="dispatch")
            await self.done.wait()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="voxgate backend that records each caller to "
                                "OUT_DIR/<session_id>.wav and prints one JSON line per call")
    p.add_argument("--target", default="127.0.0.1:50051",
                   help="transceiver gRPC address host:port (default %(default)s)")
    p.add_argument("--token", default=os.environ.get("VOXGATE_RECORDER_TOKEN"),
                   help="bearer token for the gRPC API (default: $VOXGATE_RECORDER_TOKEN)")
    p.add_argument("--worker-id", default=f"{socket.gethostname()}-{os.getpid()}",
                   help="worker id to register with (default: <hostname>-<pid>)")
    p.add_argument("--capacity", type=int, default=100, help="calls at once (default 100)")
    p.add_argument("--out-dir", default="recordings", help="directory for the WAV files")
    p.add_argument("--sample-rate", type=int, default=48000, choices=(16000, 24000, 48000),
                   help="PCM rate asked for at attach (default %(default)s)")
    p.add_argument("--max-sessions", type=int, default=0,
                   help="exit after this many calls ended (0 = run until stopped)")
    p.add_argument("--timeout", type=float, default=0,
                   help="exit after this many seconds (0 = none); with --max-sessions, "
                        "exiting by timeout is a failure (status 1)")
    args = p.parse_args(argv)
    if args.capacity < 1:
        p.error("--capacity must be >= 1")
    return args


async def amain(args: argparse.Namespace) -> int:
    rec = Recorder(args)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, rec.done.set)
    try:
        await asyncio.wait_for(rec.run(), args.timeout or None)
    except asyncio.TimeoutError:
        if args.max_sessions and rec.ended < args.max_sessions:
            log.error("timed out after %.1f s with %d of %d calls ended", args.timeout,
                      rec.ended, args.max_sessions)
            return 1
    except voxgate.AuthError as e:
        log.error("%s", e)
        return 2
    return 0


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s recorder %(levelname)s %(message)s")
    args = parse_args(argv)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(amain(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
