"""The controller's work queue: each Application at most once in the queue and once in
progress (a request for an app being reconciled runs it again afterwards), urgent work
(drift, webhooks, CLI requests) ahead of periodic resyncs, and delayed requeues (self-heal
waiting for its timeout). While urgent work runs, no other work starts (for up to
`RESYNC_HOLD` seconds): a webhook's sync or a drift shares two cores and one interpreter
with it (other workers' store writes would make a drift's own write wait for the
interpreter), and after a push every app's resync has a new commit to record."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import IntEnum

from meshpilot.config.keys import ConfigKey

__all__ = ["RESYNC_HOLD", "Level", "WorkItem", "WorkQueue"]

RESYNC_HOLD = 0.5  # the longest other work waits for running urgent work


class Level(IntEnum):
    """What a refresh compares against (Argo CD's CompareWith levels)."""

    RECENT = 1  # the revision already resolved: live state changed (drift)
    LATEST = 2  # resolve the branch again: resync due, webhook, app spec changed


@dataclass(slots=True)
class WorkItem:
    key: ConfigKey
    level: Level
    reason: str
    queued_at: float  # monotonic; drift latency is measured from the store's event
    urgent: bool = False  # taken from the urgent queue (set by `get`)


class WorkQueue:
    def __init__(self) -> None:
        self._urgent: deque[ConfigKey] = deque()
        self._normal: deque[ConfigKey] = deque()
        self._items: dict[ConfigKey, WorkItem] = {}
        self._active: set[ConfigKey] = set()
        self._active_urgent: set[ConfigKey] = set()
        self._urgent_since = 0.0  # when urgent work began running (none was before)
        self._again: dict[ConfigKey, WorkItem] = {}
        self._timers: dict[ConfigKey, asyncio.TimerHandle] = {}
        self._ready = asyncio.Event()
        self._urgent_ready = asyncio.Event()
        # Set while no urgent work is queued or running: other work already running waits
        # for it at its pause points (`wait_calm`, from worker threads), so a webhook's or a
        # drift's reconcile does not share the interpreter and the store's lock with a
        # resync pass's, which after a push rewrites every app's status.
        self._calm = threading.Event()
        self._calm.set()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: ConfigKey, level: Level, reason: str, *, urgent: bool = True) -> None:
        self._add(key, level, reason, urgent)
        self._update_calm()

    def _add(self, key: ConfigKey, level: Level, reason: str, urgent: bool) -> None:
        item = WorkItem(key, level, reason, time.monotonic())
        if key in self._active:
            prev = self._again.get(key)
            self._again[key] = _merge(prev, item)
            return
        prev = self._items.get(key)
        if prev is not None:
            promoted = urgent and key in self._normal
            self._items[key] = _merge(prev, item, promoted)
            if promoted:
                self._normal.remove(key)
                self._urgent.append(key)
                self._urgent_ready.set()
            return
        self._items[key] = item
        (self._urgent if urgent else self._normal).append(key)
        self._ready.set()
        if urgent:
            self._urgent_ready.set()

    def add_after(self, delay: float, key: ConfigKey, level: Level, reason: str) -> None:
        """Queue `key` in `delay` seconds (an earlier pending timer wins)."""
        existing = self._timers.get(key)
        loop = asyncio.get_running_loop()
        if existing is not None and existing.when() <= loop.time() + delay:
            return
        if existing is not None:
            existing.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key, level, reason)

        self._timers[key] = loop.call_later(max(delay, 0.0), fire)

    async def get(self, *, urgent_only: bool = False) -> WorkItem:
        """The next item, urgent first; `urgent_only`: wait for an urgent one (a lane kept
        free of resyncs, so drift and webhooks never wait behind a slow one). Other work
        waits while urgent work runs, at most RESYNC_HOLD after it was queued or after the
        urgent work began, whichever is later."""
        while True:
            if self._urgent:
                key = self._urgent.popleft()
                if not self._active_urgent:
                    self._urgent_since = time.monotonic()
                self._active_urgent.add(key)
                break
            hold = 0.0 if urgent_only or not self._normal else self._hold()
            if self._normal and not urgent_only and hold <= 0:
                key = self._normal.popleft()
                break
            ready = self._urgent_ready if urgent_only else self._ready
            ready.clear()
            if hold > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(hold):
                        await ready.wait()
            else:
                await ready.wait()
        item = self._items.pop(key)
        item.urgent = key in self._active_urgent
        self._active.add(key)
        return item

    def urgent_running(self) -> bool:
        return bool(self._active_urgent or self._urgent)

    def wait_calm(self, limit: float = RESYNC_HOLD) -> None:
        """Block (a worker thread) while urgent work is queued or running, at most `limit`
        seconds. Called by other work between its steps, holding no lock."""
        self._calm.wait(limit)

    def _update_calm(self) -> None:
        if self.urgent_running():
            self._calm.clear()
        else:
            self._calm.set()

    def _hold(self) -> float:
        """How much longer the next other item waits for running urgent work (0: none)."""
        if not self._active_urgent:
            return 0.0
        since = max(self._items[self._normal[0]].queued_at, self._urgent_since)
        return since + RESYNC_HOLD - time.monotonic()

    def done(self, key: ConfigKey) -> None:
        self._active.discard(key)
        if key in self._active_urgent:
            self._active_urgent.discard(key)
            if not self._active_urgent:
                self._ready.set()  # held resyncs may start
        again = self._again.pop(key, None)
        if again is not None:
            self._add(again.key, again.level, again.reason, True)
        self._update_calm()

    def forget(self, key: ConfigKey) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._calm.set()  # nothing is held back by a controller that stops


def _merge(prev: WorkItem | None, new: WorkItem, promoted: bool = False) -> WorkItem:
    """The stronger level; the earliest queue time (latency counts from the first cause);
    the urgent cause's reason when it made queued other work urgent (a drift merged into a
    queued health follow-up reports first, as a drift does, instead of waiting for the
    analysis of the whole store)."""
    if prev is None:
        return new
    level = max(prev.level, new.level)
    reason = new.reason if promoted else prev.reason
    return WorkItem(new.key, level, reason, min(prev.queued_at, new.queued_at))
