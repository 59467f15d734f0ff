#!/usr/bin/env python3
"""A voxgate backend that records every caller to a WAV file.

It subscribes to a transceiver as a worker over the bridge API (proto/grpc/voxgate.proto):
`Work` carries Register / Load / Reject up and Dispatch down; each dispatched session is
attached on its own `Session` stream (Attach first, then the request side stays open, fed from
a queue, until the session ends). The caller's 20 ms PCM frames go to OUT_DIR/<session_id>.wav
(mono, 16-bit, the attach sample rate), concealed frames included as delivered. When the
session ends, one JSON line goes to stdout:

    {"session_id": "...", "frames": 250, "concealed": 3, "path": "out/abc.wav", "reason": "deleted"}

Logs go to stderr. Threads: the main thread waits for the stop condition (--max-sessions,
--timeout, SIGTERM/Ctrl-C); one thread keeps the Work stream up (reconnecting with backoff);
one thread per session reads its uplink.

Run from the repo root after scripts/setup (which generates the stubs into build/pygrpc):

    .venv/bin/python scripts/recorder_backend.py --out-dir /tmp/rec --max-sessions 1
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import wave
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "build" / "pygrpc"

log = logging.getLogger("recorder")


def _import_stubs():
    """Imports the generated stubs, generating them first if they are missing."""
    sys.path.insert(0, str(STUBS))
    try:
        import voxgate_pb2, voxgate_pb2_grpc  # noqa: E401
    except ImportError:
        subprocess.run([str(ROOT / "scripts" / "gen_grpc_stubs.sh")], check=True)
        import voxgate_pb2, voxgate_pb2_grpc  # noqa: E401
    return voxgate_pb2, voxgate_pb2_grpc


import grpc  # noqa: E402

pb, pb_grpc = _import_stubs()

BACKOFF_MIN, BACKOFF_MAX = 0.25, 5.0
# A Work stream that lived this long was healthy: the next reconnect starts from scratch.
HEALTHY_SECS = 10.0


def _queue_iter(q: queue.Queue):
    """Request iterator of a streaming call: yields what is put on `q` until None."""
    while True:
        item = q.get()
        if item is None:
            return
        yield item


class Recording:
    """One session's WAV file and counters."""

    def __init__(self, path: Path, sample_rate: int):
        self.path = path
        self.sample_rate = sample_rate
        self.frames = 0
        self.concealed = 0
        self.next_sequence = 0
        self._wav = wave.open(str(path), "wb")
        self._wav.setnchannels(1)
        self._wav.setsampwidth(2)
        self._wav.setframerate(sample_rate)

    def write(self, frame) -> None:
        if frame.sample_rate_hz and frame.sample_rate_hz != self.sample_rate:
            log.warning("%s: frame at %d Hz, attached at %d Hz", self.path.stem,
                        frame.sample_rate_hz, self.sample_rate)
        if frame.sequence < self.next_sequence:
            log.warning("%s: frame %d repeated or out of order, dropped", self.path.stem,
                        frame.sequence)
            return
        gap = frame.sequence - self.next_sequence
        if gap:
            # The contract says sequences have no gaps; keep the file time-true if they do.
            log.warning("%s: %d frames missing before %d, filled with silence",
                        self.path.stem, gap, frame.sequence)
            self._wav.writeframes(b"\0\0" * (self.sample_rate // 50) * gap)
        self._wav.writeframes(frame.pcm)
        self.next_sequence = frame.sequence + 1
        self.frames += 1
        self.concealed += int(frame.concealed)

    def close(self) -> None:
        self._wav.close()


class Recorder:
    def __init__(self, args):
        self.args = args
        self.metadata = (("authorization", f"Bearer {args.token}"),) if args.token else ()
        target = args.target.split("://", 1)[-1]
        self.channel = grpc.insecure_channel(target)
        self.stub = pb_grpc.BridgeStub(self.channel)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.active = 0
        self.ended = 0
        self.paths: set[Path] = set()
        self.work_q: queue.Queue | None = None
        self.work_call = None
        self.calls: set = set()
        self.sessions: list[threading.Thread] = []

    # ---- worker subscription ------------------------------------------------------------

    def work_loop(self) -> None:
        backoff = BACKOFF_MIN
        while not self.stop.is_set():
            q: queue.Queue = queue.Queue()
            q.put(pb.WorkerMessage(register=pb.Register(
                worker_id=self.args.worker_id, capacity=self.args.capacity)))
            with self.lock:
                if self.active:
                    q.put(pb.WorkerMessage(load=pb.Load(active=self.active)))
                self.work_q = q
            started = time.monotonic()
            call = self.stub.Work(_queue_iter(q), metadata=self.metadata)
            with self.lock:
                self.work_call = call
            self._track(call)
            try:
                call.initial_metadata()
                if not call.done():
                    log.info("registered as %s (capacity %d) at %s", self.args.worker_id,
                             self.args.capacity, self.args.target)
                for command in call:
                    if command.WhichOneof("kind") == "dispatch":
                        self.on_dispatch(command.dispatch)
                if not self.stop.is_set():
                    log.warning("worker stream closed by the transceiver")
            except grpc.RpcError as e:
                if not self.stop.is_set():
                    log.warning("worker stream down: %s %s (retry in %.2f s)", e.code().name,
                                e.details(), backoff)
            finally:
                q.put(None)
                self._untrack(call)
                with self.lock:
                    if self.work_q is q:
                        self.work_q = None
            if time.monotonic() - started >= HEALTHY_SECS:
                backoff = BACKOFF_MIN
            self.stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def send_work(self, message) -> None:
        with self.lock:
            if self.work_q is not None:
                self.work_q.put(message)

    def on_dispatch(self, dispatch) -> None:
        with self.lock:
            room = self.active < self.args.capacity and not self.stop.is_set()
            if room:
                self.active += 1
                active = self.active
        if not room:
            log.info("%s: at capacity, rejecting", dispatch.session_id)
            self.send_work(pb.WorkerMessage(reject=pb.Reject(
                session_id=dispatch.session_id, reason="at_capacity")))
            return
        self.send_work(pb.WorkerMessage(load=pb.Load(active=active)))
        t = threading.Thread(target=self.run_session, args=(dispatch,),
                             name=f"session-{dispatch.session_id}", daemon=True)
        self.sessions.append(t)
        t.start()

    # ---- one session ----------------------------------------------------------------------

    def run_session(self, dispatch) -> None:
        session_id = dispatch.session_id
        q: queue.Queue = queue.Queue()
        q.put(pb.Downlink(attach=pb.Attach(
            session_id=session_id, worker_id=self.args.worker_id,
            sample_rate_hz=self.args.sample_rate, mode=pb.AUDIO_MODE_PCM)))
        call = self.stub.Session(_queue_iter(q), metadata=self.metadata)
        self._track(call)
        rec: Recording | None = None
        attached = False
        reason = "stream_closed"
        try:
            for up in call:
                kind = up.WhichOneof("kind")
                if kind == "audio":
                    if rec is None:
                        rec = self._open(session_id)
                    rec.write(up.audio)
                elif kind == "event":
                    ev = up.event
                    if ev.kind == pb.SessionEvent.ATTACHED:
                        attached = True
                        log.info("%s: attached (attempt %d)", session_id, dispatch.attempt)
                        if rec is None:
                            rec = self._open(session_id)
                    elif ev.kind == pb.SessionEvent.ENDED:
                        reason = ev.reason or "ended"
                        log.info("%s: ended (%s)", session_id, reason)
                        break
                    else:
                        log.debug("%s: %s", session_id, pb.SessionEvent.Kind.Name(ev.kind))
        except grpc.RpcError as e:
            reason = "shutdown" if self.stop.is_set() else f"stream_error:{e.code().name}"
            if not self.stop.is_set():
                log.warning("%s: session stream: %s %s", session_id, e.code().name, e.details())
            if not attached and not self.stop.is_set():
                self.send_work(pb.WorkerMessage(reject=pb.Reject(
                    session_id=session_id, reason=f"attach failed: {e.code().name}")))
        finally:
            q.put(None)  # half-close our side; the transceiver closes the stream after ENDED
            self._untrack(call)
            if rec is not None:
                rec.close()
                self._report(session_id, rec, reason)
            with self.lock:
                self.active -= 1
                active = self.active
            self.send_work(pb.WorkerMessage(load=pb.Load(active=active)))

    def _open(self, session_id: str) -> Recording:
        out = Path(self.args.out_dir)
        with self.lock:
            path = out / f"{session_id}.wav"
            n = 1
            while path in self.paths:  # the same session dispatched to us again
                n += 1
                path = out / f"{session_id}-{n}.wav"
            self.paths.add(path)
        return Recording(path, self.args.sample_rate)

    def _report(self, session_id: str, rec: Recording, reason: str) -> None:
        line = json.dumps({"session_id": session_id, "frames": rec.frames,
                           "concealed": rec.concealed, "path": str(rec.path),
                           "reason": reason})
        with self.lock:
            print(line, flush=True)
            self.ended += 1
            if self.args.max_sessions and self.ended >= self.args.max_sessions:
                self.stop.set()

    # ---- shutdown -------------------------------------------------------------------------

    def _track(self, call) -> None:
        with self.lock:
            self.calls.add(call)
        if self.stop.is_set():
            call.cancel()

    def _untrack(self, call) -> None:
        with self.lock:
            self.calls.discard(call)

    def shutdown(self) -> None:
        self.stop.set()
        with self.lock:
            calls = list(self.calls)
            work = self.work_call
        # Session streams first, the worker stream a moment later: the transceiver then
        # re-dispatches the sessions to other workers rather than back to this one.
        for call in calls:
            if call is not work:
                call.cancel()
        if work is not None:
            time.sleep(0.1)
            work.cancel()
        deadline = time.monotonic() + 5
        for t in self.sessions:
            t.join(max(0.0, deadline - time.monotonic()))
        self.channel.close()


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="voxgate backend that records each caller to OUT_DIR/<session_id>.wav "
                    "and prints one JSON line per ended session")
    p.add_argument("--target", default="127.0.0.1:50051",
                   help="transceiver gRPC address host:port (default %(default)s)")
    p.add_argument("--token", default=os.environ.get("VOXGATE_RECORDER_TOKEN"),
                   help="bearer token for the gRPC API (default: $VOXGATE_RECORDER_TOKEN)")
    p.add_argument("--worker-id", default=f"{socket.gethostname()}-{os.getpid()}",
                   help="worker id to register with (default: <hostname>-<pid>)")
    p.add_argument("--capacity", type=int, default=100,
                   help="sessions recorded at once (default %(default)s)")
    p.add_argument("--out-dir", default="recordings",
                   help="directory for the WAV files (created if missing; default %(default)s)")
    p.add_argument("--sample-rate", type=int, default=48000, choices=(16000, 24000, 48000),
                   help="PCM rate asked for at attach (default %(default)s)")
    p.add_argument("--max-sessions", type=int, default=0,
                   help="exit after this many sessions ended (0 = run until stopped)")
    p.add_argument("--timeout", type=float, default=0,
                   help="exit after this many seconds (0 = none); with --max-sessions, "
                        "exiting by timeout is a failure (status 1)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    if args.capacity < 1:
        p.error("--capacity must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s recorder %(levelname)s %(message)s")
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    rec = Recorder(args)
    signal.signal(signal.SIGTERM, lambda *_: rec.stop.set())
    threading.Thread(target=rec.work_loop, name="work", daemon=True).start()
    timed_out = False
    try:
        timed_out = not rec.stop.wait(args.timeout or None)
    except KeyboardInterrupt:
        pass
    rec.shutdown()
    if timed_out and args.max_sessions and rec.ended < args.max_sessions:
        log.error("timed out after %.1f s with %d of %d sessions ended", args.timeout,
                  rec.ended, args.max_sessions)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
