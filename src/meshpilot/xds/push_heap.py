"""What the pushes do to the heap, and when: collection paused while an EDS-only push goes
out, the pushes before held until every stream has moved on, the heap settled after.

A PushContext and what it made (its caches, the responses its streams share, the speculation's
work) are hundreds of thousands of objects, freed by reference counting once the last stream
leaves it. That last stream is in the middle of the next push's fan-out: freeing the sync's
push there would hold that stream's answer up for as long as the freeing takes. So the
server keeps each replaced push (`on_push`) and lets it go with the heap's
settle, a second after the next push has gone out, once every stream is on the new one
(`release`). Pushes that keep coming (no idle moment for a settle) keep at most
MAX_RETIRED: the oldest is let go as the next push starts, before it is queued.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable

from meshpilot.heap import FrozenSet
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import Connection

__all__ = ["MAX_RETIRED", "PushHeap"]

MAX_RETIRED = 2  # replaced pushes held at most (each may be hundreds of MB)


class PushHeap:
    def __init__(self) -> None:
        self.frozen = FrozenSet()  # meshpilot/heap.py: settled after each push
        self.retired: list[PushContext] = []  # replaced pushes, held until `release`
        self._gc_paused = False

    def on_push(self, replaced: PushContext | None, full: bool, serving: bool) -> None:
        """A new push is about to go out (`replaced`: the one before it)."""
        if replaced is not None:
            self.retired.append(replaced)
            del self.retired[:-MAX_RETIRED]
        if full or not serving:
            self.resume_gc()  # (a full push allocates for seconds: collections go on)
        elif gc.isenabled():
            # A few objects per stream, freed by reference counting: no young collections
            # walking them while the push goes out, where they would delay the last
            # streams. Back on once the queue is idle.
            gc.disable()
            self._gc_paused = True

    def resume_gc(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            gc.enable()

    def release(self, current: PushContext, connections: Iterable[Connection]) -> None:
        """Let the replaced pushes go once every stream has `current` (while a stream is
        still on an older one, the last to leave it would free it mid-fan-out)."""
        if all(conn.push is current for conn in connections):
            self.retired.clear()

    def settle(self, collect: bool, streams: int) -> None:
        self.frozen.settle(collect, streams)
