"""Manifest cache keyed by (repository, commit, render parameters): an unchanged commit
with unchanged parameters renders once. In memory only (manifests may hold decrypted
Secrets), bounded LRU, thread-safe. Losing it costs a re-render, never correctness."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["CacheKey", "ManifestCache"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CacheKey:
    repo: str  # normalised URL
    commit: str
    path: str
    params: str  # RenderRequest.fingerprint()


class ManifestCache(Generic[T]):
    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[CacheKey, T] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> T | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: CacheKey, value: T) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
