"""`TaskSet`: the tasks something started, kept until they finish and cancelled on exit.

asyncio holds only a weak reference to a task, so a task nobody keeps can vanish mid-run, and
one that fails nobody hears of. A `TaskSet` keeps each task until it is done, logs a task that
failed (on the `voxgate` logger, with its traceback), and `aclose()` cancels those still
running and waits for them. The SDK keeps its own background tasks in one; a backend keeps the
tasks it starts per call in one too:

    async with voxgate.Worker(...) as worker, voxgate.TaskSet() as tasks:
        async for call in worker.calls():
            tasks.create_task(serve(call))
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

log = logging.getLogger("voxgate.tasks")

T = TypeVar("T")


class TaskSet:
    """Tasks kept until done and cancelled by `aclose()` (see the module doc)."""

    def __init__(self, name: str = "tasks") -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def create_task(self, coro: Coroutine[Any, Any, T], *,
                    name: str | None = None) -> asyncio.Task[T]:
        """Starts `coro` as a task of this set."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(set(self._tasks))

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("%s: task %s failed: %r", self.name, task.get_name(), exc,
                      exc_info=(type(exc), exc, exc.__traceback__))

    async def aclose(self) -> None:
        """Cancels every task still running and waits until all have finished (the set stays
        usable). Their results and errors are not raised here; a failure was logged. A task of
        the set that calls this is left running (it is the one waiting)."""
        current = asyncio.current_task()
        while tasks := [t for t in self._tasks if t is not current and not t.done()]:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TaskSet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
