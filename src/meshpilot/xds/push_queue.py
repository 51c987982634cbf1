"""PushQueue: connections waiting for a push, each at most once (Istio's pushqueue.go).

Enqueueing a connection that is already waiting merges the requests; enqueueing one that is
being pushed to keeps the merged request aside and queues it again when that push is marked
done, so a connection never has two pushes in flight and never misses a change.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from meshpilot.xds.push_request import PushRequest

__all__ = ["PushQueue"]

K = TypeVar("K", bound=Hashable)


class PushQueue(Generic[K]):
    def __init__(self) -> None:
        self._order: deque[K] = deque()
        self._pending: dict[K, PushRequest] = {}
        # Dequeued and not done yet; a request here was enqueued meanwhile.
        self._processing: dict[K, PushRequest | None] = {}
        self._ready = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._order)

    def enqueue(self, key: K, req: PushRequest) -> None:
        if self._closed:
            return
        if key in self._processing:
            waiting = self._processing[key]
            self._processing[key] = req if waiting is None else waiting.merge(req)
            return
        if key in self._pending:
            self._pending[key] = self._pending[key].merge(req)
            return
        self._pending[key] = req
        self._order.append(key)
        self._ready.set()

    async def dequeue(self) -> tuple[K, PushRequest] | None:
        """The next connection and its merged request; None once closed and drained."""
        while not self._order:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        key = self._order.popleft()
        req = self._pending.pop(key)
        self._processing[key] = None
        return key, req

    def mark_done(self, key: K) -> None:
        waiting = self._processing.pop(key, None)
        if waiting is not None:
            self.enqueue(key, waiting)

    def remove(self, key: K) -> None:
        """Forget a connection that went away."""
        self._pending.pop(key, None)
        self._processing.pop(key, None)
        if key in self._order:
            self._order.remove(key)

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being pushed."""
        return not self._order and not self._processing

    def pending(self, key: K) -> PushRequest | None:
        return self._pending.get(key)

    def close(self) -> None:
        self._closed = True
        self._ready.set()
