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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.node import NodeInfo
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest
from meshpilot.xds.request_shape import (
    PARSE_ERRORS,
    Malformed,
    MalformedRequest,
    check_names,
    check_type_url,
)

__all__ = [
    "SHORT_TYPE",
    "Connection",
    "PushEvent",
    "Subscription",
    "WatchedResource",
    "parse_request",
    "request_names",
]

# Istio's short type names (pilot_xds_pushes{type=...}, syncz).
SHORT_TYPE = {
    TypeUrl.CLUSTER: "cds",
    TypeUrl.ENDPOINT: "eds",
    TypeUrl.LISTENER: "lds",
    TypeUrl.ROUTE: "rds",
    TypeUrl.SECRET: "sds",
    TypeUrl.VIRTUAL_HOST: "vhds",
    TypeUrl.EXTENSION_CONFIG: "ecds",
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

    # These two are written out field by field: they run twice per stream and push, and
    # dataclasses.replace costs about twice as much.
    def sent(self, version: str, nonce: str) -> WatchedResource:
        return WatchedResource(
            self.type_url, self.names, self.wildcard, nonce, version, self.nonce_acked,
            self.version_acked, self.nonce_nacked, self.last_error, self.always_respond,
            time.time(), self.acked_at,
        )  # fmt: skip

    def acked(self) -> WatchedResource:
        """The last response ACKed (its version: the one sent), the last error cleared."""
        return WatchedResource(
            self.type_url, self.names, self.wildcard, self.nonce_sent, self.version_sent,
            self.nonce_sent, self.version_sent, self.nonce_nacked, "", self.always_respond,
            self.sent_at, time.time(),
        )  # fmt: skip

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
    """A push handed to the stream task; `finish` (once, however often called) reports it
    sent. A plain callback, not a future: no loop callback per stream and push."""

    request: PushRequest
    on_done: Callable[[], None]
    finished: bool = False

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.on_done()


_ids = itertools.count(1)

# Proxies of one class subscribe to equal name sets (thousands of EDS names each): they share
# one frozenset, kept while any connection holds it.
_NAMES: weakref.WeakValueDictionary[frozenset[str], frozenset[str]] = weakref.WeakValueDictionary()


def _shared_names(names: frozenset[str]) -> frozenset[str]:
    if len(names) < _SHARED_FROM:
        return names
    found = _NAMES.get(names)
    if found is None:
        _NAMES[names] = found = names
    return found


_SHARED_FROM = 16
# The same name sets by the serialized request that named them (nonce and version left out).
_BY_REQUEST: weakref.WeakValueDictionary[bytes, frozenset[str]] = weakref.WeakValueDictionary()


def request_names(request: discovery_pb2.DiscoveryRequest) -> frozenset[str]:
    """The names a SotW request subscribes to, shared with every equal subscription.

    Envoy repeats its whole subscription in every ACK: for EDS, thousands of cluster names.
    Making Python strings and a set of them per ACK, for every proxy ACKing a push, is
    costly; a repeat is recognised by its serialized form instead, far cheaper, and
    yields the very set the connection already
    watches (so comparing them is an identity check)."""
    if len(request.resource_names) < _SHARED_FROM:
        return frozenset(request.resource_names)
    version, nonce = request.version_info, request.response_nonce
    request.version_info = request.response_nonce = ""
    try:
        key = request.SerializeToString(deterministic=True)
    finally:
        request.version_info, request.response_nonce = version, nonce
    found = _BY_REQUEST.get(key)
    if found is None:
        found = _BY_REQUEST[key] = _shared_names(frozenset(request.resource_names))
    return found


@dataclass(frozen=True, slots=True)
class Subscription:
    """A SotW request recognised from its bytes (`parse_request`): the request without its
    names, and the set of those."""

    request: discovery_pb2.DiscoveryRequest
    names: frozenset[str]


# Names by the bytes that carry them in a request (between its version and type URL).
_BY_BYTES: weakref.WeakValueDictionary[bytes, frozenset[str]] = weakref.WeakValueDictionary()
_FAST_FROM = 4096  # request size from which recognising it pays
_DR = discovery_pb2.DiscoveryRequest
_MARKERS = tuple(
    (bytes([_DR.DESCRIPTOR.fields_by_name["type_url"].number << 3 | 2, len(t)]) + t.encode(), t)
    for t in (TypeUrl.ENDPOINT, TypeUrl.ROUTE, TypeUrl.SECRET, TypeUrl.CLUSTER, TypeUrl.LISTENER)
)  # every type URL is shorter than 128 bytes: its length is one byte
# What an ACK holds (no node, error, locators...): a request with more is read in full.
_PLAIN_FIELDS = frozenset({"version_info", "resource_names", "type_url", "response_nonce"})
_VERSION_TAG = 0x0A  # field 1 (version_info), length-delimited
_NONCE_TAG = 0x2A  # field 5 (response_nonce), length-delimited


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(raw):
        byte = raw[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7
    return -1, i


def _split(raw: bytes) -> tuple[str, slice, str, str] | None:
    """(version, where the bytes in between are, type URL, nonce) of a request laid out as
    protobuf writes one (fields in number order): version, names, type URL, nonce; else
    None. The names stay in `raw` (no copy of 100+ KB per ACK)."""
    start, version = 0, b""
    if raw and raw[0] == _VERSION_TAG:
        n, i = _varint(raw, 1)
        if n < 0:
            return None
        start, version = i + n, raw[i : i + n]
    for marker, candidate in _MARKERS:
        pos = raw.rfind(marker, start)
        if pos >= 0:
            type_url = candidate
            break
    else:
        return None
    tail = pos + len(marker)
    nonce = b""
    if tail < len(raw):
        if raw[tail] != _NONCE_TAG:
            return None
        n, i = _varint(raw, tail + 1)
        if n < 0 or i + n != len(raw):
            return None
        nonce = raw[i:]
    return version.decode(), slice(start, pos), type_url, nonce.decode()


# One bytes object per subscription seen, by a sample of it: looked up with it, a repeat's
# key hashes at once (a bytes object keeps its hash) instead of hashing 100+ KB per ACK
# on the event loop; == is a memcmp.
_CANONICAL: dict[tuple[int, bytes, bytes], bytes] = {}


def _canonical(raw: bytes, names: slice, keep: bool = False) -> bytes | None:
    """The stored copy of `raw[names]` (compared in place, a memcmp), else None; with
    `keep`, a copy is stored first."""
    start, stop = names.start, names.stop
    sample = (stop - start, raw[start : start + 64], raw[max(start, stop - 64) : stop])
    found = _CANONICAL.get(sample)
    if found is not None and len(found) == stop - start and raw.startswith(found, start):
        return found
    if keep:
        if len(_CANONICAL) >= 1024:  # subscriptions churned: start over
            _CANONICAL.clear()
        _CANONICAL[sample] = found = raw[names]
        return found
    return None


def parse_request(raw: bytes) -> discovery_pb2.DiscoveryRequest | Subscription | Malformed:
    """gRPC request deserializer for SotW ADS; never raises: a request that is not one, or
    that the server cannot serve, is `Malformed` (xds/request_shape.py).

    An ACK repeats the whole subscription (for EDS, thousands of cluster names, which a
    parse and a set per ACK would turn into seconds of CPU per push to many proxies): the
    bytes that carry the names are looked up instead, and only the version, type URL and
    nonce are read. What is looked up was remembered from a full parse that
    checked the layout and the names; anything else is parsed."""
    try:
        return _parse_request(raw)
    except MalformedRequest as exc:
        return Malformed(str(exc))
    except PARSE_ERRORS as exc:
        return Malformed(f"not a DiscoveryRequest: {exc}")


def _parse_request(raw: bytes) -> discovery_pb2.DiscoveryRequest | Subscription:
    parts = _split(raw) if len(raw) >= _FAST_FROM else None
    if parts is not None:
        key = _canonical(raw, parts[1])  # (None when not seen: nothing hashed)
        names = _BY_BYTES.get(key) if key is not None else None
        if names is not None:
            version, _, type_url, nonce = parts
            request = _DR(version_info=version, type_url=type_url, response_nonce=nonce)
            return Subscription(request, names)
    request = _DR.FromString(raw)
    check_type_url(request.type_url)
    check_names(request.resource_names)  # (before they are remembered by their bytes)
    if parts is None or len(request.resource_names) < _SHARED_FROM:
        return request
    plain = {f.name for f, _ in request.ListFields()} <= _PLAIN_FIELDS
    fields = (request.version_info, request.type_url, request.response_nonce)
    if not plain or fields != (parts[0], parts[2], parts[3]):
        return request
    key = _canonical(raw, parts[1], keep=True)
    assert key is not None
    names = _BY_BYTES[key] = request_names(request)
    return Subscription(
        _DR(version_info=parts[0], type_url=parts[2], response_nonce=parts[3]), names
    )


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
    # Delta only: per type, the nonce and resources (xds/resources.py) of the last response
    # until it is ACKed or NACKed (then they are forgotten, so that they are sent again).
    in_flight: dict[str, tuple[str, Sequence[Any]]] = field(default_factory=dict)
    # What Envoy will ask for next (type, names), generated ahead while it applies a response.
    dependents: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    # Bytes of large responses sent and not yet answered by a request (see SendBudget).
    charged: int = 0
    # The stream task waits for its next event (xds/stream_loop.py): an ACK may be recorded
    # by the reader then, without waking it.
    idle: bool = False
    # Types whose generation failed for this stream, with why (xds/generation_errors.py):
    # not sent, retried with every push until one is.
    generation_errors: dict[str, str] = field(default_factory=dict)

    def hold(self, size: int) -> None:
        self.charged += size

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
        if self.generation_errors:
            self.generation_errors.pop(type_url, None)
        current = self.watched.get(type_url) or WatchedResource(type_url)
        self.watched[type_url] = current.sent(version, nonce)
