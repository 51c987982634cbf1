"""Which VirtualService builds which virtual hosts of a sidecar route config: the services
on a port, the VirtualServices that select them and the group of virtual hosts each one
makes (routes/sidecar.py builds configs from them, routes/edited_config.py edits them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from meshpilot.config.hosts import host_matches, hosts_intersect
from meshpilot.config.keys import ConfigKey
from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Protocol, Service
from meshpilot.xds.generate.routes.context import RouteContext
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.egress_view import EgressView, egress_entry, egress_view
from meshpilot.xds.generate.routes.encoded import RouteMemo, encoded_virtual_service
from meshpilot.xds.generate.routes.lasting import ClassRoutes
from meshpilot.xds.generate.routes.virtual_hosts import VirtualHostGroup

__all__ = [
    "NON_SERVICE_HOSTS_PORT",
    "has_port",
    "http_like",
    "most_specific_vs",
    "port_services",
    "selects",
    "vs_group",
]

# Istio's "gross hack": on port 80, VirtualService hosts that are no service still get
# virtual hosts (think `bookinfo.com`).
NON_SERVICE_HOSTS_PORT = 80

# Protocol.is_http or AUTO, as a set: the property builds a tuple on every call.
_HTTP_LIKE = frozenset(p for p in Protocol if p.is_http or p is Protocol.AUTO)


def http_like(svc: Service, port: int) -> bool:
    for p in svc.ports:  # Service.port, without a generator: this runs per service and port
        if p.port == port:
            return p.protocol in _HTTP_LIKE
    return False


def has_port(svc: Service, port: int) -> bool:
    for p in svc.ports:  # noqa: SIM110 (no generator: this runs per service and port)
        if p.port == port:
            return True
    return False


def most_specific_vs(
    vss: Sequence[BoundVirtualService], services: Sequence[Service]
) -> dict[str, ConfigKey]:
    """For each service host, the VirtualService naming it exactly, else the one with the
    most specific matching wildcard host; earlier VirtualServices win ties."""
    exact: dict[str, ConfigKey] = {}
    wildcard: dict[str, ConfigKey] = {}
    for vs in vss:
        for h in vs.hosts:
            (wildcard if h.startswith("*") else exact).setdefault(h, vs.obj.key)
    out = {}
    for svc in services:
        h = svc.hostname
        if not h.startswith("*") and h in exact:
            out[h] = exact[h]
            continue
        if h in wildcard:
            out[h] = wildcard[h]
            continue
        matching = [w for w in wildcard if host_matches(w, h)]
        if matching:
            out[h] = wildcard[max(matching, key=len)]
    return out


def selects(vs: BoundVirtualService, services: Mapping[str, Service]) -> bool:
    """Does any host of `vs` name (or overlap, for wildcards) a service on this port?"""
    hosts = vs.hosts
    for h in hosts:  # the usual answer, without a generator per VirtualService
        if h in services:
            return True
    return any(
        any(hosts_intersect(h, s) for s in services if h.startswith("*") or s.startswith("*"))
        for h in hosts
    )


def vs_group(
    ctx: RouteContext,
    services: Mapping[str, Service],
    owners: Mapping[str, ConfigKey],
    memo: RouteMemo,
    kept: ClassRoutes,
) -> VirtualHostGroup | None:
    routes = kept.routes_of(ctx.vs.obj, ctx.port)
    if routes is None:
        routes = encoded_virtual_service(ctx, http_routes(ctx.push, ctx.vs), memo)
        kept.keep_routes(ctx.vs.obj, ctx.port, routes)
    if not routes:
        return None  # its services keep their default routes
    vs_hosts: list[str] = []
    matched: list[Service] = []
    wildcards = []
    for h in ctx.vs.hosts:  # plain loops: this runs for every VirtualService and port
        if h.startswith("*"):
            wildcards.append(h)
        elif (svc := services.get(h.lower())) is not None:
            matched.append(svc)
        else:
            vs_hosts.append(h)
    for h in wildcards:
        overlapping = [s for name, s in sorted(services.items()) if hosts_intersect(name, h)]
        matched += [s for s in overlapping if owners.get(s.hostname) == ctx.vs.obj.key]
        if not overlapping:
            vs_hosts.append(h.lower())
    http_services = [s for s in matched if http_like(s, ctx.port)]
    if not http_services and ctx.port != NON_SERVICE_HOSTS_PORT:
        return None
    return VirtualHostGroup(routes, http_services, vs_hosts)


def port_services(
    kept: ClassRoutes, scope: SidecarScope, port: int
) -> tuple[EgressView, dict[str, Service]]:
    """The egress view of `port`'s route config and its services on the port, by hostname:
    kept by the class (they read only its world: routes/lasting.py)."""
    found = kept.port_services.get(port)
    if found is None:
        view = egress_view(scope, egress_entry(scope, port))
        services = {s.hostname: s for s in view.services if has_port(s, port)}
        found = kept.port_services[port] = (view, services)
    return found
