"""The bench's out-of-band writer: another process applying objects to the store.

A user's `apply` (or an operator) writes from its own process. Run in the bench's own
process, the writer's handle also read back, on its first apply after the initial sync,
every Application status the controller wrote meanwhile (thousands of files at 1000 apps),
holding the interpreter the controller needs to notice the drift being timed.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from meshpilot.config.yaml_source import RawDocument

__all__ = ["StoreWriter"]

_store: Any = None


def _open(root: str) -> None:
    global _store
    from meshpilot.gitops.model import register_gitops_kinds
    from meshpilot.store.directory import DirectoryStore

    register_gitops_kinds()
    _store = DirectoryStore(Path(root))


def _apply(documents: list[RawDocument]) -> None:
    _store.apply(documents)


class StoreWriter:
    """`apply` runs in a separate process holding its own DirectoryStore handle."""

    def __init__(self, root: Path) -> None:
        context = multiprocessing.get_context("spawn")  # the bench process has threads
        self._pool = ProcessPoolExecutor(1, context, initializer=_open, initargs=(str(root),))

    async def apply(self, documents: list[RawDocument]) -> None:
        await asyncio.wrap_future(self._pool.submit(_apply, documents))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
