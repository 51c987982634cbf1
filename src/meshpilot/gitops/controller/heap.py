"""The controller's heap: long-lived objects kept out of the full collections.

The store's typed objects, the render cache and the comparison memo are hundreds of
thousands of objects that live for minutes. Every full collection walks all of them with
everything stopped, and a drift that meets one is detected that much later. Freezing what is alive
(`gc.freeze`, a list splice) every second leaves the collector the young objects only.
Frozen objects are still freed by reference counting; only cyclic garbage among them
waits, so every `full_every` rounds one full collection of everything runs, when no
urgent work (drift, webhook, request) is running.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

__all__ = ["keep_heap_settled"]


async def keep_heap_settled(
    urgent_running: Callable[[], bool], interval: float = 1.0, full_every: int = 300
) -> None:
    """Until cancelled: freeze the heap every `interval` seconds; a full collection first
    every `full_every` rounds (about five minutes by default) unless urgent work runs.
    Unfrozen again when cancelled."""
    rounds = 0
    try:
        while True:
            await asyncio.sleep(interval)
            rounds += 1
            if rounds >= full_every and not urgent_running():
                rounds = 0
                gc.unfreeze()
                gc.collect()
            gc.freeze()
    finally:
        gc.unfreeze()  # the process lives on (tests, a CLI): its garbage is collected again
