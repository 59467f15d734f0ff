"""What a `Call` needs to survive its session (docs/continuity.md), without I/O: which ends may
be resumed, whether a resume offer is taken, and the bookkeeping of what a resume lost.

- `resume_decision` is the worker's answer to a `Dispatch` with `resume`: take it (None), or
  decline it with "resume_unknown" (no live call with that id here) or "resume_stale" (the call
  is served at another generation: the credential was used already, or a second resume raced
  the first).
- A `Leg` is one session of a call: the sink its stream hands the uplink to. A call follows
  only its current leg, so the old session's late messages (its ENDED after a hang-up, a frame
  in flight) change nothing.
- A `LossLedger` counts what the backend queued and what the transceiver said was played, so
  that a resume can tell which audio was never confirmed played, and when the old session's
  last caller frame arrived.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from voxgate._proto import voxgate_pb2 as pb
from voxgate.errors import VoxgateError
from voxgate.types import Resumed

# Session ends a call may be resumed after: the transport was lost, not the call.
RESUMABLE_REASONS = frozenset({"ice_disconnected", "shutdown"})
# Items remembered for the unplayed report (the latest ones).
MAX_ITEMS = 64


def resume_decision(live: bool, serving_generation: int, offered_generation: int) -> str | None:
    """The worker's answer to a resume offer of a call at `offered_generation`: None to take
    it, else the reason to decline. `live`: a call with that id lives here (pending, attached
    or resuming), served at `serving_generation`."""
    if not live or offered_generation > serving_generation:
        # A later generation than this worker serves was minted by a session it never held.
        return "resume_unknown"
    if offered_generation < serving_generation:
        return "resume_stale"
    return None


class LegOwner(Protocol):
    """The call side of a leg."""

    def _leg_uplink(self, leg: Leg, up: pb.Uplink) -> None: ...

    def _leg_closed(self, leg: Leg, error: VoxgateError | None) -> None: ...


class Leg:
    """One session of a call, as the `UplinkSink` its stream reports to (_call_stream.py)."""

    __slots__ = ("session_id", "_owner")

    def __init__(self, owner: LegOwner, session_id: str) -> None:
        self.session_id = session_id
        self._owner = owner

    def _on_uplink(self, up: pb.Uplink) -> None:
        self._owner._leg_uplink(self, up)

    def _on_closed(self, error: VoxgateError | None) -> None:
        self._owner._leg_closed(self, error)


class LossLedger:
    """What one session of a call queued and played, and when its last caller frame came."""

    def __init__(self, sample_rate: int) -> None:
        self._bytes_per_ms = max(1, sample_rate // 1000) * 2
        self.queued_ms = 0
        self.played_ms = 0
        self.dropped_ms = 0  # play() while resuming
        self.last_arrival_us: int | None = None
        # Items in the order they were first queued (the latest MAX_ITEMS), and the one the
        # last progress report named.
        self._items: deque[str] = deque(maxlen=MAX_ITEMS)
        self._played_item = ""

    def queued(self, pcm_bytes: int, item_id: str) -> None:
        self.queued_ms += pcm_bytes // self._bytes_per_ms
        if not self._items or self._items[-1] != item_id:
            self._items.append(item_id)

    def dropped(self, pcm_bytes: int, item_id: str) -> None:
        self.dropped_ms += pcm_bytes // self._bytes_per_ms
        self.queued(pcm_bytes, item_id)

    def progress(self, played_ms: int, item_id: str) -> None:
        self.played_ms = max(self.played_ms, played_ms)
        self._played_item = item_id

    def cleared(self, played_ms: int, dropped_ms: int) -> None:
        # A clear drops the queue: nothing queued before it is left to play.
        self.played_ms = max(self.played_ms, played_ms)
        self.queued_ms = self.played_ms
        self._items.clear()

    def unplayed(self) -> tuple[int, tuple[str, ...]]:
        """Audio never confirmed played (ms), and the items it belongs to."""
        unplayed_ms = max(0, self.queued_ms - self.played_ms)
        if unplayed_ms == 0:
            return 0, ()
        items = list(self._items)
        if self._played_item in items:
            items = items[items.index(self._played_item):]
        return unplayed_ms, tuple(i for i in items if i)


def resumed_record(*, previous: str, session_id: str, target: str, generation: int,
                   old: LossLedger, first_arrival_us: int | None) -> Resumed:
    """The `Resumed` a call reports once the new session's first frame (or none) came."""
    lost = None
    if old.last_arrival_us is not None and first_arrival_us is not None:
        # One frame apart is no loss.
        lost = max(0, (first_arrival_us - old.last_arrival_us) // 1000 - 20)
    unplayed_ms, items = old.unplayed()
    return Resumed(previous_session_id=previous, session_id=session_id, target=target,
                   generation=generation, caller_audio_lost_ms=lost, unplayed_ms=unplayed_ms,
                   unplayed_items=items)
