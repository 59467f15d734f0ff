"""TaskSet: tasks kept until done, failures logged, all cancelled on exit."""

from __future__ import annotations

import asyncio
import logging

import voxgate


async def test_tasks_are_kept_until_done_and_cancelled_on_exit():
    finished = []

    async def quick() -> None:
        finished.append("quick")

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            finished.append("cancelled")

    async with voxgate.TaskSet() as tasks:
        tasks.create_task(quick())
        long = tasks.create_task(forever(), name="forever")
        await asyncio.sleep(0.01)
        assert len(tasks) == 1 and list(tasks) == [long]
    assert long.cancelled() and finished == ["quick", "cancelled"] and len(tasks) == 0


async def test_a_failed_task_is_logged_not_lost(caplog):
    async def fails() -> None:
        raise RuntimeError("boom")

    tasks = voxgate.TaskSet("agent calls")
    with caplog.at_level(logging.ERROR, logger="voxgate.tasks"):
        tasks.create_task(fails(), name="call-1")
        await asyncio.sleep(0.01)
    assert len(tasks) == 0
    (record,) = caplog.records
    assert "agent calls: task call-1 failed" in record.getMessage() and record.exc_info


async def test_a_task_of_the_set_may_close_it_and_the_set_stays_usable():
    tasks = voxgate.TaskSet()
    other = tasks.create_task(asyncio.Event().wait())

    async def closer() -> str:
        await tasks.aclose()
        return "closed the others"

    me = tasks.create_task(closer())
    assert await asyncio.wait_for(me, 1.0) == "closed the others"
    assert other.cancelled()
    again = tasks.create_task(asyncio.sleep(0, result=1))
    assert await again == 1
