#!/usr/bin/env python3
"""A call recorder beside the backend that owns the call, on the voxgate SDK (sdk/python).

For each session it is given it opens a `Tap` with the downlink and writes
OUT_DIR/<session_id>.wav (stereo, 16-bit: the caller left, the agent right, time-aligned on the
transceiver's clock: see call_record.py) and OUT_DIR/<session_id>.json, the call's timeline:

    {"session_id": "...", "wav": "...", "sample_rate": 48000, "t0_unix_micros": ...,
     "end_reason": "deleted", "caller_frames": 250, "concealed": 3, "agent_frames": 40, ...,
     "timeline": [{"t": -1.2, "event": "connected"}, {"t": 3.1, "event": "cleared",
                   "played_ms": 820, ...}, {"t": 5.0, "event": "quality", ...},
                  {"t": 7.4, "event": "ended", "reason": "deleted", "quality": {...}}]}

`t` is seconds into the WAV. When a call ends, one JSON line goes to stdout:
{"session_id", "wav", "timeline", "reason", "caller_frames", "agent_frames"}.

Which calls: `--session ID` (repeatable), or session ids on stdin, one per line (from whatever
creates or dispatches calls: a backend can pipe each call's `session_id`). It exits when every
call it was given has ended (and stdin is closed). Logs go to stderr. Run after scripts/setup:

    .venv/bin/python examples/recorder/recorder.py --out-dir /tmp/rec --session <id>
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
import time
import wave
from pathlib import Path

import voxgate
from call_record import (
    DOWNLINK_REANCHOR_US,
    LEFT,
    RIGHT,
    UPLINK_REANCHOR_US,
    LegClock,
    StereoTrack,
    pcm16,
)

log = logging.getLogger("recorder")


class CallRecording:
    """One call: its track, its legs' clocks and its timeline."""

    def __init__(self, session_id: str, wav: wave.Wave_write, rate: int) -> None:
        self.session_id = session_id
        self.track = StereoTrack(rate, wav.writeframesraw)
        self.caller = LegClock(UPLINK_REANCHOR_US, stamp_is_end=True)
        self.agent = LegClock(DOWNLINK_REANCHOR_US, stamp_is_end=False)
        self.timeline: list[dict] = []
        self.pending: list[tuple[int, dict]] = []  # events before the first frame (t unknown)
        self.counts = {"caller_frames": 0, "concealed": 0, "agent_frames": 0,
                       "passthrough_frames": 0}
        self.end_reason = ""
        self.agent_end_us: int | None = None  # where the agent's last frame ends

    def on_item(self, item) -> None:
        if isinstance(item, voxgate.AudioFrame):
            start = self.caller.start_of(item.rtp_timestamp, item.arrival_unix_micros)
            self.track.put(LEFT, start, pcm16(item.pcm), item.sample_rate)
            self.counts["caller_frames"] += 1
            self.counts["concealed"] += int(item.concealed)
        elif isinstance(item, voxgate.SentAudio):
            if not item.pcm:  # a passthrough owner's Opus: nothing to decode it with here
                self.counts["passthrough_frames"] += 1
                return
            start = self.agent.start_of(item.rtp_timestamp, item.sent_unix_micros)
            self.track.put(RIGHT, start, pcm16(item.pcm), item.sample_rate)
            self.counts["agent_frames"] += 1
            self.agent_end_us = start + 20_000
        elif isinstance(item, voxgate.OpusFrame):
            self.counts["passthrough_frames"] += 1
        elif isinstance(item, voxgate.Cleared):
            # The clear took effect where the agent's audio stops (it follows the last frame
            # sent before it); the recorder's own clock would add the gRPC trip.
            at = self.agent_end_us
            self.add(at, {"event": "cleared", **dataclasses.asdict(item)})
        elif isinstance(item, voxgate.Quality):
            self.add(None, {"event": "quality", **dataclasses.asdict(item)})
        elif isinstance(item, voxgate.Event):
            entry = {"event": str(item.kind.value)}
            if item.kind is voxgate.EventKind.ENDED:
                self.end_reason = item.reason
                self.track.pad_to(item.at_unix_micros)
                entry["reason"] = item.reason
                entry["quality"] = item.quality and dataclasses.asdict(item.quality)
            self.add(item.at_unix_micros or None, entry)
        elif isinstance(item, voxgate.Message):
            self.add(None, {"event": "caller_message", "label": item.label,
                            "bytes": len(item.text.encode() if item.text is not None
                                         else item.binary or b"")})

    def add(self, at_us: int | None, entry: dict) -> None:
        """An entry at transceiver time `at_us` (None: now, as this process sees it)."""
        if at_us is None:
            at_us = time.time_ns() // 1000
        if self.track.t0_us is None:
            self.pending.append((at_us, entry))
        else:
            self.timeline.append({"t": round(self.track.seconds_at(at_us), 4), **entry})

    def finish(self) -> dict:
        self.track.close()
        head = [{"t": round(self.track.seconds_at(at), 4), **e} for at, e in self.pending]
        return {
            "session_id": self.session_id,
            "sample_rate": self.track.rate,
            "t0_unix_micros": self.track.t0_us,
            "seconds": round(self.track.written / self.track.rate, 3),
            "end_reason": self.end_reason,
            **self.counts,
            "late_samples_dropped": self.track.late_samples,
            "reanchored": {"caller": self.caller.reanchored, "agent": self.agent.reanchored},
            "timeline": head + self.timeline,
        }


async def record(args: argparse.Namespace, session_id: str) -> dict:
    out = Path(args.out_dir)
    wav_path, json_path = out / f"{session_id}.wav", out / f"{session_id}.json"
    with wave.open(str(wav_path), "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(args.sample_rate)
        rec = CallRecording(session_id, wav, args.sample_rate)
        log.info("%s: tapping (caller left, agent right) into %s", session_id, wav_path)
        try:
            async for item in voxgate.tap(args.target, session_id, token=args.token,
                                          downlink=True):
                rec.on_item(item)
        except voxgate.AuthError:
            raise
        except voxgate.VoxgateError as e:
            log.warning("%s: %s", session_id, e)
            rec.end_reason = rec.end_reason or f"tap: {e}"
        record = rec.finish()
    record["wav"] = str(wav_path)
    json_path.write_text(json.dumps(record, indent=1) + "\n")
    return {"session_id": session_id, "wav": str(wav_path), "timeline": str(json_path),
            "reason": record["end_reason"], "caller_frames": record["caller_frames"],
            "agent_frames": record["agent_frames"]}


async def session_ids(args: argparse.Namespace):
    for sid in args.session:
        yield sid
    if args.session:
        return
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    log.info("reading session ids from stdin")
    while line := await reader.readline():
        if sid := line.decode().strip():
            yield sid


async def run(args: argparse.Namespace) -> None:
    """Records every call given until all have ended; the first refused token ends it all."""
    refused: asyncio.Future[voxgate.AuthError] = asyncio.get_running_loop().create_future()

    async def one(sid: str) -> None:
        try:
            print(json.dumps(await record(args, sid)), flush=True)
        except voxgate.AuthError as e:
            if not refused.done():
                refused.set_result(e)

    async with voxgate.TaskSet("recordings") as tasks:
        async for sid in session_ids(args):
            tasks.create_task(one(sid), name=f"record-{sid}")
        while len(tasks) and not refused.done():
            await asyncio.wait([*tasks, refused], return_when=asyncio.FIRST_COMPLETED)
    if refused.done():
        raise refused.result()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="records calls beside their backend: a stereo WAV "
                                "(caller left, agent right) and a JSON timeline per call")
    p.add_argument("--target", default="127.0.0.1:50051",
                   help="transceiver gRPC address host:port (default %(default)s)")
    p.add_argument("--token", default=os.environ.get("VOXGATE_RECORDER_TOKEN"),
                   help="bearer token for the gRPC API (default: $VOXGATE_RECORDER_TOKEN)")
    p.add_argument("--session", action="append", default=[],
                   help="a session id to record (repeatable; none: read ids from stdin)")
    p.add_argument("--out-dir", default="recordings", help="directory for the WAV and JSON")
    p.add_argument("--sample-rate", type=int, default=48000, choices=(16000, 24000, 48000),
                   help="the WAV's rate; legs at another rate are resampled (default 48000)")
    p.add_argument("--timeout", type=float, default=0,
                   help="give up after this many seconds (status 1; 0 = never)")
    return p.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    task = asyncio.ensure_future(run(args))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await asyncio.wait_for(task, args.timeout or None)
    except asyncio.TimeoutError:
        log.error("timed out after %.1f s", args.timeout)
        return 1
    except asyncio.CancelledError:
        return 0
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
