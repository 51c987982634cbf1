"""ResourceCache: resources that many proxies share, built once per push.

Proxies of one class (same namespace and Sidecar resource, same DestinationRules selecting
them) see the same outbound clusters, endpoints, listeners and routes; the generators key
those parts by what decides them and build them once. Entries keep the protobuf messages
(sidecar route configs: as assembled, routes/assembly.py), and ADS serializes each once
per push by identity (xds/resources.py), so every proxy of a class gets the same bytes.

The cache lives for one PushContext: a new push starts empty, so nothing stale survives a
config change, except what `carry_over` proves unaffected: after a change of VirtualServices
alone, the sidecar route configs of the ports none of their hosts' services has are the
previous push's (a sidecar route config of port P holds the virtual hosts of the services on
P; a VirtualService naming service hosts only changes those services' virtual hosts); after
a change of endpoints alone (services unchanged), all of them. The ADS server calls it once
a new push is built.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import ENDPOINT_KINDS, Kind
from meshpilot.model.push_context import PushContext
from meshpilot.xds.route_edits import (
    RouteEdits,
    routes_only_edits,
    set_route_edits,
)

__all__ = ["CachedResources", "ResourceCache", "cache_for", "carry_over"]

_MEMO_KEY = "xds.ResourceCache"


@dataclass(slots=True)
class CachedResources:
    messages: tuple[Any, ...]  # protobuf messages, or AssembledRouteConfig


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


# Sidecar route configs are cached as ("rds", proxy class, route config name); on port 80
# VirtualService hosts that are no service get virtual hosts too: never carried over.
_ROUTES = "rds"
_NON_SERVICE_HOSTS_PORT = 80


def carry_over(old: PushContext, new: PushContext, changed: Collection[ConfigKey] | None) -> int:
    """Seed `new`'s cache with the entries of `old`'s that `changed` cannot affect; returns
    how many. Only sidecar route configs after a VirtualService-only or endpoint-only
    change, for now. When
    the change edited VirtualServices' routes only, the configs of the ports it touches are
    left for the route generator to edit (xds/route_edits.py)."""
    ports = _touched_route_ports(old, new, changed)
    if ports is None:
        return 0
    source, target = cache_for(old), cache_for(new)
    carried = 0
    previous: dict[Hashable, object] = {}  # the touched ports' configs, for route edits
    for key, entry in source.entries.items():
        if not (isinstance(key, tuple) and len(key) == 3 and key[0] == _ROUTES):
            continue
        port = _route_port(key[2])
        if port is None:
            continue
        if port not in ports and key not in target.entries:
            target.entries[key] = entry
            carried += 1
        elif port in ports and len(entry.messages) == 1:
            previous[key] = entry.messages[0]
    assert changed is not None  # _touched_route_ports said so
    if not ports:
        return carried  # endpoints alone: every route config carried, none to edit
    edited = routes_only_edits(old, new, changed)
    if edited is not None:
        set_route_edits(new, RouteEdits(edited, previous))
    return carried


def _touched_route_ports(
    old: PushContext, new: PushContext, changed: Collection[ConfigKey] | None
) -> set[int] | None:
    """The ports whose route configs the change can alter; None: any (do not carry)."""
    if not changed or old.mesh != new.mesh or old.registry.services != new.registry.services:
        return None
    if all(key.kind in ENDPOINT_KINDS for key in changed):
        # No sidecar route config reads endpoints or pods; a pod's labels decide only its
        # proxy's class, which is in the key. Without this, the first VirtualService
        # change after an endpoint push would rebuild every class from scratch.
        return set()
    by_host: dict[str, list[int]] = {}
    for svc in new.registry.services:
        by_host.setdefault(svc.hostname, []).extend(p.port for p in svc.ports)
    ports = {_NON_SERVICE_HOSTS_PORT}
    for key in changed:
        if key.kind is not Kind.VIRTUAL_SERVICE:
            return None
        for version in (old.by_key.get(key), new.by_key.get(key)):
            if version is None:
                continue
            hosts = cast(VirtualService, version.model).spec.hosts
            if not hosts:
                return None  # a delegate: its routes land under other hosts
            for host in hosts:
                fqdn = resolve_host(host, key.namespace, new.domain_suffix)
                if fqdn.startswith("*") or fqdn not in by_host:
                    return None  # wildcards and non-service hosts: not worth the risk
                ports.update(by_host[fqdn])
    return ports


def _route_port(name: object) -> int | None:
    """`<port>` or `<host>:<port>` (sidecar route config names)."""
    if not isinstance(name, str):
        return None
    port = name.rpartition(":")[2]
    return int(port) if port.isdigit() else None
