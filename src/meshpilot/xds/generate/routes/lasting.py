"""Sidecar route parts one proxy class keeps from push to push.

When one VirtualService changes, the route config of its port is rebuilt for every proxy
class; without this, every virtual host of that port was translated again. Here a class
keeps, across pushes (model/lasting_memo.py):
  - each VirtualService's serialized routes on a port, checked against the very
    VirtualService object they were made from;
  - default routes, service domains and serialized virtual hosts.

Everything else a part reads is the class's "world": the mesh config, the registry's
services, the DestinationRule index, the sidecar scope (Sidecar resource and the services it
imports) and the delegate VirtualServices. A new push with any of them changed (by identity:
a PushContext shares the indexes a change did not touch) starts the class afresh. What tells
proxies of a class apart (labels tested by VirtualServices, workload-selecting
DestinationRules, DNS domain) is in the class key itself (routes/sidecar.py).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Service
from meshpilot.xds.generate.routes.assembly import VirtualHostParts, virtual_host_bytes
from meshpilot.xds.generate.routes.egress_view import EgressView
from meshpilot.xds.generate.routes.virtual_hosts import DomainsMemo

__all__ = ["ClassRoutes", "class_routes"]

_DELEGATES_MEMO = "rds.delegate-objects"


@dataclass(frozen=True, slots=True)
class _World:
    """The inputs every kept part of a class may read, held (and compared) by identity."""

    mesh: object
    services: object
    destination_rules: object
    scope: SidecarScope
    delegates: tuple[ConfigObject[VirtualService], ...]

    def same(self, other: _World) -> bool:
        return (
            (self.mesh is other.mesh or self.mesh == other.mesh)
            and self.services is other.services
            and self.destination_rules is other.destination_rules
            and self.scope is other.scope
            and len(self.delegates) == len(other.delegates)
            and all(a is b for a, b in zip(self.delegates, other.delegates, strict=True))
        )


@dataclass(slots=True)
class ClassRoutes:
    """One proxy class's route parts; `encoded` counts the VirtualServices translated (and
    `reused` those taken as they were) since the class started afresh."""

    world: _World
    # By port, then VirtualService (no key tuple per entry: fewer objects for the collector).
    vs_routes: dict[int, dict[ConfigKey, tuple[ConfigObject[VirtualService], bytes]]] = field(
        default_factory=dict
    )
    defaults: dict[tuple[str, int], bytes] = field(default_factory=dict)
    domains: DomainsMemo = field(default_factory=dict)
    vhosts: dict[str, VirtualHostParts] = field(default_factory=dict)  # serialized ones
    # By port: the egress view and its services on the port (routes/sidecar.py edits).
    port_services: dict[int, tuple[EgressView, dict[str, Service]]] = field(default_factory=dict)
    encoded: int = 0
    reused: int = 0

    def routes_of(self, obj: ConfigObject[VirtualService], port: int) -> bytes | None:
        on_port = self.vs_routes.get(port)
        found = on_port.get(obj.key) if on_port is not None else None
        if found is None or found[0] is not obj:
            return None
        self.reused += 1
        return found[1]

    def keep_routes(self, obj: ConfigObject[VirtualService], port: int, routes: bytes) -> None:
        self.encoded += 1
        on_port = self.vs_routes.get(port)
        if on_port is None:
            on_port = self.vs_routes[port] = {}
        on_port[obj.key] = (obj, routes)

    def vhost_bytes(self, vh: VirtualHostParts) -> bytes:
        """virtual_host_bytes(vh), the same bytes object while name, domains and routes
        (the very bytes object) stay."""
        found = self.vhosts.get(vh.name)
        if (
            found is not None
            and found.serialized is not None
            and found.routes is vh.routes
            and found.domains == vh.domains
        ):
            return found.serialized
        vh.serialized = encoded = virtual_host_bytes(vh)
        self.vhosts[vh.name] = vh
        return encoded


def _delegates(push: PushContext) -> tuple[ConfigObject[VirtualService], ...]:
    found = push.memo.get(_DELEGATES_MEMO)
    if found is None:
        delegates = push.virtual_services.delegates
        found = push.memo[_DELEGATES_MEMO] = tuple(delegates[k].obj for k in sorted(delegates))
    assert isinstance(found, tuple)
    return found


def class_routes(push: PushContext, klass: Hashable, scope: SidecarScope) -> ClassRoutes:
    """The class's parts for this push: the previous push's if its world is this one."""
    key = ("rds.class-routes", klass)
    world = _World(
        push.mesh, push.registry.services, push.destination_rules, scope, _delegates(push)
    )
    found = push.lasting.current.get(key)
    if isinstance(found, ClassRoutes) and found.world.same(world):
        return found
    kept = push.lasting.previous_entry(key)
    if isinstance(kept, ClassRoutes) and kept.world.same(world):
        kept.world = world  # equal: the newer objects, so the older can go
        push.lasting.put(key, kept)
        return kept
    fresh = ClassRoutes(world)
    push.lasting.put(key, fresh)
    return fresh
