"""A sidecar route config edited from the previous push's after a VirtualService's routes
alone changed (xds/route_edits.py says when): the virtual hosts that VirtualService owned in
that very config get its new routes; everything else is the previous config's."""

from __future__ import annotations

from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.model.visibility import visible_to
from meshpilot.xds import names as xds_names
from meshpilot.xds.generate.routes.assembly import AssembledRouteConfig, VirtualHostParts
from meshpilot.xds.generate.routes.context import RouteContext
from meshpilot.xds.generate.routes.egress_view import EgressView
from meshpilot.xds.generate.routes.encoded import RouteMemo
from meshpilot.xds.generate.routes.lasting import ClassRoutes
from meshpilot.xds.generate.routes.vs_groups import (
    NON_SERVICE_HOSTS_PORT,
    port_services,
    selects,
    vs_group,
)
from meshpilot.xds.route_edits import route_edits

__all__ = ["edited_config"]


def edited_config(
    push: PushContext,
    proxy: Proxy,
    scope: SidecarScope,
    klass: object,
    kept: ClassRoutes,
    memo: RouteMemo,
    name: str,
    port: int,
) -> AssembledRouteConfig | None:
    """The previous push's config `name` with the routes of the virtual hosts that the
    VirtualServices edited in their routes only own swapped (xds/route_edits.py); None
    when the change was another or this config cannot be shown to be the same otherwise."""
    edits = route_edits(push)
    previous = edits.previous.get(("rds", klass, name)) if edits is not None else None
    if not isinstance(previous, AssembledRouteConfig):
        return None
    assert edits is not None
    view, services = port_services(kept, scope, port)
    vhosts = list(previous.virtual_hosts)
    ctx: RouteContext | None = None
    for vs in edits.edited:
        if not _sees(push, proxy, view, vs) or (
            port != NON_SERVICE_HOSTS_PORT and not selects(vs, services)
        ):
            continue  # no virtual host of this config was or is the VirtualService's
        before = kept.vs_routes.get(port, {}).get(vs.obj.key)  # (object, routes) it had
        if ctx is None:
            mesh, service_ports = frozenset({MESH_GATEWAY}), dict.fromkeys(services, (port,))
            rules = memo.rules
            ctx = RouteContext(push, proxy, scope, vs, port, mesh, False, service_ports, rules)
        ctx.vs = vs
        group = vs_group(ctx, services, {}, memo, kept)
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


def _sees(push: PushContext, proxy: Proxy, view: EgressView, vs: BoundVirtualService) -> bool:
    """Is `vs` among the VirtualServices the route config is built from (as
    routes/sidecar.py `_Builder._entry` chooses them)?"""
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
