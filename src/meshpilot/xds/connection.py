"""Per-stream state: what one Envoy watches, and what it was sent, ACKed and NACKed.

A `Connection` is owned by its stream task (xds/server.py): requests and pushes for it are
handled there one at a time, so nothing here is locked. `WatchedResource` values are frozen;
the ACK/NACK rules (xds/protocol.py) return the next value instead of mutating one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.node import NodeInfo
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest

__all__ = [
    "SHORT_TYPE",
    "Connection",
    "PushEvent",
    "WatchedResource",
]

# Istio's short type names (pilot_xds_pushes{type=...}, syncz).
SHORT_TYPE = {
    TypeUrl.CLUSTER: "cds",
    TypeUrl.ENDPOINT: "eds",
    TypeUrl.LISTENER: "lds",
    TypeUrl.ROUTE: "rds",
    TypeUrl.SECRET: "sds",
}


@dataclass(frozen=True, slots=True)
class WatchedResource:
    type_url: str
    names: frozenset[str] = frozenset()
    # Subscribed to everything (LDS and CDS; Delta: "*" or no names on the first request).
    wildcard: bool = False
    nonce_sent: str = ""
    version_sent: str = ""
    nonce_acked: str = ""
    version_acked: str = ""
    nonce_nacked: str = ""
    last_error: str = ""
    # Answer the next request even if it looks like an ACK (EDS while clusters warm).
    always_respond: bool = False
    sent_at: float | None = None  # time.time() of the last response
    acked_at: float | None = None

    def sent(self, version: str, nonce: str) -> WatchedResource:
        return replace(self, version_sent=version, nonce_sent=nonce, sent_at=time.time())

    @property
    def status(self) -> str:
        """istioctl proxy-status wording: SYNCED, NOT SENT, STALE, or NACKED."""
        if not self.nonce_sent:
            return "NOT SENT"
        if self.last_error and self.nonce_nacked == self.nonce_sent:
            return "NACKED"
        return "SYNCED" if self.nonce_acked == self.nonce_sent else "STALE"


@dataclass(slots=True)
class PushEvent:
    """A push handed to the stream task; `done` resolves once it has been sent."""

    request: PushRequest
    done: asyncio.Future[None]


_ids = itertools.count(1)

# Proxies of one class subscribe to equal name sets (thousands of EDS names each): they share
# one frozenset, kept while any connection holds it.
_NAMES: weakref.WeakValueDictionary[frozenset[str], frozenset[str]] = weakref.WeakValueDictionary()


def _shared_names(names: frozenset[str]) -> frozenset[str]:
    if len(names) < 16:
        return names
    found = _NAMES.get(names)
    if found is None:
        _NAMES[names] = found = names
    return found


@dataclass(eq=False, slots=True)
class Connection:
    node: NodeInfo
    proxy: Proxy
    push: PushContext  # the last push context this proxy was sent (or connected with)
    delta: bool = False
    peer: str = ""
    id: str = ""
    connected_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    watched: dict[str, WatchedResource] = field(default_factory=dict)
    # Events for the stream task: requests (protobuf) and PushEvents; None ends the stream.
    events: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    # Delta only: per type, the version of every resource the client has (by name).
    known: dict[str, dict[str, str]] = field(default_factory=dict)
    # Delta only: per type and nonce, the names sent, forgotten again if NACKed.
    in_flight: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    # What Envoy will ask for next (type, names), generated ahead while it applies a response.
    dependents: list[tuple[str, frozenset[str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = f"{self.proxy.id}-{next(_ids)}"

    def watch(self, type_url: str) -> WatchedResource | None:
        return self.watched.get(type_url)

    def set_watch(self, type_url: str, value: WatchedResource | None) -> None:
        if value is None:
            self.watched.pop(type_url, None)
            self.known.pop(type_url, None)
            return
        shared = _shared_names(value.names)
        if shared is not value.names:
            value = replace(value, names=shared)
        self.watched[type_url] = value

    def mark_always_respond(self, type_urls: frozenset[str]) -> None:
        for type_url in type_urls:
            current = self.watched.get(type_url)
            if current is not None:
                self.watched[type_url] = replace(current, always_respond=True)

    def record_sent(self, type_url: str, version: str, nonce: str) -> None:
        current = self.watched.get(type_url) or WatchedResource(type_url)
        self.watched[type_url] = current.sent(version, nonce)
