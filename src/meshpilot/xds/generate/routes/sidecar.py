"""Sidecar outbound route configurations, one per HTTP port (Istio's
buildSidecarOutboundHTTPRouteConfig and BuildSidecarVirtualHostWrapper)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.config.keys import ConfigKey
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Service
from meshpilot.xds import names as xds_names
from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate.mesh_virtual_services import mesh_virtual_services
from meshpilot.xds.generate.routes.action import set_timeout
from meshpilot.xds.generate.routes.aliases import aliases_by_target, visible_aliases
from meshpilot.xds.generate.routes.assembly import (
    AssembledRouteConfig,
    VirtualHostParts,
    assembled_route_config,
    route_entry,
)
from meshpilot.xds.generate.routes.context import RouteContext
from meshpilot.xds.generate.routes.edited_config import edited_config
from meshpilot.xds.generate.routes.egress_view import EgressView, egress_entry, egress_view
from meshpilot.xds.generate.routes.encoded import RouteMemo
from meshpilot.xds.generate.routes.hash_policy import hash_policy, service_hash
from meshpilot.xds.generate.routes.lasting import ClassRoutes, class_routes
from meshpilot.xds.generate.routes.retry import default_retry_policy, retry_policy
from meshpilot.xds.generate.routes.virtual_hosts import (
    VirtualHostGroup,
    build_virtual_hosts,
)
from meshpilot.xds.generate.routes.vs_groups import (
    NON_SERVICE_HOSTS_PORT,
    http_like,
    most_specific_vs,
    port_services,
    selects,
    vs_group,
)
from meshpilot.xds.protos import boolean, u32

__all__ = ["generate_sidecar_route_parts", "generate_sidecar_routes"]

REGISTRY_ONLY = "REGISTRY_ONLY"
MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024  # Istio raises Envoy's 4 KiB default
_LABEL_KEYS_MEMO = "rds.source-label-keys"
_PARTS_MEMO = "rds.parts-by-proxy"


def _parse_name(name: str) -> tuple[int, str] | None:
    """`<port>`, or `<host>:<port>` for a sniffed service alone on its VIP listener."""
    host, _, port = name.rpartition(":")
    return (int(port), host) if port.isdigit() else None


def generate_sidecar_routes(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[route_pb2.RouteConfiguration]:
    """`names` are the route configs Envoy asked for; None builds `<port>` for every HTTP or
    sniffed port of the services this proxy sees. Names that are neither are skipped."""
    return [config.message() for config in generate_sidecar_route_parts(push, proxy, names)]


def generate_sidecar_route_parts(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[AssembledRouteConfig]:
    """generate_sidecar_routes' configs as assembled, each parsed only when asked for.
    Memoised per push and proxy: a VHDS stream asks twice (route configs, then their
    virtual hosts), and working out its class is most of a cached answer. Read only."""
    memo = push.memo.setdefault(_PARTS_MEMO, {})
    assert isinstance(memo, dict)
    memo_key = (id(proxy), None if names is None else tuple(sorted(names)))
    found = memo.get(memo_key)
    if found is not None and found[0] is proxy:  # the memo pins the proxy: its id is its own
        parts: list[AssembledRouteConfig] = found[1]
        return parts
    scope = push.proxy_scope(proxy)
    if names is None:
        services = [s for s in scope.services if not s.is_alias]
        ports = {p.port for s in services for p in s.ports if http_like(s, p.port)}
        wanted = {str(p): (p, "") for p in ports}
    else:
        wanted = {n: parsed for n in names if (parsed := _parse_name(n)) is not None}
    cache = cache_for(push)
    # Proxies of one class share route configs, unless VirtualServices tell them apart by
    # client labels: then the labels they test are part of the key.
    klass = (push.proxy_class(proxy), proxy.dns_domain, _tested_labels(push, proxy))
    builder = _Builder(push, proxy, scope, klass)
    out: list[AssembledRouteConfig] = []
    for name, (port, host) in sorted(wanted.items(), key=lambda kv: (kv[1], kv[0])):
        build = partial(builder.config, name, port, host)
        out.extend(
            cast(
                tuple[AssembledRouteConfig, ...],
                cache.get_or_build(("rds", klass, name), build).messages,
            )
        )
    memo[memo_key] = (proxy, out)
    return out


def _tested_labels(push: PushContext, proxy: Proxy) -> tuple[tuple[str, str | None], ...]:
    """The proxy's values of every label a VirtualService match tests (`sourceLabels`)."""
    keys = push.memo.get(_LABEL_KEYS_MEMO)
    if keys is None:
        everything = [*push.virtual_services.all, *push.virtual_services.delegates.values()]
        keys = sorted(
            {
                k
                for vs in everything
                for r in vs.obj.model.spec.http
                for m in r.match
                for k in m.source_labels
            }
        )
        push.memo[_LABEL_KEYS_MEMO] = keys
    assert isinstance(keys, list)
    return tuple((k, proxy.labels.get(k)) for k in keys)


@dataclass(slots=True)
class _Builder:
    """One proxy's route configs; virtual hosts are built once per port."""

    push: PushContext
    proxy: Proxy
    scope: SidecarScope
    klass: object
    by_port: dict[int, list[VirtualHostParts]] = field(default_factory=dict)
    routes: RouteMemo = field(default_factory=RouteMemo)
    kept: ClassRoutes | None = None  # what the class keeps across pushes, once needed
    # Per Sidecar egress entry (egress_view.py): its view, VirtualServices and their owners.
    mesh: dict[int, _EntryMesh] = field(default_factory=dict)

    def config(self, name: str, port: int, sniffed_host: str) -> list[AssembledRouteConfig]:
        if self.kept is None:
            self.kept = class_routes(self.push, self.klass, self.scope)
        if not sniffed_host:
            edited = edited_config(
                self.push, self.proxy, self.scope, self.klass, self.kept, self.routes, name, port
            )
            if edited is not None:
                return [edited]
        if port not in self.by_port:
            entry = self._entry(egress_entry(self.scope, port))
            self.by_port[port] = _virtual_hosts(self, entry, port)
        vhosts = self.by_port[port]
        return [_route_config(name, vhosts, self.scope, sniffed_host, self.kept)]

    def _entry(self, index: int) -> _EntryMesh:
        if index not in self.mesh:
            view = egress_view(self.scope, index)
            everything = mesh_virtual_services(self.push, self.proxy.namespace)
            if view.imported is None:  # no Sidecar: every host passes allows_host
                mesh_vs = list(everything)
            else:
                mesh_vs = [
                    vs
                    for vs in everything
                    if any(view.allows_host(h, vs.namespace) for h in vs.hosts)
                ]
            owners = most_specific_vs(mesh_vs, view.services)
            self.mesh[index] = _EntryMesh(view, mesh_vs, owners)
        return self.mesh[index]


@dataclass(frozen=True, slots=True)
class _EntryMesh:
    view: EgressView
    virtual_services: list[BoundVirtualService]
    owners: dict[str, ConfigKey]


def default_route(svc: Service, port: int, push: PushContext, proxy: Proxy) -> rc.Route:
    """`/` to the service's cluster with Istio's default retries and no timeout."""
    route = rc.Route(
        name=xds_names.DEFAULT_ROUTE,
        match=rc.RouteMatch(prefix="/"),
        decorator=rc.Decorator(operation=xds_names.trace_operation(svc.hostname, port)),
    )
    route.route.cluster = xds_names.outbound_cluster(port, "", svc.hostname)
    mesh_default = push.mesh.default_http_retry_policy
    retries = default_retry_policy() if mesh_default is None else retry_policy(mesh_default, False)
    if retries is not None:
        route.route.retry_policy.CopyFrom(retries)
    set_timeout(route.route, None)
    bound = push.destination_rule(proxy, svc)
    policy = hash_policy(service_hash(bound.obj.model if bound else None, port))
    if policy is not None:
        route.route.hash_policy.append(policy)
    return route


def catch_all_virtual_host(scope: SidecarScope) -> rc.VirtualHost:
    """Unknown hosts: forwarded as addressed (ALLOW_ANY) or refused with 502."""
    if scope.outbound_policy == REGISTRY_ONLY:
        route = rc.Route(
            name=xds_names.BLACKHOLE_ROUTE,
            match=rc.RouteMatch(prefix="/"),
            direct_response=rc.DirectResponseAction(status=502),
        )
        name = xds_names.BLACKHOLE_ROUTE
    else:
        route = rc.Route(name=xds_names.PASSTHROUGH_ROUTE, match=rc.RouteMatch(prefix="/"))
        route.route.cluster = xds_names.PASSTHROUGH_CLUSTER
        set_timeout(route.route, None)
        name = xds_names.PASSTHROUGH_ROUTE
    return rc.VirtualHost(
        name=name, domains=["*"], routes=[route], include_request_attempt_count=True
    )


def _virtual_hosts(builder: _Builder, entry: _EntryMesh, port: int) -> list[VirtualHostParts]:
    """Virtual hosts of the services on `port`: those a VirtualService claims first, in
    VirtualService precedence, then the others with their default route."""
    push, proxy, scope, memo = builder.push, builder.proxy, builder.scope, builder.routes
    kept = builder.kept
    assert kept is not None
    mesh_vs, owners = entry.virtual_services, entry.owners
    services = port_services(kept, scope, port)[1]  # entry.view's services on the port
    service_ports = dict.fromkeys(services, (port,))  # Istio trims services to this port
    if port != NON_SERVICE_HOSTS_PORT:
        mesh_vs = [vs for vs in mesh_vs if selects(vs, services)]
    groups = []
    if mesh_vs:
        # One context for the port, pointed at each VirtualService in turn (nothing keeps
        # it): a new one per VirtualService would be thousands of objects per push.
        mesh = frozenset({MESH_GATEWAY})
        ctx = RouteContext(
            push, proxy, scope, mesh_vs[0], port, mesh, False, service_ports, memo.rules
        )
        for vs in mesh_vs:
            ctx.vs = vs
            if (group := vs_group(ctx, services, owners, memo, kept)) is not None:
                groups.append(group)
    claimed = {s.hostname for g in groups for s in g.services}
    # Sorted after the filter: usually a VirtualService claims most services.
    unclaimed = [h for h in services if h not in claimed and http_like(services[h], port)]
    groups += [
        VirtualHostGroup(_default_entry(builder, kept, services[host], port), [services[host]])
        for host in sorted(unclaimed)
    ]
    targets = aliases_by_target(push)  # most services have no alias: no call for them
    aliases = {
        host: found
        for host, svc in (services.items() if targets else ())
        if host in targets and (found := visible_aliases(push, svc, entry.view.imported))
    }
    return build_virtual_hosts(groups, port, proxy.dns_domain, aliases, kept.domains)


def _default_entry(builder: _Builder, kept: ClassRoutes, svc: Service, port: int) -> bytes:
    """The service's default route as a `VirtualHost.routes` entry, kept by its class."""
    key = (svc.hostname, port)
    found = kept.defaults.get(key)
    if found is None:
        route = default_route(svc, port, builder.push, builder.proxy)
        found = kept.defaults[key] = route_entry(route.SerializeToString())
    return found


def _sniffed(vhosts: Sequence[VirtualHostParts], host: str) -> list[VirtualHostParts]:
    """A sniffed service's own route config: just its virtual host, for any Host header."""
    chosen = [v for v in vhosts if host in v.domains]
    if len(chosen) == 1:
        chosen[0] = chosen[0].with_domains(["*"])
    return chosen


def _route_config(
    name: str,
    vhosts: Sequence[VirtualHostParts],
    scope: SidecarScope,
    sniffed_host: str,
    kept: ClassRoutes,
) -> AssembledRouteConfig:
    chosen = _sniffed(vhosts, sniffed_host) if sniffed_host else list(vhosts)
    chosen.sort(key=lambda v: v.name)
    serialized = [kept.vhost_bytes(v) for v in chosen]
    host_names = [v.name for v in chosen]
    if not sniffed_host:
        catch_all = catch_all_virtual_host(scope)
        serialized.append(catch_all.SerializeToString())
        host_names.append(catch_all.name)
    tail = route_pb2.RouteConfiguration(
        validate_clusters=boolean(False),
        max_direct_response_body_size_bytes=u32(MAX_DIRECT_RESPONSE_BODY_BYTES),
        ignore_port_in_host_matching=True,
    )
    return assembled_route_config(name, serialized, tail, host_names)
