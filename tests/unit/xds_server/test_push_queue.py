"""PushQueue: one entry per connection, merged; re-queued after a push that overlapped."""

from __future__ import annotations

import asyncio

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.xds.push_queue import PushQueue
from meshpilot.xds.push_request import PushRequest, request_for_change


def change(name: str, kind: Kind = Kind.VIRTUAL_SERVICE) -> PushRequest:
    return request_for_change(frozenset({ConfigKey(kind, "default", name)}))


def names(req: PushRequest) -> set[str]:
    return {k.name for k in req.configs_updated}


def test_enqueue_merges_a_waiting_connection() -> None:
    async def scenario() -> None:
        queue: PushQueue[str] = PushQueue()
        queue.enqueue("a", change("x", Kind.POD))
        queue.enqueue("b", change("y"))
        queue.enqueue("a", change("z"))
        assert len(queue) == 2
        key, req = await queue.dequeue()  # type: ignore[misc]
        assert key == "a" and names(req) == {"x", "z"} and req.full
        key, req = await queue.dequeue()  # type: ignore[misc]
        assert key == "b" and names(req) == {"y"}

    asyncio.run(scenario())


def test_a_push_during_processing_is_queued_again_when_done() -> None:
    async def scenario() -> None:
        queue: PushQueue[str] = PushQueue()
        queue.enqueue("a", change("x"))
        key, _ = await queue.dequeue()  # type: ignore[misc]
        queue.enqueue("a", change("y"))
        queue.enqueue("a", change("z"))
        assert len(queue) == 0, "never two pushes in flight for one connection"
        queue.mark_done(key)
        key, req = await queue.dequeue()  # type: ignore[misc]
        assert key == "a" and names(req) == {"y", "z"}
        queue.mark_done("a")
        assert len(queue) == 0

    asyncio.run(scenario())


def test_dequeue_waits_for_work_and_close_ends_it() -> None:
    async def scenario() -> None:
        queue: PushQueue[str] = PushQueue()
        waiter = asyncio.create_task(queue.dequeue())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        queue.enqueue("a", change("x"))
        assert (await waiter)[0] == "a"  # type: ignore[index]
        closing = asyncio.create_task(queue.dequeue())
        await asyncio.sleep(0.01)
        queue.close()
        assert await closing is None
        queue.enqueue("b", change("y"))
        assert len(queue) == 0

    asyncio.run(scenario())


def test_removed_connections_are_forgotten() -> None:
    async def scenario() -> None:
        queue: PushQueue[str] = PushQueue()
        queue.enqueue("a", change("x"))
        queue.enqueue("b", change("y"))
        queue.remove("a")
        key, _ = await queue.dequeue()  # type: ignore[misc]
        assert key == "b" and queue.pending("a") is None

    asyncio.run(scenario())
