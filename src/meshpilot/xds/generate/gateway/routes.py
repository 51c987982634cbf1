"""Gateway route configurations (Istio's buildGatewayHTTPRouteConfig).

`http.<port>` serves every plain-text HTTP server on the port (across Gateways), and
`https.<port>.<portName>.<gateway>.<namespace>` one terminated HTTPS server. For each server,
each VirtualService bound to its Gateway contributes its routes to one virtual host per host
shared by the server and the VirtualService (`ns/host` server hosts only for VirtualServices in
`ns`): `<host>:<serverPort>` with domains `[host]` (the port is ignored in host matching).
A VirtualService none of whose HTTP routes apply to the server (other port or gateway, only
`tcp`/`tls` routes) adds no virtual host.
Routes of later VirtualServices append to an existing host. `httpsRedirect` sets
`require_tls: ALL`, with a route-less virtual host for server hosts no VirtualService covers.
Virtual hosts whose routes are the very same (one VirtualService over several hosts) collapse
into one with all their domains. With no virtual host at all: `blackhole:<port>`, `*`, no
routes (Envoy answers 404).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.merged_gateway import GatewayServer, MergedGateway, merged_gateway_for
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.routes.http_route import build_http_routes
from meshpilot.xds.generate.routes.match import is_catch_all
from meshpilot.xds.names import vhost_name
from meshpilot.xds.protos import boolean, u32

__all__ = [
    "MAX_DIRECT_RESPONSE_BODY_BYTES",
    "build_gateway_route_config",
    "generate_gateway_routes",
]

# Istio raises Envoy's 4 KiB default to the 1 MiB its webhook allows.
MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024
BLACKHOLE_VHOST = "blackhole"


@dataclass(slots=True)
class _VHost:
    name: str
    domains: list[str]
    routes: list[rc.Route] = field(default_factory=list)
    require_tls: bool = False
    include_attempt_count: bool = True


@dataclass(slots=True)
class _RouteBuild:
    push: PushContext
    proxy: Proxy
    vhosts: dict[str, _VHost] = field(default_factory=dict)
    # Routes are built once per (gateway, VirtualService) and shared by all its hosts.
    built: dict[tuple[str, str, str], list[rc.Route]] = field(default_factory=dict)

    def routes(self, gs: GatewayServer, vs: BoundVirtualService) -> list[rc.Route]:
        key = (gs.gateway_name, vs.namespace, vs.name)
        if key not in self.built:
            self.built[key] = build_http_routes(
                self.push,
                self.proxy,
                vs,
                gs.server.port.number,
                frozenset({gs.gateway_name}),
                is_tls=gs.server.tls is not None,
            )
        return self.built[key]


def _names_for_namespace(hosts: tuple[str, ...], namespace: str) -> list[str]:
    out = []
    for h in hosts:
        ns, sep, name = h.partition("/")
        if sep:
            if ns not in (namespace, "*"):
                continue
            h = name
        out.append(h)
    return out


def _subset_of(a: str, b: str) -> bool:
    """Istio's host.Name.SubsetOf: every name `a` covers, `b` covers too."""
    if b == "*" or a == b:
        return True
    if b.startswith("*"):
        return a[1:].endswith(b[1:]) if a.startswith("*") else a.endswith(b[1:])
    return False


def intersect_hosts(server_hosts: list[str], vs_hosts: tuple[str, ...]) -> list[str]:
    """Istio's host.Names.Intersection: the narrower of each pair that overlaps."""
    out: list[str] = []
    for s in server_hosts:
        for v in vs_hosts:
            narrower = s if _subset_of(s, v) else v if _subset_of(v, s) else None
            if narrower is not None and narrower not in out:
                out.append(narrower)
    return out


def _add_server(build: _RouteBuild, gs: GatewayServer) -> None:
    port = gs.server.port.number
    redirect = gs.server.tls is not None and gs.server.tls.https_redirect
    vss = build.push.virtual_services.for_gateway(gs.gateway_name, build.proxy.namespace)
    for vs in vss:
        hosts = intersect_hosts(_names_for_namespace(gs.hosts, vs.namespace), vs.hosts)
        if not hosts:
            continue
        routes = build.routes(gs, vs)
        if not routes:
            continue  # no route applies to this server ("no routes matched" in Istio)
        for host in (h.lower() for h in hosts):
            vhost = build.vhosts.get(host)
            if vhost is None:
                vhost = build.vhosts[host] = _VHost(vhost_name(host, port), [host])
            vhost.routes.extend(routes)
            vhost.require_tls = vhost.require_tls or redirect
    if redirect:
        for host in (h.lower() for h in gs.hosts):
            vhost = build.vhosts.get(host)
            if vhost is None:
                vhost = build.vhosts[host] = _VHost(vhost_name(host, port), [host])
            vhost.require_tls = True


def _host_order(host: str) -> tuple[bool, int, str]:
    """Istio's host.Names order: exact names first, longer first, then alphabetical."""
    return (host.startswith("*"), -len(host), host)


def _collapse(vhosts: dict[str, _VHost]) -> list[_VHost]:
    """Istio's collapseDuplicateRoutes: merge virtual hosts holding the same route objects."""
    kept: list[_VHost] = []
    for host in sorted(vhosts, key=_host_order):
        vh = vhosts[host]
        twin = next(
            (
                k
                for k in kept
                if k.require_tls == vh.require_tls
                and k.include_attempt_count == vh.include_attempt_count
                and len(k.routes) == len(vh.routes)
                and all(a is b for a, b in zip(k.routes, vh.routes, strict=True))
            ),
            None,
        )
        if twin is not None:
            twin.domains.extend(vh.domains)
        else:
            kept.append(vh)
    return kept


def _virtual_host(vh: _VHost) -> rc.VirtualHost:
    routes = [r for r in vh.routes if not is_catch_all(r)] + [
        r for r in vh.routes if is_catch_all(r)
    ]
    out = rc.VirtualHost(
        name=vh.name, domains=vh.domains, routes=routes, include_request_attempt_count=True
    )
    if vh.require_tls:
        out.require_tls = rc.VirtualHost.ALL
    return out


def build_gateway_route_config(
    push: PushContext, proxy: Proxy, merged: MergedGateway | None, name: str
) -> route_pb2.RouteConfiguration:
    servers = merged.servers_by_route_name.get(name) if merged is not None else None
    if not servers:  # a route for a server that is gone (Envoy may still ask while draining)
        return route_pb2.RouteConfiguration(name=name, validate_clusters=boolean(False))
    build = _RouteBuild(push, proxy)
    for gs in servers:
        _add_server(build, gs)
    if build.vhosts:
        vhosts = sorted((_virtual_host(v) for v in _collapse(build.vhosts)), key=lambda v: v.name)
    else:
        vhosts = [
            rc.VirtualHost(
                name=vhost_name(BLACKHOLE_VHOST, servers[0].server.port.number), domains=["*"]
            )
        ]
    return route_pb2.RouteConfiguration(
        name=name,
        virtual_hosts=vhosts,
        validate_clusters=boolean(False),
        ignore_port_in_host_matching=True,
        max_direct_response_body_size_bytes=u32(MAX_DIRECT_RESPONSE_BODY_BYTES),
    )


def generate_gateway_routes(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[route_pb2.RouteConfiguration]:
    """The route configurations asked for (all of this gateway's when `names` is None)."""
    merged = merged_gateway_for(push, proxy)
    if names is None:
        names = merged.servers_by_route_name.keys() if merged is not None else ()
    return [build_gateway_route_config(push, proxy, merged, n) for n in sorted(names)]
