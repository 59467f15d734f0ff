"""The part of a `Call` that carries it across sessions (docs/continuity.md): waiting in
`RESUMING` when the session is lost, attaching a resumed session to the same call, and reporting
what the gap lost (`on_resumed`). A mixin of `Call` (call.py), kept apart so that each file
holds one job; it uses the call's state and streams, and no I/O of its own beyond them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from voxgate._call_stream import CallStream, CallTransport
from voxgate._proto import voxgate_pb2 as pb
from voxgate._resume import Leg, LossLedger, resumed_record
from voxgate.errors import VoxgateError
from voxgate.types import CallState, Cleared, Resumed

log = logging.getLogger("voxgate.call")

# After a resume, how long the new session may go without a caller frame before the `Resumed`
# record is reported without the caller-audio gap.
RESUMED_FALLBACK_S = 2.0


async def wait_either(first: asyncio.Event, second: asyncio.Event,
                       timeout: float | None) -> None:
    """Returns once either event is set, or after `timeout` seconds (no error either way); the
    waiting tasks never outlive it, even when the caller is cancelled."""
    waits = {asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()



class Resumable:
    """What `Call` does across sessions; see the module doc."""

    if TYPE_CHECKING:  # the attributes `Call.__init__` sets
        call_id: str
        session_id: str
        target: str
        generation: int
        sample_rate: int
        mode: Any
        resumes: list[Resumed]
        connected: asyncio.Event
        data_channel_open: asyncio.Event
        ended: asyncio.Event
        _state: CallState
        _stream: CallStream | None
        _transport: CallTransport
        _leg: Leg | None
        _pending_leg: Leg | None
        _pending_failed: asyncio.Event
        _attached: asyncio.Event
        _ledger: LossLedger
        _lost: tuple[str | None, VoxgateError | None] | None
        _window: asyncio.Task | None
        _pending_resumed: tuple[str, LossLedger] | None
        _fallback: asyncio.Task | None
        _resume_window_s: float
        _resume_listeners: list[Callable[[Resumed], None]]
        _clears: Any
        _worker_id: str
        _progress_interval_ms: int
        _encoder: pb.OpusEncoder | None
        _attach_timeout_s: float

        def _finish(self, reason: str | None, error: VoxgateError | None) -> None: ...


    def on_resumed(self, listener: Callable[[Resumed], None]) -> Callable[[], None]:
        """Calls `listener(resumed)` each time the call continues on a new session (once the
        new session's first caller frame came, or 2 s after it connected without one). Returns
        a function that stops it."""
        self._resume_listeners.append(listener)

        def remove() -> None:
            if listener in self._resume_listeners:
                self._resume_listeners.remove(listener)

        return remove

    def _may_resume(self) -> bool:
        return self._resume_window_s > 0 and self._state is CallState.ATTACHED

    def _enter_resuming(self, reason: str | None, error: VoxgateError | None) -> None:
        """The session is lost but the call may go on: wait for a resume, at most the window;
        then the call ends as the session did."""
        self._state = CallState.RESUMING
        self._lost = (reason, error)
        # `send` waits for the new session's data channel; a clear has nothing left to drop.
        self.connected.clear()
        self.data_channel_open.clear()
        while self._clears:
            fut = self._clears.popleft()
            if not fut.done():
                fut.set_result(Cleared(played_ms=0, dropped_ms=0, item_id="", item_played_ms=0))
        log.info("session %s of call %s lost (%s); waiting %.0f s for a resume", self.session_id,
                 self.call_id, reason or error, self._resume_window_s)

        async def window() -> None:
            await asyncio.sleep(self._resume_window_s)
            if self._state is CallState.RESUMING:
                self._finish(reason, error)

        self._window = asyncio.get_running_loop().create_task(window())

    def _give_up_resuming(self) -> None:
        """The transceiver offered this session again (it lives; only this backend's stream
        to it broke): the call waits for no resume, now or when it hears of the break."""
        self._resume_window_s = 0.0
        if self._state is CallState.RESUMING and self._lost is not None:
            self._finish(*self._lost)

    async def _resume(self, transport: CallTransport, target: str, session_id: str,
                      generation: int) -> bool:
        """Attaches new session `session_id` (offered as a resume of this call at
        `generation`) to this call; returns whether it holds. The generation moves on before
        anything is awaited, so a second resume of the same generation is refused."""
        previous, old_stream = self.session_id, self._stream
        was_live = self._state is CallState.ATTACHED
        self.generation = generation + 1
        leg = Leg(self, session_id)
        self._pending_leg = leg
        self._pending_failed.clear()
        self._attached.clear()
        attach = pb.Attach(
            session_id=session_id, worker_id=self._worker_id, sample_rate_hz=self.sample_rate,
            mode=int(self.mode), progress_interval_ms=self._progress_interval_ms,
            encoder=self._encoder)
        stream: CallStream | None = None
        try:
            stream = await transport.open(leg, attach)
            await wait_either(self._attached, self._pending_failed, self._attach_timeout_s)
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            log.warning("resume of call %s on %s failed: %s", self.call_id, session_id, e)
        if stream is None or self._leg is not leg or self.ended.is_set():
            self._pending_leg = None
            if stream is not None:
                stream.drop()
            if not self.ended.is_set():
                self.generation = generation
                if was_live:
                    self._attached.set()
            return False
        self.session_id, self.target, self._transport, self._stream = (
            session_id, target, transport, stream)
        self._state = CallState.ATTACHED
        if self._window is not None:
            self._window.cancel()
        self._lost, self._window = None, None
        self._pending_resumed = (previous, self._ledger)
        self._ledger = LossLedger(self.sample_rate)
        log.info("call %s resumed on session %s at %s (generation %d)", self.call_id,
                 session_id, target, self.generation)
        if was_live and old_stream is not None:
            # The old session still lives (a draining transceiver): this backend ends it (the
            # transceiver then ends the stream; its ENDED goes to the old leg, unheard).
            try:
                await old_stream.write(pb.Downlink(hangup=pb.Hangup(reason="resumed")))
            except (grpc.RpcError, asyncio.InvalidStateError):
                old_stream.drop()
        return True

    def _on_caller_frame(self, arrival_us: int) -> None:
        self._ledger.last_arrival_us = arrival_us
        if self._pending_resumed is not None:
            self._report_resumed(arrival_us)

    async def _resumed_without_frame(self) -> None:
        await asyncio.sleep(RESUMED_FALLBACK_S)
        if self._pending_resumed is not None:
            self._report_resumed(None)

    def _report_resumed(self, first_arrival_us: int | None) -> None:
        assert self._pending_resumed is not None
        previous, old = self._pending_resumed
        self._pending_resumed = None
        if self._fallback is not None and self._fallback is not asyncio.current_task():
            self._fallback.cancel()
        self._fallback = None
        record = resumed_record(previous=previous, session_id=self.session_id,
                                target=self.target, generation=self.generation, old=old,
                                first_arrival_us=first_arrival_us)
        self.resumes.append(record)
        for listener in list(self._resume_listeners):
            try:
                listener(record)
            except Exception:
                log.exception("on_resumed listener of %s failed", self.call_id)
