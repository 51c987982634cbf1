"""A memory of per-resource comparisons, so an app compared again (its drift, the refresh
a sync starts with, the status after it) re-diffs only the resources whose target or live
object changed. A pair's result is a pure function of (app, key, target, live, the
normalizer); in the controller target manifests come from the render cache and live ones
from its store view (one shared copy per stored version), so identity says "the same
object". Entries hold the objects they were computed from, so an identity is never reused
while remembered. Callers must not change what they compare (they already must not: the
render cache and the view share those objects)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from meshpilot.gitops.diff.keys import Manifest, ResourceKey
from meshpilot.gitops.diff.normalize import ManifestNormalizer
from meshpilot.gitops.diff.result import ResourceResult

__all__ = ["PairMemo"]

_Key = tuple[str, ResourceKey, ManifestNormalizer]


class PairMemo:
    """One entry per (app, resource, normalization): a changed object replaces it."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._items: dict[_Key, tuple[Manifest | None, Manifest | None, ResourceResult]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def pair(
        self,
        app: str,
        key: ResourceKey,
        target: Manifest | None,
        live: Manifest | None,
        normalizer: ManifestNormalizer,
        compute: Callable[[], ResourceResult],
    ) -> ResourceResult:
        memo_key = (app, key, normalizer)
        with self._lock:
            hit = self._items.get(memo_key)
            found = hit is not None and hit[0] is target and hit[1] is live
            if found:
                self.hits += 1
            else:
                self.misses += 1
        if hit is not None and found:
            return hit[2]
        result = compute()
        with self._lock:
            if len(self._items) >= self.max_entries:
                self._items.clear()  # losing it costs a re-diff, never correctness
            self._items[memo_key] = (target, live, result)
        return result
