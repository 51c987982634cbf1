"""Debounce: a burst of config changes becomes one push (Istio's `debounce()`).

Requests are merged until `after` seconds pass with no new one, or `max_delay` seconds after
the first; then the merged request is pushed. Only one push runs at a time: changes that
arrive meanwhile are merged into the next one. A request can bring a shorter quiet window
of its own (whole store writes: nothing more of that change is coming); a burst waits for
the longest window among its requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from meshpilot.xds.push_request import PushRequest

__all__ = ["Debouncer"]

log = logging.getLogger(__name__)

PushFn = Callable[[PushRequest], Awaitable[None]]


class Debouncer:
    def __init__(
        self,
        push: PushFn,
        after: float,
        max_delay: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._push = push
        self.after = after
        self.max_delay = max_delay
        self._clock = clock
        self._pending: PushRequest | None = None
        self._first = 0.0  # when the pending burst started
        self._last = 0.0  # when its latest request arrived
        self._quiet = after  # the quiet window of the pending burst
        self._wake = asyncio.Event()
        self.events = 0  # requests received
        self.pushes = 0  # merged pushes started

    @property
    def pending(self) -> PushRequest | None:
        return self._pending

    def quiet(self) -> float:
        """Seconds since the latest request came."""
        return self._clock() - self._last

    def due(self) -> bool:
        """Is the pending burst due to be pushed (its push merely waits for a turn of the
        event loop)?"""
        if self._pending is None:
            return False
        return self._clock() >= min(self._last + self._quiet, self._first + self.max_delay)

    def enqueue(self, req: PushRequest, quiet: float | None = None) -> None:
        """Add a request; never blocks (called from change handlers). `quiet`: this
        request's own quiet window instead of `after`."""
        now = self._clock()
        window = self.after if quiet is None else quiet
        if self._pending is None:
            self._pending, self._first, self._quiet = req, now, window
        else:
            self._pending = self._pending.merge(req)
            self._quiet = max(self._quiet, window)
        self._last = now
        self.events += 1
        self._wake.set()

    async def run(self) -> None:
        """Push merged requests until cancelled."""
        while True:
            await self._wake.wait()
            if self._pending is None:
                self._wake.clear()
                continue
            now = self._clock()
            quiet, waited = now - self._last, now - self._first
            if quiet < self._quiet and waited < self.max_delay:
                await asyncio.sleep(min(self._quiet - quiet, self.max_delay - waited))
                continue
            req, self._pending = self._pending, None
            self._wake.clear()
            self.pushes += 1
            try:
                await self._push(req)
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed push must not stop later ones
                log.exception("push failed")
