"""The controller keeps its long-lived objects out of full collections (frozen), collects
frozen cyclic garbage now and then when no urgent work runs, and unfreezes on stop."""

from __future__ import annotations

import asyncio
import gc
import weakref

from meshpilot.gitops.controller.heap import keep_heap_settled


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_freezes_while_running_and_unfreezes_on_stop() -> None:
    async def scenario() -> None:
        task = asyncio.create_task(keep_heap_settled(lambda: False, interval=0.01))
        await asyncio.sleep(0.05)
        assert gc.get_freeze_count() > 0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert gc.get_freeze_count() == 0

    asyncio.run(scenario())


def test_frozen_cycles_are_collected_only_when_no_urgent_work_runs() -> None:
    urgent = [True]

    async def scenario() -> None:
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        task = asyncio.create_task(keep_heap_settled(lambda: urgent[0], 0.01, full_every=3))
        await asyncio.sleep(0.03)  # frozen with the rest of the heap
        del garbage
        await asyncio.sleep(0.1)
        gc.collect()  # a collection does not see frozen objects
        assert gone() is not None
        urgent[0] = False  # the next full round collects everything first
        await asyncio.sleep(0.1)
        assert gone() is None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
