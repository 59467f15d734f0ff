"""The bounded queue a call's iterators read (`DropOldestQueue`), and a `Feed`: one kind of
update a call publishes now and then (its network quality, each turn's latency) as a call
surfaces it three ways: the latest value, listeners (`on_...`) and async iterators, each with
a queue of its own. No I/O; the call publishes and, when it ends, closes the feed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("voxgate.call")

T = TypeVar("T")

END = object()  # queue sentinel: the call is over


class DropOldestQueue:
    """A bounded FIFO for one consumer: a full queue drops its oldest item and counts it."""

    def __init__(self, maxlen: int) -> None:
        self._items: deque[Any] = deque()
        self._maxlen = maxlen
        self._ready = asyncio.Event()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> None:
        if len(self._items) >= self._maxlen:
            self._items.popleft()
            self.dropped += 1
        self._items.append(item)
        self._ready.set()

    async def get(self) -> Any:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class Feed(Generic[T]):
    """The latest update, its listeners and its iterators (each buffering `maxlen` updates,
    the oldest dropped first). `what` names the listeners in a failure's log line; `who` says
    whose feed it is (a call's current session id) when one fails."""

    def __init__(self, what: str, maxlen: int, who: Callable[[], str]) -> None:
        self.latest: T | None = None
        self._what = what
        self._maxlen = maxlen
        self._who = who
        self._listeners: list[Callable[[T], None]] = []
        self._queues: list[DropOldestQueue] = []  # one per iterator
        self._closed = False
        self._error: BaseException | None = None

    def publish(self, update: T) -> None:
        """A new update: the latest, into every iterator's queue, to every listener (one that
        raises is logged, the others still hear it)."""
        self.latest = update
        for queue in self._queues:
            queue.put(update)
        for listener in list(self._listeners):
            try:
                listener(update)
            except Exception:
                log.exception("%s listener of %s failed", self._what, self._who())

    def close(self, error: BaseException | None) -> None:
        """The call is over: listeners hear no more, iterators end (raising `error` if the
        call broke)."""
        self._closed, self._error = True, error
        self._listeners.clear()
        for queue in self._queues:
            queue.put(END)

    def listen(self, listener: Callable[[T], None]) -> Callable[[], None]:
        """Calls `listener(update)` with each update until the feed closes; returns a function
        that stops it."""
        if not self._closed:
            self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def updates(self) -> AsyncIterator[T]:
        """Each update from now on until the feed closes (then raises its error, if any)."""
        queue = DropOldestQueue(self._maxlen)
        if self._closed:
            queue.put(END)
        else:
            self._queues.append(queue)
        return self._drain(queue)

    async def _drain(self, queue: DropOldestQueue) -> AsyncIterator[T]:
        try:
            while (update := await queue.get()) is not END:
                yield update
            if self._error is not None:
                raise self._error
        finally:
            if queue in self._queues:
                self._queues.remove(queue)
