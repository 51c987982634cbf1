"""Resources for one response: generated through GENERATORS, serialized once per push.

Proxies of one class get the very same messages from the generators' per-push cache, so
their serialized bytes (and, for Delta, their version hashes) are memoised per push by
message identity; the memo pins the message so its id stays unique for the push's lifetime.

A SotW response is assembled on the wire (`sotw_response`): each resource keeps the bytes
that frame it as a packed `Any` in `DiscoveryResponse.resources`, so a response to one more
proxy is one join of shared bytes, never a protobuf built and serialized per proxy.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import Proxy, ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import WatchedResource
from meshpilot.xds.generate import generator
from meshpilot.xds.generate.references import cluster_references
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.references import rds_names
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "ALL_NAMES",
    "CONTROL_PLANE",
    "Resource",
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


# Names meaning "every resource of the type" in a dependents entry (Delta's wildcard name).
ALL_NAMES = frozenset({"*"})


def new_nonce() -> str:
    return uuid.uuid4().hex[:16]


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
    messages = generator(type_url, proxy.type)(push, proxy, names)
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    out = []
    for msg in messages:
        entry = memo.get(id(msg))
        if entry is None or entry[0] is not msg:
            body = msg.SerializeToString(deterministic=True)
            digest = hashlib.blake2b(body, digest_size=8).hexdigest()
            resource = Resource(resource_name(msg), body, digest, _head(type_url, body))
            entry = memo[id(msg)] = (msg, resource)
        out.append(entry[1])
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
    requests are then answered from the cache instead of waiting on generation (B4: 0.5 s
    at 1k clusters, 5 s at 5k). xds/server.py runs it one `prewarm_step` at a time."""
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
    first proxy waits for its clusters (B4: 0.5-1 s of imports on the first request)."""
    generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)


# Istio's pod annotations: interception mode of the injected sidecar, and opting a pod out.
_INTERCEPTION = "sidecar.istio.io/interceptionMode"
_INJECT = "sidecar.istio.io/inject"
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
        if "false" in (meta.labels.get(_INJECT), meta.annotations.get(_INJECT)):
            continue
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
    the cache instead of waiting on a cold generation (B4: 0.4 s at 5k clusters for the
    first proxy of a class; the next types are prebuilt while Envoy applies the clusters,
    see `prewarm`). Stops once `budget` seconds are spent; returns the classes built."""
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
