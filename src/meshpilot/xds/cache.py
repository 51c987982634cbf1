"""ResourceCache: resources that many proxies share, built once per push.

Proxies of one class (same namespace and Sidecar resource, same DestinationRules selecting
them) see the same outbound clusters, endpoints, listeners and routes; the generators key
those parts by what decides them and build them once. Entries keep the protobuf messages
and, on first use, their serialized bytes, so ADS can send the same bytes to every proxy.

The cache lives for one PushContext: a new push starts empty, so nothing stale survives a
config change. (Reuse across pushes, with invalidation by dependency, belongs to the ADS
server's push pipeline.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import message

from meshpilot.model.push_context import PushContext

__all__ = ["CachedResources", "ResourceCache", "cache_for"]

_MEMO_KEY = "xds.ResourceCache"


@dataclass(slots=True)
class CachedResources:
    messages: tuple[message.Message, ...]
    _serialized: tuple[bytes, ...] | None = field(default=None)

    def serialized(self) -> tuple[bytes, ...]:
        if self._serialized is None:
            self._serialized = tuple(m.SerializeToString() for m in self.messages)
        return self._serialized


@dataclass(slots=True)
class ResourceCache:
    entries: dict[Hashable, CachedResources] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    # Rebuild on every hit and fail on any difference (Istio's assertUnchanged): tests only.
    assert_unchanged: bool = False

    def get_or_build(self, key: Hashable, build: Callable[[], Sequence[Any]]) -> CachedResources:
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
            entry = CachedResources(tuple(build()))
            self.entries[key] = entry
        else:
            self.hits += 1
            if self.assert_unchanged:
                rebuilt = tuple(build())
                if rebuilt != entry.messages:
                    raise AssertionError(f"cache entry {key!r} differs from a fresh build")
        return entry


def cache_for(push: PushContext) -> ResourceCache:
    cache = push.memo.get(_MEMO_KEY)
    if cache is None:
        cache = ResourceCache()
        push.memo[_MEMO_KEY] = cache
    assert isinstance(cache, ResourceCache)
    return cache
