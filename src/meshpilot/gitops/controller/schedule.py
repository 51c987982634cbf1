"""When each app's next resync is due: a heap of (due time, app), so taking the due apps
costs a few heap operations rather than a walk over every app on every wake."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from meshpilot.config.keys import ConfigKey

__all__ = ["DueHeap"]


class DueHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, ConfigKey]] = []

    def push(self, due: float, key: ConfigKey) -> None:
        heapq.heappush(self._heap, (due, key))

    def take(
        self, now: float, room: int, current: Callable[[ConfigKey], float | None]
    ) -> list[tuple[float, ConfigKey]]:
        """Up to `room` entries due by `now`, earliest first. `current(key)` is the app's
        due time now (None: gone); entries that no longer match it are dropped."""
        taken: list[tuple[float, ConfigKey]] = []
        while self._heap:
            due, key = self._heap[0]
            if current(key) != due:
                heapq.heappop(self._heap)  # stale: reconciled again since, or removed
                continue
            if due > now or len(taken) >= room:
                break
            taken.append(heapq.heappop(self._heap))
        return taken

    def head(self) -> float | None:
        """The earliest due time (after a `take`, a live entry's)."""
        return self._heap[0][0] if self._heap else None
