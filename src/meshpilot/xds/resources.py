"""Resources for one response: generated through GENERATORS, serialized once per push.

Proxies of one class get the very same messages from the generators' per-push cache, so
their serialized bytes (and, for Delta, their version hashes) are memoised per push by
message identity; the memo pins the message so its id stays unique for the push's lifetime.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from google.protobuf import any_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import WatchedResource
from meshpilot.xds.generate import generator

__all__ = ["Resource", "generate_resources", "new_nonce", "requested_names"]

_MEMO_KEY = "xds.serialized"


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    body: bytes
    version: str  # hash of the bytes (Delta resource version)

    def packed(self, type_url: str) -> any_pb2.Any:
        return any_pb2.Any(type_url=type_url, value=self.body)


def new_nonce() -> str:
    return uuid.uuid4().hex[:16]


def requested_names(watched: WatchedResource) -> Collection[str] | None:
    """What to generate: None for a wildcard subscription, else the subscribed names."""
    return None if watched.wildcard else watched.names


def resource_name(msg: Any) -> str:
    return str(getattr(msg, "name", "") or getattr(msg, "cluster_name", ""))


def generate_resources(
    push: PushContext, proxy: Proxy, type_url: str, names: Collection[str] | None
) -> list[Resource]:
    """The proxy's resources of one type (only `names` unless None), serialized."""
    messages = generator(type_url, proxy.type)(push, proxy, names)
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    out = []
    for msg in messages:
        entry = memo.get(id(msg))
        if entry is None or entry[0] is not msg:
            body = msg.SerializeToString(deterministic=True)
            digest = hashlib.blake2b(body, digest_size=8).hexdigest()
            entry = memo[id(msg)] = (msg, Resource(resource_name(msg), body, digest))
        out.append(entry[1])
    return out
