"""Speculation: the next push made ready while its change waits out the debounce.

A change is pushed once the debounce window (Istio's 100 ms) has passed with nothing more
coming; then the PushContext is built (~15 ms at 1000 services) and every stream works out
its resources (~45 us a stream at 1000 streams, the first of each proxy class much more).
None of that needs the wait: as soon as the debouncer holds a change and no push is going
out, the server builds the PushContext of the store as it is now, then generates every
connected proxy's resources into that push's caches, a slice of the event loop at a time
(a Delta stream's whole push, its responses included, when its state allows:
xds/prepared.py).

When the debounce lets the change go and the store is still the one the speculation was
built from (no change came meanwhile: the very same pending request), the push adopts it:
the PushContext a build would make at that moment, caches warm. Anything else drops it and
the push builds as it always did: a speculation never decides what is pushed, only how
early the work is done. A speculation starts once the pending burst has been quiet for a
wait that starts at zero and doubles with each speculation dropped (up to 100 ms, the
debounce window itself): endpoint churn every few milliseconds gets a handful of
speculations, not one per event. Each push starts the next burst's wait afresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from meshpilot.model.push_context import PushContext
from meshpilot.store.base import ConfigStore, StoreSnapshot
from meshpilot.xds.connection import Connection
from meshpilot.xds.debounce import Debouncer
from meshpilot.xds.delta import warm_delta_push
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.push_queue import PushQueue
from meshpilot.xds.push_request import PushRequest, classify_endpoint_push
from meshpilot.xds.sotw import warm_sotw_push
from meshpilot.xds.stream_loop import stream_proxy

__all__ = ["Built", "Speculation"]

log = logging.getLogger(__name__)

# The event loop is given back at least this often while proxies are warmed: requests and
# ACKs of the streams wait no longer than that.
SLICE_S = 0.002
MAX_DELAY_S = 0.1  # the longest wait before a speculation, after drops


@dataclass(frozen=True, slots=True)
class Built:
    """A PushContext built from `snapshot`, with `prev` as the push before it."""

    snapshot: StoreSnapshot
    prev: PushContext | None
    push: PushContext
    build_s: float  # seconds the build took


@dataclass(slots=True)
class _Ready:
    built: Built
    request: PushRequest  # the pending request it was made for (by identity)
    classified: PushRequest  # that request, classified against the two pushes


def _report_failure(task: asyncio.Task[None]) -> None:
    """A speculation that failed is dropped (the push builds as usual), but never silently."""
    if task.cancelled() or (exc := task.exception()) is None:
        return
    log.error("speculation failed, the next push builds without it: %s: %s",
              type(exc).__name__, exc)  # fmt: skip
    log.debug("traceback of the speculation", exc_info=exc)


def _classified(req: PushRequest, built: Built) -> PushRequest:
    return classify_endpoint_push(req, built.prev, built.push) if built.prev else req


class Speculation:
    def __init__(
        self,
        store: ConfigStore,
        debouncer: Debouncer,
        queue: PushQueue[Connection],
        connections: dict[str, Connection],
        current: Callable[[], PushContext | None],
        build: Callable[[StoreSnapshot, bool], Awaitable[Built]],
        metrics: Metrics,
    ) -> None:
        self._store, self._debouncer, self._queue = store, debouncer, queue
        self._connections = connections
        self._current = current  # the push being served
        self._build = build  # (snapshot, forced) -> Built
        self._counted = metrics.speculations
        self._task: asyncio.Task[None] | None = None
        self._building: tuple[PushRequest, asyncio.Future[Built]] | None = None
        self._ready: _Ready | None = None
        self._stop_warming = False
        self._again = False  # a change came while the task ran: it looks again
        self.delay = 0.0
        self.adopted = 0
        self.dropped = 0
        self.warmed = 0  # streams warmed

    def changed(self) -> None:
        """A request reached the debouncer: what is being made is stale; start anew."""
        self._stop_warming = self._again = True
        if self._task is not None and not self._task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # (a change applied off the loop: its push builds as before)
        self._task = loop.create_task(self._run())
        self._task.add_done_callback(_report_failure)  # the next change starts a new one

    def cancel(self) -> None:
        """Stop (the server stops): the task, and a build it has under way."""
        if self._task is not None:
            self._task.cancel()
        if self._building is not None:
            self._building[1].cancel()

    async def take(self, req: PushRequest) -> tuple[Built, PushRequest] | None:
        """For the push of `req`: the speculation made for it, and the request classified,
        when it is still right (the very request, the store unchanged, the same push
        before it); else None, and it is dropped. A build under way is waited for: it ends
        sooner than a new one would (and two builds never run at once)."""
        self._stop_warming = True
        ready, self._ready = self._ready, None
        self.delay = 0.0  # a push ends the burst: the next one starts afresh
        if self._building is not None:
            made_for, building = self._building
            try:
                built = await asyncio.shield(building)
            except Exception:  # (the push's own build reports it)
                built = None
            if built is not None and made_for is req:
                if ready is not None:
                    self._count_drop()  # made for an older request
                ready = _Ready(built, req, _classified(req, built))
        if ready is None:
            return None
        if (
            ready.request is req
            and ready.built.prev is self._current()
            and ready.built.snapshot.version == self._store.snapshot().version
        ):
            self.adopted += 1
            self._counted.inc("adopted")
            return ready.built, ready.classified
        self._count_drop()
        return None

    def _count_drop(self) -> None:
        self.dropped += 1
        self._counted.inc("dropped")

    def _drop(self) -> None:
        """Count a speculation dropped within a burst, and wait longer for the next."""
        self._count_drop()
        self.delay = min(max(self.delay * 2, SLICE_S), MAX_DELAY_S)

    async def _run(self) -> None:
        """Speculate once the pending burst has been quiet for `delay`; a change meanwhile
        starts the wait again (changes every few ms never get a speculation each)."""
        self._again = True
        while self._again:
            self._again = False
            wait = self.delay - self._debouncer.quiet()
            if wait > 0:
                await asyncio.sleep(wait)
                if self._again:
                    continue
            await self._speculate()

    async def _speculate(self) -> None:
        """Build and warm for the pending request, unless there is none, a push is going
        out (its fan-out comes first), or it has its speculation already."""
        req = self._debouncer.pending
        if req is None or not self._queue.idle:
            return
        if self._ready is not None and self._ready.request is req:
            return
        self._stop_warming = False
        building = asyncio.ensure_future(self._build(self._store.snapshot(), req.forced))
        self._building = (req, building)
        try:
            built = await building
        except Exception:
            log.debug("speculative build failed", exc_info=True)
            return  # (the push's own build reports it)
        finally:
            self._building = None
        prev = self._current()
        if self._ready is not None:
            self._ready = None
            self._drop()  # made for an older request
        if self._debouncer.pending is not req or built.prev is not prev:
            if self._debouncer.pending is not None:
                self._drop()  # a newer change came meanwhile
            return  # (or the push came, and took the build)
        self._ready = _Ready(built, req, _classified(req, built))
        await self._warm(self._ready.classified)

    async def _warm(self, req: PushRequest) -> None:
        """Generate each stream's resources of the coming push into its caches, giving the
        event loop back every SLICE_S; stops as soon as the push is due or a change comes."""
        started = time.perf_counter()
        prev = self._current()
        due = self._debouncer.due
        for conn in list(self._connections.values()):
            # Never past the push's due time: the push would wait for the next slice (the
            # first proxy of a class takes 15-40 ms without VHDS); what is left, its streams
            # do as they would have.
            if self._stop_warming or due():
                return
            if time.perf_counter() - started > SLICE_S:
                await asyncio.sleep(0)
                started = time.perf_counter()
                if self._stop_warming or not self._queue.idle:
                    return
            if conn.push is not prev:
                continue  # a stream not on the current push yet: its own push decides
            warm = warm_delta_push if conn.delta else warm_sotw_push
            try:
                warm(conn, req, stream_proxy(conn, req))
            except Exception:  # the push reports it, to the stream it fails for
                log.debug("warming %s failed", conn.id, exc_info=True)
                continue
            self.warmed += 1
