"""A backend worker: subscribes to transceivers and hands out the calls they dispatch.

One `Work` stream per transceiver, each kept up by its own task: `Register` first (id and
capacity), then `Load` whenever the worker's number of calls changes (reported to every
transceiver, so each sees the worker's whole load), `Reject` for a declined call. A stream that
breaks is reopened with exponential backoff (0.25 s doubling to 5 s, reset after 10 healthy
seconds); a refused token is not retried but raised from `calls()` and `wait_registered()`.
Dispatches from every transceiver meet in one queue that `calls()` drains. The calls a worker
accepts from one transceiver ride one `Multiplex` stream there, a channel each (see
_multiplex.py); `multiplex=False` gives each call a `Session` stream of its own instead
(_session_stream.py). The worker's own background tasks (Work streams, load reports, declines)
are kept in a `TaskSet` and cancelled by `aclose()`.

A dispatch that resumes a call (`Dispatch.resume`, docs/continuity.md) is not a new call: the
worker attaches the new session to the live `Call` with that call id (`resume_decision` in
_resume.py says whether it may), which then carries on; `calls()` never yields it.

    async with Worker("127.0.0.1:50051", token=..., capacity=8) as worker, TaskSet() as tasks:
        async for call in worker.calls():
            tasks.create_task(serve(call))     # serve: `async with call: ...`
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Sequence

import grpc

from voxgate import _wire
from voxgate._call_stream import CallTransport
from voxgate._multiplex import Multiplex
from voxgate._proto import voxgate_pb2 as pb
from voxgate._proto import voxgate_pb2_grpc as pb_grpc
from voxgate._resume import resume_decision
from voxgate._serial_writer import SerialWriter
from voxgate._session_stream import SessionStreams
from voxgate._wire import normalize_target, opus_encoder  # noqa: F401 - their former home
from voxgate.call import Call
from voxgate.errors import AuthError, VoxgateError, from_rpc_error
from voxgate.task_set import TaskSet
from voxgate.types import AudioMode, CallState, OpusApplication, SampleRate

log = logging.getLogger("voxgate.worker")

BACKOFF_MIN_S, BACKOFF_MAX_S = 0.25, 5.0
# A Work stream that lived this long was healthy: the next reconnect starts from scratch.
HEALTHY_S = 10.0

# The former names of `AudioMode.PCM` and `AudioMode.OPUS_PASSTHROUGH`.
PCM = AudioMode.PCM
OPUS_PASSTHROUGH = AudioMode.OPUS_PASSTHROUGH

# Calls ride one Multiplex stream per transceiver unless a Worker says otherwise.
DEFAULT_MULTIPLEX = True


class _Link:
    """The Work stream to one transceiver, and the transport its calls there ride."""

    def __init__(self, target: str, channel: grpc.aio.Channel,
                 auth: tuple[tuple[str, str], ...], multiplex: bool) -> None:
        self.target = target
        self.channel = channel
        self.stub = pb_grpc.BridgeStub(channel)
        self.transport: CallTransport = (
            Multiplex(self.stub, auth) if multiplex else SessionStreams(self.stub, auth))
        self.stream: grpc.aio.StreamStreamCall | None = None
        # Every write to `stream` goes through `writer` (see _serial_writer.py).
        self.writer: SerialWriter | None = None
        self.registered = asyncio.Event()


class Worker:
    """Subscribes to one or more transceivers as a worker (see the module doc)."""

    def __init__(
        self,
        targets: str | Sequence[str],
        *,
        token: str | None = None,
        capacity: int = 1,
        worker_id: str | None = None,
        sample_rate: SampleRate = 16000,
        mode: AudioMode | int = AudioMode.PCM,
        progress_interval_ms: int = 0,
        opus_application: OpusApplication | str | None = None,
        opus_complexity: int | None = None,
        multiplex: bool | None = None,
        resume_window_s: float = 30.0,
    ) -> None:
        """`sample_rate` (Hz: 16000, 24000 or 48000) is the PCM rate of every call's audio,
        both ways. `opus_application` (an `OpusApplication` or its value: "voip", "audio",
        "lowdelay") and `opus_complexity` (0 to 10) choose how the transceiver encodes this
        worker's audio for its callers (PCM mode); `None` keeps the transceiver's setting.
        "lowdelay" (CELT only) is the cheaper one for the transceiver and suits synthetic (TTS)
        speech. `multiplex` (default: yes) carries all calls on one stream per transceiver;
        `False` gives each call a `Session` stream of its own. A call whose session is lost
        (its transceiver died, its network failed) waits `resume_window_s` seconds for the
        caller to resume it on a new session (0: it ends at once, as before resumes existed).
        A bad value is a ValueError here, before anything is sent."""
        if isinstance(targets, str):
            targets = [targets]
        if not targets:
            raise ValueError("Worker needs at least one transceiver address")
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.capacity = capacity
        self.sample_rate = _wire.sample_rate(sample_rate)
        self.mode = _wire.audio_mode(mode)
        self.progress_interval_ms = progress_interval_ms
        self.encoder = _wire.opus_encoder(opus_application, opus_complexity)
        self.multiplex = DEFAULT_MULTIPLEX if multiplex is None else multiplex
        self._auth = _wire.bearer(token)
        self._targets = [normalize_target(t) for t in targets]
        self._links: list[_Link] = []
        self._calls: asyncio.Queue[Call | VoxgateError | None] = asyncio.Queue()
        self._active: set[Call] = set()
        self.resume_window_s = resume_window_s
        # The live calls by call id: what a resume dispatch continues.
        self._by_call: dict[str, Call] = {}
        self._tasks = TaskSet(f"worker {self.worker_id}")
        self._fatal: VoxgateError | None = None
        self._closed = False

    @property
    def active(self) -> int:
        """Calls this worker holds (pending or attached)."""
        return len(self._active)

    async def __aenter__(self) -> Worker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Opens the Work streams (returns at once; see `wait_registered`)."""
        if self._links:
            return
        for target in self._targets:
            link = _Link(target, grpc.aio.insecure_channel(target), self._auth, self.multiplex)
            self._tasks.create_task(self._work_loop(link), name=f"voxgate-work-{target}")
            self._links.append(link)

    async def wait_registered(self, timeout: float | None = None) -> None:
        """Waits until every transceiver has accepted the registration. Raises `AuthError` on a
        refused token, `TimeoutError` when one has not answered in time."""
        await self.start()

        async def all_registered() -> None:
            for link in self._links:
                while not link.registered.is_set():
                    if self._fatal is not None:
                        raise self._fatal
                    try:
                        await asyncio.wait_for(link.registered.wait(), 0.05)
                    except asyncio.TimeoutError:
                        pass

        try:
            await asyncio.wait_for(all_registered(), timeout)
        except asyncio.TimeoutError:
            missing = [lk.target for lk in self._links if not lk.registered.is_set()]
            raise TimeoutError(f"worker {self.worker_id}: no registration at {missing} "
                               f"within {timeout} s") from None

    async def calls(self) -> AsyncIterator[Call]:
        """The calls dispatched to this worker, as they come, until `aclose()`. Each must be
        accepted (`await call.accept()` or `async with call:`) or declined promptly."""
        await self.start()
        while True:
            item = await self._calls.get()
            if item is None:
                self._calls.put_nowait(None)
                return
            if isinstance(item, VoxgateError):
                self._calls.put_nowait(item)
                raise item
            yield item

    async def aclose(self) -> None:
        """Drops every call stream (the transceivers re-dispatch them), then the Work streams,
        and stops every task the worker started."""
        if self._closed:
            return
        self._closed = True
        for call in list(self._active):
            await call.aclose()
        await self._tasks.aclose()
        for link in self._links:
            await link.transport.aclose()
            await link.channel.close()
        self._calls.put_nowait(None)

    #: The former name of `aclose`.
    close = aclose

    # ---- Work streams -----------------------------------------------------------------------

    async def _work_loop(self, link: _Link) -> None:
        backoff = BACKOFF_MIN_S
        while not self._closed:
            started = time.monotonic()
            link.stream = link.stub.Work(metadata=self._auth)
            link.writer = SerialWriter(link.stream)
            try:
                await link.writer.write(pb.WorkerMessage(register=pb.Register(
                    worker_id=self.worker_id, capacity=self.capacity)))
                if self._active:
                    await link.writer.write(pb.WorkerMessage(load=pb.Load(active=self.active)))
                # The transceiver answers with headers once the registration is in.
                await link.stream.initial_metadata()
                if not link.stream.done():
                    link.registered.set()
                    log.info("worker %s registered at %s (capacity %d)", self.worker_id,
                             link.target, self.capacity)
                async for command in link.stream:
                    if command.WhichOneof("kind") == "dispatch":
                        await self._on_dispatch(link, command.dispatch)
                if not self._closed:
                    log.warning("worker stream to %s closed by the transceiver", link.target)
            except grpc.RpcError as e:
                err = from_rpc_error(e, f"worker {self.worker_id} at {link.target}")
                if isinstance(err, AuthError):
                    self._fatal = err
                    log.error("%s", err)
                    self._calls.put_nowait(err)
                    return
                if not self._closed:
                    log.warning("%s (retry in %.2f s)", err, backoff)
            except asyncio.CancelledError:
                link.stream.cancel()
                raise
            finally:
                link.registered.clear()
            if time.monotonic() - started >= HEALTHY_S:
                backoff = BACKOFF_MIN_S
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _on_dispatch(self, link: _Link, dispatch: pb.Dispatch) -> None:
        if dispatch.HasField("resume"):
            self._on_resume(link, dispatch)
            return
        for stale in [c for c in self._by_call.values() if c.session_id == dispatch.session_id]:
            # The transceiver lives and offers the session again (its stream to this backend
            # broke, not the call's transport): the old Call waits for no resume.
            stale._give_up_resuming()
        if len(self._active) >= self.capacity or self._closed:
            log.info("%s: at capacity (%d), rejecting", dispatch.session_id, self.capacity)
            # A call from another transceiver took the last place and this one may not have
            # heard yet: say so first, on the same stream, so the reject queues the session
            # there instead of having it offered straight back (each offer spends an attempt).
            # A closing worker reports itself full.
            active = max(len(self._active), self.capacity)
            await self._send(link, pb.WorkerMessage(load=pb.Load(active=active)))
            await self._send(link, pb.WorkerMessage(reject=pb.Reject(
                session_id=dispatch.session_id, reason="at_capacity", attempt=dispatch.attempt)))
            return

        def reject(session_id: str, reason: str) -> None:
            # Names the offer, so that a late decline cannot refuse a newer offer of the call.
            self._tasks.create_task(self._send(link, pb.WorkerMessage(reject=pb.Reject(
                session_id=session_id, reason=reason, attempt=dispatch.attempt))),
                name=f"voxgate-reject-{session_id}")

        call = Call(
            session_id=dispatch.session_id, metadata=dispatch.metadata,
            signed_metadata=dispatch.signed_metadata, caller_metadata=dispatch.caller_metadata,
            attempt=dispatch.attempt, worker_id=self.worker_id, target=link.target,
            ingress=dispatch.ingress, ingress_reason=dispatch.ingress_reason,
            transport=link.transport, sample_rate=self.sample_rate, mode=self.mode,
            progress_interval_ms=self.progress_interval_ms, encoder=self.encoder, reject=reject,
            on_done=self._call_done, call_id=dispatch.call_id,
            resume_window_s=self.resume_window_s)
        self._active.add(call)
        self._by_call[call.call_id] = call
        log.info("dispatched %s (attempt %d) from %s", call.session_id, call.attempt, link.target)
        await self._report_load()
        self._calls.put_nowait(call)

    def _on_resume(self, link: _Link, dispatch: pb.Dispatch) -> None:
        """A resume offer: the live call it names takes the new session, or it is declined.
        Decided before anything is awaited, so of two offers of one generation only the first
        is taken."""
        offer = dispatch.resume
        call = self._by_call.get(offer.call_id)
        live = call is not None and call.state is not CallState.ENDED and not self._closed
        reason = resume_decision(live, call.generation if call else 0, offer.generation)

        async def reject(why: str) -> None:
            log.info("declined resume of call %s as %s: %s", offer.call_id,
                     dispatch.session_id, why)
            await self._send(link, pb.WorkerMessage(reject=pb.Reject(
                session_id=dispatch.session_id, reason=why, attempt=dispatch.attempt)))

        if reason is not None or call is None:
            self._tasks.create_task(reject(reason or "resume_unknown"),
                                    name=f"voxgate-reject-{dispatch.session_id}")
            return

        async def resume() -> None:
            if not await call._resume(link.transport, link.target, dispatch.session_id,
                                      offer.generation):
                await reject("resume_failed")

        self._tasks.create_task(resume(), name=f"voxgate-resume-{dispatch.session_id}")

    def _call_done(self, call: Call) -> None:
        self._active.discard(call)
        if self._by_call.get(call.call_id) is call:
            del self._by_call[call.call_id]
        if not self._closed:
            self._tasks.create_task(self._report_load(), name="voxgate-load")

    async def _report_load(self) -> None:
        msg = pb.WorkerMessage(load=pb.Load(active=len(self._active)))
        for link in self._links:
            await self._send(link, msg)

    async def _send(self, link: _Link, msg: pb.WorkerMessage) -> None:
        writer = link.writer
        if writer is None or writer.stream.done():
            return  # the reconnect re-registers and reports the load
        try:
            await writer.write(msg)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            log.debug("worker stream to %s: write failed: %s", link.target, e)
