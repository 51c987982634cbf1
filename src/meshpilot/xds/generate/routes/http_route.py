"""VirtualService HTTP routes -> Envoy routes, shared by sidecars and gateways
(Istio's BuildHTTPRoutesForVirtualService and translateRoute)."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.virtual_service import HTTPMatchRequest, HTTPRoute
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds import names
from meshpilot.xds.generate.routes.action import apply_route_action
from meshpilot.xds.generate.routes.context import (
    RouteContext,
    gateway_service_ports,
    mesh_service_ports,
)
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.headers import header_operations
from meshpilot.xds.generate.routes.match import is_catch_all, route_match
from meshpilot.xds.generate.routes.policies import cors_policy, fault
from meshpilot.xds.generate.routes.redirect import apply_direct_response, apply_redirect
from meshpilot.xds.protos import Filters, pack

__all__ = ["ISTIO_METADATA_KEY", "build_http_routes", "translate_virtual_service"]

ISTIO_METADATA_KEY = "istio"


def build_http_routes(
    push: PushContext,
    proxy: Proxy,
    vs: BoundVirtualService,
    port: int,
    gateway_names: frozenset[str],
    *,
    is_tls: bool = False,
) -> list[rc.Route]:
    """The Envoy routes of `vs` for a listener (or gateway server) on `port`, in order.

    `gateway_names` is {"mesh"} for sidecars, else the `namespace/name` of the gateways
    serving the port; `is_tls` (a TLS-terminating gateway server) only changes which
    redirect port is implicit.
    """
    scope = push.proxy_scope(proxy)  # gateways ignore Sidecar resources
    routes = http_routes(push, vs)
    if MESH_GATEWAY in gateway_names:
        ports = mesh_service_ports(scope, port)
    else:
        ports = gateway_service_ports(push, proxy, scope, vs, routes)
    ctx = RouteContext(push, proxy, scope, vs, port, gateway_names, is_tls, ports)
    return translate_virtual_service(ctx, routes)


def translate_virtual_service(ctx: RouteContext, routes: Sequence[HTTPRoute]) -> list[rc.Route]:
    """One Envoy route per match (a route without match gets `/`); nothing after a
    catch-all, since Envoy would never reach it."""
    out: list[rc.Route] = []
    for i, route in enumerate(routes):
        if not route.match:
            if (r := _translate_shared(ctx, i, route, -1, None)) is not None:
                out.append(r)
            return out
        for j, match in enumerate(route.match):
            r = _translate_shared(ctx, i, route, j, match)
            if r is None:
                continue
            out.append(r)
            if is_catch_all(r):
                return out
    return out


def _port_dependent(route: HTTPRoute, match: HTTPMatchRequest | None) -> bool:
    """Does the listener port change this route (beyond its trace decorator)?"""
    if (match is not None and match.port) or route.redirect is not None:
        return True
    dests = [d.destination for d in route.route] + [m.destination for m in route.mirrors]
    if route.mirror is not None:
        dests.append(route.mirror)
    return any(d.port is None for d in dests)


def _translate_shared(
    ctx: RouteContext, i: int, route: HTTPRoute, j: int, match: HTTPMatchRequest | None
) -> rc.Route | None:
    """A VirtualService's routes usually come out the same on every port of its host: for
    one proxy they are translated once and copied, with the port-bearing decorator redone."""
    if ctx.memo is None:
        return translate_route(ctx, route, match)
    key = (ctx.vs.obj.key, i, j, ctx.port if _port_dependent(route, match) else None)
    if key not in ctx.memo:
        ctx.memo[key] = translate_route(ctx, route, match)
        return ctx.memo[key]
    cached = ctx.memo[key]
    if cached is None:
        return None
    out = rc.Route()
    out.CopyFrom(cached)
    out.decorator.operation = _operation(out, ctx.vs.name, ctx.port)
    return out


def _source_matches(ctx: RouteContext, match: HTTPMatchRequest | None) -> bool:
    """A match names gateways, or else constrains the client's labels and namespace."""
    if match is None:
        return True
    if match.gateways:
        return any(g in ctx.gateway_names for g in match.gateways)
    labels = ctx.proxy.labels
    if not all(k in labels and labels[k] == v for k, v in match.source_labels.items()):
        return False
    return not match.source_namespace or match.source_namespace == ctx.proxy.namespace


def _metadata(push: PushContext, vs: BoundVirtualService) -> base_pb2.Metadata:
    """Provenance metadata: the same for every route of a VirtualService, so built once per
    push and copied into each route."""
    memo = push.memo.setdefault("routes.metadata", {})
    assert isinstance(memo, dict)
    md = memo.get(vs.obj.key)
    if md is None:
        md = memo[vs.obj.key] = base_pb2.Metadata()
        md.filter_metadata[ISTIO_METADATA_KEY].update(
            {"config": names.config_path("VirtualService", vs.namespace, vs.name)}
        )
    return md


def _operation(route: rc.Route, vs_name: str, port: int) -> str:
    """Trace decorator: `host:port<path>` for a single cluster, else `vsname:port<path>`."""
    m = route.match
    kind = m.WhichOneof("path_specifier")
    path = {"prefix": m.prefix + "*", "path": m.path, "safe_regex": m.safe_regex.regex}.get(
        kind or "", "/*"
    )
    parsed = names.parse_cluster_name(route.route.cluster if route.HasField("route") else "")
    if parsed is not None:
        return f"{parsed[3]}:{parsed[1]}{path}"
    return f"{vs_name}:{port}{path}"


def translate_route(
    ctx: RouteContext, route: HTTPRoute, match: HTTPMatchRequest | None
) -> rc.Route | None:
    """None when the match is for another port, another client, or another gateway."""
    if match is not None and match.port and match.port != ctx.port:
        return None
    if not _source_matches(ctx, match):
        return None
    name = route.name + (f".{match.name}" if match is not None and match.name else "")
    out = rc.Route(name=name, match=route_match(match), metadata=_metadata(ctx.push, ctx.vs))
    if match is not None and match.stat_prefix:
        out.stat_prefix = match.stat_prefix
    authority = ""
    if route.headers is not None:
        ops = header_operations(route.headers)
        out.request_headers_to_add.extend(ops.request_add)
        out.response_headers_to_add.extend(ops.response_add)
        out.request_headers_to_remove.extend(ops.request_remove)
        out.response_headers_to_remove.extend(ops.response_remove)
        authority = ops.authority
    if route.redirect is not None:
        if not apply_redirect(out, route.redirect, ctx.port, ctx.is_tls):
            return None
    elif route.direct_response is not None:
        apply_direct_response(out, route.direct_response)
    elif not apply_route_action(ctx, out, route, authority):
        return None
    out.decorator.operation = _operation(out, ctx.vs.name, ctx.port)
    if route.fault is not None:
        out.typed_per_filter_config[Filters.FAULT].CopyFrom(pack(fault(route.fault)))
    if route.cors_policy is not None:
        out.typed_per_filter_config[Filters.CORS].CopyFrom(pack(cors_policy(route.cors_policy)))
    return out
