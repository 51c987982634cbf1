"""Resources for one response: generated through GENERATORS, serialized once per push.

Proxies of one class get the very same messages from the generators' per-push cache, so
their serialized bytes (and, for Delta, their version hashes) are memoised per push by
message identity; the memo pins the message so its id stays unique for the push's lifetime.

A SotW response is assembled on the wire (`sotw_response`): each resource keeps the bytes
that frame it as a packed `Any` in `DiscoveryResponse.resources`, so a response to one more
proxy is one join of shared bytes, never a protobuf built and serialized per proxy. So is a
Delta response (`delta_response`): the same `Any` framing serves as the `resource` field of
a delta `Resource` entry, whose version and name are framed once per push and resource.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.inject.policy import injection_override
from meshpilot.model.proxy import Proxy, ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import WatchedResource
from meshpilot.xds.generate import generator
from meshpilot.xds.generate.references import cluster_references
from meshpilot.xds.generate.routes.vhds import ClassVirtualHosts
from meshpilot.xds.generation_errors import GenerationError
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.references import rds_names
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "ALL_NAMES",
    "CONTROL_PLANE",
    "Resource",
    "SharedResources",
    "delta_response",
    "generate_resources",
    "load_generators",
    "new_nonce",
    "prebuild_known",
    "prewarm",
    "prewarm_step",
    "requested_names",
    "sotw_response",
]

CONTROL_PLANE = "meshpilot"

log = logging.getLogger(__name__)

_MEMO_KEY = "xds.serialized"
_KEPT_KEY = "xds.resources.kept"  # VHDS resources in the lasting memo, by message


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    body: bytes
    version: str  # hash of the bytes (Delta resource version)
    # Wire prefix of this resource as an entry of DiscoveryResponse.resources: the field's
    # tag and length, then the Any's type_url and the tag and length of its value.
    head: bytes = b""

    def packed(self, type_url: str) -> any_pb2.Any:
        return any_pb2.Any(type_url=type_url, value=self.body)


class SharedResources(list[Resource]):
    """Resources that every stream of a proxy class gets as this very list during a push
    (VHDS virtual hosts): never changed once made, so a Delta step can be shared by the
    list's identity instead of the identities of its ~2000 items (xds/delta.py)."""

    __slots__ = ()


_DR = discovery_pb2.DiscoveryResponse.DESCRIPTOR
_VERSION = field_number(_DR, "version_info")
_RESOURCES = field_number(_DR, "resources")
_TYPE_URL = field_number(_DR, "type_url")
_NONCE = field_number(_DR, "nonce")
_CONTROL_PLANE = field_number(_DR, "control_plane")
_ANY_TYPE_URL = field_number(any_pb2.Any.DESCRIPTOR, "type_url")
_ANY_VALUE = field_number(any_pb2.Any.DESCRIPTOR, "value")
_IDENTIFIER = length_delimited(1, CONTROL_PLANE.encode())  # ControlPlane.identifier


def _head(type_url: str, body: bytes) -> bytes:
    type_field = length_delimited(_ANY_TYPE_URL, type_url.encode())
    value_head = tag(_ANY_VALUE) + varint(len(body)) if body else b""
    any_len = len(type_field) + len(value_head) + len(body)
    return tag(_RESOURCES) + varint(any_len) + type_field + value_head


def sotw_response(version: str, type_url: str, nonce: str, resources: list[Resource]) -> bytes:
    """A serialized DiscoveryResponse, the same bytes protobuf would produce."""
    parts = [length_delimited(_VERSION, version.encode())] if version else []
    for r in resources:
        parts.append(r.head)
        parts.append(r.body)
    parts.append(length_delimited(_TYPE_URL, type_url.encode()))
    parts.append(length_delimited(_NONCE, nonce.encode()))
    parts.append(length_delimited(_CONTROL_PLANE, _IDENTIFIER))
    return b"".join(parts)


_DDR = discovery_pb2.DeltaDiscoveryResponse.DESCRIPTOR
_D_VERSION = field_number(_DDR, "system_version_info")
_D_RESOURCES = field_number(_DDR, "resources")
_D_TYPE_URL = field_number(_DDR, "type_url")
_D_NONCE = field_number(_DDR, "nonce")
_D_REMOVED = field_number(_DDR, "removed_resources")
_D_CONTROL_PLANE = field_number(_DDR, "control_plane")
_RES = discovery_pb2.Resource.DESCRIPTOR
_R_VERSION = field_number(_RES, "version")
_R_NAME = field_number(_RES, "name")
# `Resource.head` frames an Any as field 2 of DiscoveryResponse; Resource.resource is field 2
# of a delta Resource too, so the same bytes frame it there.
assert field_number(_RES, "resource") == _RESOURCES
_ENTRIES = "xds.delta_entries"
_DELTA_SHARED = "xds.delta_responses"


def _new_entry(memo: dict[int, Any], resource: Resource) -> tuple[Resource, bytes, bytes]:
    """The framing of `resource` as an entry of DeltaDiscoveryResponse.resources, around its
    body: (tag, length, version, Any head) and (name); memoised per push, by identity."""
    version = length_delimited(_R_VERSION, resource.version.encode())
    name = length_delimited(_R_NAME, resource.name.encode())
    size = len(version) + len(resource.head) + len(resource.body) + len(name)
    head = tag(_D_RESOURCES) + varint(size) + version + resource.head
    entry = memo[id(resource)] = (resource, head, name)
    return entry


def _delta_parts(
    push: PushContext, type_url: str, changed: Sequence[Resource], removed: Sequence[str]
) -> tuple[list[bytes], list[bytes]]:
    """What comes before the nonce (version, resources, type URL) and after it (removed
    names, control plane): the fields in number order, as protobuf writes them. (A CDS
    answer to one more proxy walks 4000 resources: the memo is read inline.)"""
    head = [length_delimited(_D_VERSION, push.version.encode())] if push.version else []
    memo = push.memo.setdefault(_ENTRIES, {})
    assert isinstance(memo, dict)
    get = memo.get
    for r in changed:
        entry = get(id(r))
        if entry is None or entry[0] is not r:
            entry = _new_entry(memo, r)
        head += (entry[1], r.body, entry[2])
    head.append(length_delimited(_D_TYPE_URL, type_url.encode()))
    tail = [length_delimited(_D_REMOVED, name.encode()) for name in removed]
    tail.append(length_delimited(_D_CONTROL_PLANE, _IDENTIFIER))
    return head, tail


# From this size on, a response shared by the streams of a class is shared whole, nonce
# included (as SotW's are): a thousand 2 MB route configs are one bytes object, not a copy
# per stream. Smaller ones get a nonce of their own per stream.
SHARED_WHOLE = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Shared:
    ids: tuple[int, ...]
    head: bytes  # the fields before the nonce
    tail: bytes  # and after it
    nonce: str = ""  # large responses: their nonce, and the whole response
    whole: bytes = b""


def delta_response(
    push: PushContext,
    type_url: str,
    changed: Sequence[Resource],
    removed: Sequence[str],
    last_nonce: str,
) -> tuple[str, bytes]:
    """A nonce and a serialized DeltaDiscoveryResponse, the same bytes protobuf would
    produce. Streams of one proxy class in the same state are sent the same resources and
    removals (an endpoint push: the same assignment to a thousand streams): from the second
    such response on, the bytes around the nonce are shared and a response is one join of
    three parts, never a message built and serialized per stream; a large one is shared
    whole. A nonce is unique within its stream: a stream whose last nonce of the type is the
    shared one (`last_nonce`) gets a new one. The first of a kind is only counted, so
    responses unique to a stream (its inbound clusters) are never kept."""
    memo = push.memo.setdefault(_DELTA_SHARED, {})
    assert isinstance(memo, dict)
    ids = tuple(map(id, changed))
    key = (type_url, hash(ids), tuple(removed))
    found = memo.get(key)
    if found is None or found.ids != ids:
        head, tail = _delta_parts(push, type_url, changed, removed)
        if key not in memo or found is not None:  # the first of a kind, or a hash clash
            memo.setdefault(key, None)
            nonce = new_nonce()
            return nonce, b"".join([*head, _nonce_field(nonce), *tail])
        found = memo[key] = _shared(b"".join(head), b"".join(tail), ids)
    if found.whole and found.nonce != last_nonce:
        return found.nonce, found.whole
    nonce = new_nonce()
    return nonce, b"".join((found.head, _nonce_field(nonce), found.tail))


def _shared(head: bytes, tail: bytes, ids: tuple[int, ...]) -> _Shared:
    if len(head) + len(tail) < SHARED_WHOLE:
        return _Shared(ids, head, tail)
    nonce = new_nonce()
    return _Shared(ids, head, tail, nonce, b"".join((head, _nonce_field(nonce), tail)))


def _nonce_field(nonce: str) -> bytes:
    return length_delimited(_D_NONCE, nonce.encode())


# Names meaning "every resource of the type" in a dependents entry (Delta's wildcard name).
ALL_NAMES = frozenset({"*"})


def new_nonce() -> str:
    """16 random hex digits (cheaper than a uuid4 object, and made once per response)."""
    return os.urandom(8).hex()


def requested_names(watched: WatchedResource) -> Collection[str] | None:
    """What to generate: None for a wildcard subscription, else the subscribed names."""
    return None if watched.wildcard else watched.names


def resource_name(msg: Any) -> str:
    return str(getattr(msg, "name", "") or getattr(msg, "cluster_name", ""))


def generate_resources(
    push: PushContext,
    proxy: Proxy,
    type_url: str,
    names: Collection[str] | None,
    dependents: list[tuple[str, frozenset[str]]] | None = None,
) -> list[Resource]:
    """The proxy's resources of one type (only `names` unless None), serialized. With
    `dependents`, the names Envoy will ask for next are appended to it: the assignments
    after CDS, the route configs after LDS (see `prewarm`)."""
    try:
        messages = generator(type_url, proxy.type)(push, proxy, names)
    except Exception as exc:  # contained per stream and type (xds/generation_errors.py)
        raise GenerationError(type_url, proxy, exc) from exc
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    shared = memo.get(id(messages)) if isinstance(messages, ClassVirtualHosts) else None
    if shared is not None and shared[0] is messages:
        made: SharedResources = shared[1]  # a class's VHDS virtual hosts: made once
        return made
    out = SharedResources() if isinstance(messages, ClassVirtualHosts) else []
    # VHDS virtual hosts outlive the push (kept by the split while their bytes are the same):
    # so do their resources, and a VirtualService change makes only the changed ones again.
    kept = push.lasting if isinstance(messages, ClassVirtualHosts) else None
    for msg in messages:
        entry = memo.get(id(msg)) if kept is None else kept.get((_KEPT_KEY, id(msg)))
        if not (isinstance(entry, tuple) and entry[0] is msg):
            body = msg.SerializeToString(deterministic=True)
            digest = hashlib.blake2b(body, digest_size=8).hexdigest()
            resource = Resource(resource_name(msg), body, digest, _head(type_url, body))
            entry = (msg, resource)
            if kept is None:
                memo[id(msg)] = entry
            else:
                kept.put((_KEPT_KEY, id(msg)), entry)
        out.append(entry[1])
    if isinstance(messages, ClassVirtualHosts):
        memo[id(messages)] = (messages, out)
    if dependents is not None and type_url == TypeUrl.LISTENER:
        dependents.append((TypeUrl.ROUTE, frozenset(rds_names(messages))))
    elif dependents is not None and type_url == TypeUrl.CLUSTER:
        dependents.append((TypeUrl.ENDPOINT, frozenset(cluster_references(push, messages)[0])))
        # Once its clusters are initialized, a starting Envoy asks for its listeners.
        dependents.append((TypeUrl.LISTENER, ALL_NAMES))
    return out


def prewarm(push: PushContext, proxy: Proxy, dependents: list[tuple[str, frozenset[str]]]) -> None:
    """Generate (into the push's caches) what Envoy will ask for next, while it applies what
    was just sent: the assignments of the clusters, the route configs of the listeners, and,
    after a CDS answer, the listeners too (`ALL_NAMES`). Its EDS, LDS and RDS
    requests are then answered from the cache instead of waiting on generation, which
    Envoy would otherwise sit idle for. xds/server.py runs it one `prewarm_step` at a time."""
    pending = list(dependents)
    while pending:
        type_url, names = pending.pop(0)
        pending += prewarm_step(push, proxy, type_url, names)


def prewarm_step(
    push: PushContext, proxy: Proxy, type_url: str, names: frozenset[str]
) -> list[tuple[str, frozenset[str]]]:
    """Build one type's resources; returns what they make Envoy ask for next (the route
    configs of listeners built for `ALL_NAMES`)."""
    if names == ALL_NAMES:
        nested: list[tuple[str, frozenset[str]]] = []
        generate_resources(push, proxy, type_url, None, nested)
        return nested
    if names:
        generate_resources(push, proxy, type_url, names)
    return []


def load_generators() -> None:
    """Import every generator (and the protobuf modules behind them) now, not while the
    first proxy waits for its clusters (it would otherwise pay for the imports)."""
    generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)


# Istio's pod annotation: interception mode of the injected sidecar.
_INTERCEPTION = "sidecar.istio.io/interceptionMode"
# Seconds of startup spent building clusters ahead for proxies not connected yet.
PREBUILD_BUDGET = 5.0


def _known_sidecars(push: PushContext) -> list[Proxy]:
    """One Proxy per class of the sidecar pods the registry knows (most pods first), as
    `xds/node.py proxy_for` would make it for their node: the pod's labels and addresses,
    the interception mode of its `sidecar.istio.io/interceptionMode` annotation."""
    classes: dict[tuple[object, ...], list[Proxy]] = {}
    selectors = [gw.model.spec.selector for gw in push.gateways if gw.model.spec.selector]
    for pod in cast(Sequence[ConfigObject[Pod]], push.of_kind(Kind.POD)):
        meta = pod.model.metadata
        if injection_override(meta.labels, meta.annotations) is False:
            continue  # the pod opted out of its sidecar
        if any(all(meta.labels.get(k) == v for k, v in sel.items()) for sel in selectors):
            continue  # a gateway's pod: its proxy is a router, built when it connects
        proxy = proxy_from_pod(pod, ProxyType.SIDECAR, push.domain_suffix)
        mode = meta.annotations.get(_INTERCEPTION, "REDIRECT").upper()
        proxy = replace(proxy, intercept=mode != "NONE")
        classes.setdefault(push.proxy_class(proxy), []).append(proxy)
    return [group[0] for group in sorted(classes.values(), key=len, reverse=True)]


def prebuild_known(push: PushContext, budget: float = PREBUILD_BUDGET) -> int:
    """Build, into the push's caches, the clusters of one proxy of each class of known
    sidecar pods, before any connects: a proxy's first CDS request is then answered from
    the cache instead of waiting on a cold generation (the next types are prebuilt while
    Envoy applies the clusters, see `prewarm`). Stops once `budget` seconds are spent;
    returns the classes built."""
    started = time.perf_counter()
    built = 0
    for proxy in _known_sidecars(push):
        if time.perf_counter() - started > budget:
            break
        try:
            generate_resources(push, proxy, TypeUrl.CLUSTER, None)
        except Exception:  # a proxy's own request reports it; startup goes on
            log.exception("prebuilding clusters for %s.%s failed", proxy.pod_name, proxy.namespace)
            continue
        built += 1
    log.info(
        "prebuilt clusters for %d proxy classes in %.2f s", built, time.perf_counter() - started
    )
    return built
