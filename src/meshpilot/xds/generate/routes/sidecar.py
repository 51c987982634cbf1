"""Sidecar outbound route configurations, one per HTTP port (Istio's
buildSidecarOutboundHTTPRouteConfig and BuildSidecarVirtualHostWrapper)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.config.hosts import host_matches, hosts_intersect
from meshpilot.config.keys import ConfigKey
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.model.visibility import visible_to
from meshpilot.registry.model import Protocol, Service
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
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.egress_view import EgressView, egress_entry, egress_view
from meshpilot.xds.generate.routes.encoded import RouteMemo, encoded_virtual_service
from meshpilot.xds.generate.routes.hash_policy import hash_policy, service_hash
from meshpilot.xds.generate.routes.lasting import ClassRoutes, class_routes
from meshpilot.xds.generate.routes.retry import default_retry_policy, retry_policy
from meshpilot.xds.generate.routes.virtual_hosts import (
    VirtualHostGroup,
    build_virtual_hosts,
)
from meshpilot.xds.protos import boolean, u32
from meshpilot.xds.route_edits import route_edits

__all__ = ["generate_sidecar_route_parts", "generate_sidecar_routes"]

REGISTRY_ONLY = "REGISTRY_ONLY"
MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024  # Istio raises Envoy's 4 KiB default
# Istio's "gross hack": on port 80, VirtualService hosts that are no service still get
# virtual hosts (think `bookinfo.com`).
NON_SERVICE_HOSTS_PORT = 80
_LABEL_KEYS_MEMO = "rds.source-label-keys"
_PARTS_MEMO = "rds.parts-by-proxy"


# Protocol.is_http or AUTO, as a set: the property builds a tuple on every call.
_HTTP_LIKE = frozenset(p for p in Protocol if p.is_http or p is Protocol.AUTO)


def _http_like(svc: Service, port: int) -> bool:
    for p in svc.ports:  # Service.port, without a generator: this runs per service and port
        if p.port == port:
            return p.protocol in _HTTP_LIKE
    return False


def _has_port(svc: Service, port: int) -> bool:
    for p in svc.ports:  # noqa: SIM110 (no generator: this runs per service and port)
        if p.port == port:
            return True
    return False


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
    virtual hosts), and working out its class is most of a cached answer (B3). Read only."""
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
        ports = {p.port for s in services for p in s.ports if _http_like(s, p.port)}
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
        if not sniffed_host and (edited := _edited_config(self, name, port)) is not None:
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
            owners = _most_specific_vs(mesh_vs, view.services)
            self.mesh[index] = _EntryMesh(view, mesh_vs, owners)
        return self.mesh[index]


@dataclass(frozen=True, slots=True)
class _EntryMesh:
    view: EgressView
    virtual_services: list[BoundVirtualService]
    owners: dict[str, ConfigKey]


def _most_specific_vs(
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


def _selects(vs: BoundVirtualService, services: Mapping[str, Service]) -> bool:
    """Does any host of `vs` name (or overlap, for wildcards) a service on this port?"""
    hosts = vs.hosts
    for h in hosts:  # the usual answer, without a generator per VirtualService
        if h in services:
            return True
    return any(
        any(hosts_intersect(h, s) for s in services if h.startswith("*") or s.startswith("*"))
        for h in hosts
    )


def _vs_group(
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
    http_services = [s for s in matched if _http_like(s, ctx.port)]
    if not http_services and ctx.port != NON_SERVICE_HOSTS_PORT:
        return None
    return VirtualHostGroup(routes, http_services, vs_hosts)


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
    services = _port_services(kept, scope, port)[1]  # entry.view's services on the port
    service_ports = dict.fromkeys(services, (port,))  # Istio trims services to this port
    if port != NON_SERVICE_HOSTS_PORT:
        mesh_vs = [vs for vs in mesh_vs if _selects(vs, services)]
    groups = []
    if mesh_vs:
        # One context for the port, pointed at each VirtualService in turn (nothing keeps
        # it): a new one per VirtualService was thousands of objects per push.
        mesh = frozenset({MESH_GATEWAY})
        ctx = RouteContext(
            push, proxy, scope, mesh_vs[0], port, mesh, False, service_ports, memo.rules
        )
        for vs in mesh_vs:
            ctx.vs = vs
            if (group := _vs_group(ctx, services, owners, memo, kept)) is not None:
                groups.append(group)
    claimed = {s.hostname for g in groups for s in g.services}
    # Sorted after the filter: usually a VirtualService claims most services.
    unclaimed = [h for h in services if h not in claimed and _http_like(services[h], port)]
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


def _edited_config(builder: _Builder, name: str, port: int) -> AssembledRouteConfig | None:
    """The previous push's config `name` with the routes of the virtual hosts that the
    VirtualServices edited in their routes only own swapped (xds/route_edits.py); None
    when the change was another or this config cannot be shown to be the same otherwise."""
    edits = route_edits(builder.push)
    previous = edits.previous.get(("rds", builder.klass, name)) if edits is not None else None
    if not isinstance(previous, AssembledRouteConfig):
        return None
    assert edits is not None and builder.kept is not None
    push, proxy, scope, kept = builder.push, builder.proxy, builder.scope, builder.kept
    view, services = _port_services(kept, scope, port)
    vhosts = list(previous.virtual_hosts)
    ctx: RouteContext | None = None
    for vs in edits.edited:
        if not _sees(push, proxy, view, vs) or (
            port != NON_SERVICE_HOSTS_PORT and not _selects(vs, services)
        ):
            continue  # no virtual host of this config was or is the VirtualService's
        before = kept.vs_routes.get(port, {}).get(vs.obj.key)  # (object, routes) it had
        if ctx is None:
            mesh, service_ports = frozenset({MESH_GATEWAY}), dict.fromkeys(services, (port,))
            rules = builder.routes.rules
            ctx = RouteContext(push, proxy, scope, vs, port, mesh, False, service_ports, rules)
        ctx.vs = vs
        group = _vs_group(ctx, services, {}, builder.routes, kept)
        if before is None or group is None:
            return None
        hostnames = [s.hostname for s in group.services] + list(group.vs_hosts)
        for hostname in hostnames:
            old = kept.vhosts.get(xds_names.vhost_name(hostname, port))
            i = previous.position(old.name) if old is not None else None
            if old is None or i is None or old.routes is not before[1]:
                return None  # not this VirtualService's virtual host in that config
            if previous.virtual_hosts[i] is not old.serialized:
                return None  # (built for another config since)
            parts = VirtualHostParts(old.name, old.domains, group.routes, old.encoded_domains)
            vhosts[i] = kept.vhost_bytes(parts)
    return previous.edited(tuple(vhosts))


def _port_services(
    kept: ClassRoutes, scope: SidecarScope, port: int
) -> tuple[EgressView, dict[str, Service]]:
    """The egress view of `port`'s route config and its services on the port, by hostname:
    kept by the class (they read only its world: routes/lasting.py)."""
    found = kept.port_services.get(port)
    if found is None:
        view = egress_view(scope, egress_entry(scope, port))
        services = {s.hostname: s for s in view.services if _has_port(s, port)}
        found = kept.port_services[port] = (view, services)
    return found


def _sees(push: PushContext, proxy: Proxy, view: EgressView, vs: BoundVirtualService) -> bool:
    """Is `vs` among the VirtualServices the route config is built from (`_Builder._entry`)?"""
    return (
        MESH_GATEWAY in vs.gateways
        and visible_to(
            vs.obj.model.spec.export_to,
            vs.namespace,
            proxy.namespace,
            push.virtual_services.default_export_to,
        )
        and (view.imported is None or any(view.allows_host(h, vs.namespace) for h in vs.hosts))
    )


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
