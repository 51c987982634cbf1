"""VirtualService HTTP routes -> Envoy routes, shared by sidecars and gateways
(Istio's BuildHTTPRoutesForVirtualService and translateRoute)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from google.protobuf import struct_pb2

from meshpilot.config.istio.virtual_service import HTTPMatchRequest, HTTPRoute
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds import names
from meshpilot.xds.generate.payload_heads import PayloadHeads
from meshpilot.xds.generate.routes.action import apply_route_action
from meshpilot.xds.generate.routes.assembly import operation_parts
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
from meshpilot.xds.wire import field_number, length_delimited

__all__ = [
    "ISTIO_METADATA_KEY",
    "build_http_routes",
    "metadata_field",
    "port_dependent",
    "route_body",
    "route_matches",
    "source_matches",
    "translate_virtual_service",
]

ISTIO_METADATA_KEY = "istio"
_ROUTE_METADATA = field_number(rc.Route.DESCRIPTOR, "metadata")
_FILTER_METADATA = field_number(base_pb2.Metadata.DESCRIPTOR, "filter_metadata")
_STRUCT_FIELDS = field_number(struct_pb2.Struct.DESCRIPTOR, "fields")
_VALUE_STRING = field_number(struct_pb2.Value.DESCRIPTOR, "string_value")
_MAP_KEY, _MAP_VALUE = 1, 2  # every protobuf map entry: key = 1, value = 2
_METADATA_FIELD_MEMO = "routes.metadata.field"
_CONFIG_PATH_MEMO = "routes.metadata.config-path"


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


def route_matches(
    routes: Sequence[HTTPRoute],
) -> Iterator[tuple[int, HTTPRoute, int, HTTPMatchRequest | None]]:
    """(route index, route, match index, match): one per match; a route without match is
    one `/` entry and nothing follows it."""
    for i, route in enumerate(routes):
        if not route.match:
            yield i, route, -1, None
            return
        for j, match in enumerate(route.match):
            yield i, route, j, match


def translate_virtual_service(ctx: RouteContext, routes: Sequence[HTTPRoute]) -> list[rc.Route]:
    """One Envoy route per match (a route without match gets `/`); nothing after a
    catch-all, since Envoy would never reach it."""
    out: list[rc.Route] = []
    for _, route, _, match in route_matches(routes):
        r = translate_route(ctx, route, match)
        if r is None:
            continue
        out.append(r)
        if is_catch_all(r):
            break
    return out


def port_dependent(route: HTTPRoute, match: HTTPMatchRequest | None) -> bool:
    """Does the listener port change this route (beyond its trace decorator)?"""
    if (match is not None and match.port) or route.redirect is not None:
        return True
    # Loops, not a list of destinations: this runs for every route of every VirtualService.
    for d in route.route:
        if d.destination.port is None:
            return True
    for m in route.mirrors:
        if m.destination.port is None:
            return True
    return route.mirror is not None and route.mirror.port is None


def source_matches(ctx: RouteContext, match: HTTPMatchRequest | None) -> bool:
    """A match names gateways, or else constrains the client's labels and namespace."""
    if match is None:
        return True
    if match.gateways:
        return any(g in ctx.gateway_names for g in match.gateways)
    if not match.source_labels:  # the usual match: no generator over an empty dict
        return not match.source_namespace or match.source_namespace == ctx.proxy.namespace
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


def metadata_field(push: PushContext, vs: BoundVirtualService) -> bytes:
    """`Route.metadata` of `vs`'s routes as a serialized field, once per push. Encoded
    directly: building the Struct through upb cost more than the rest of a route."""
    memo = push.memo.get(_METADATA_FIELD_MEMO)
    if memo is None:  # not setdefault: its default dict was made on every call
        memo = push.memo[_METADATA_FIELD_MEMO] = {}
    assert isinstance(memo, dict)
    field = memo.get(vs.obj.key)
    if field is None:
        path = _config_path_prefix(push, vs.namespace) + vs.name
        field = memo[vs.obj.key] = _METADATA_FIELD(path.encode())
    assert isinstance(field, bytes)
    return field


def _config_path_prefix(push: PushContext, namespace: str) -> str:
    """names.config_path of a VirtualService in `namespace` without its name (which ends
    the path), once per namespace: config_path kebab-cases the kind on every call."""
    memo = push.memo.get(_CONFIG_PATH_MEMO)
    if memo is None:
        memo = push.memo[_CONFIG_PATH_MEMO] = {}
    assert isinstance(memo, dict)
    prefix = memo.get(namespace)
    if prefix is None:
        prefix = memo[namespace] = names.config_path("VirtualService", namespace, "")
    assert isinstance(prefix, str)
    return prefix


def _istio_metadata(config_path: bytes) -> bytes:
    """Metadata{filter_metadata{"istio": Struct{fields{"config": Value{string_value}}}}}."""
    value = length_delimited(_VALUE_STRING, config_path)
    fields_entry = length_delimited(_MAP_KEY, b"config") + length_delimited(_MAP_VALUE, value)
    struct = length_delimited(_STRUCT_FIELDS, fields_entry)
    entry = length_delimited(_MAP_KEY, ISTIO_METADATA_KEY.encode())
    return length_delimited(_FILTER_METADATA, entry + length_delimited(_MAP_VALUE, struct))


# `Route.metadata` from the config path: the path is the only variable part, and last.
_METADATA_FIELD = PayloadHeads(
    lambda path: length_delimited(_ROUTE_METADATA, _istio_metadata(path))
)


def _operation(route: rc.Route, vs_name: str, port: int) -> str:
    fixed, path = operation_parts(route)
    return fixed if fixed is not None else f"{vs_name}:{port}{path}"


def translate_route(
    ctx: RouteContext, route: HTTPRoute, match: HTTPMatchRequest | None
) -> rc.Route | None:
    """None when the match is for another port, another client, or another gateway."""
    out = route_body(ctx, route, match)
    if out is None:
        return None
    out.metadata.CopyFrom(_metadata(ctx.push, ctx.vs))
    out.decorator.operation = _operation(out, ctx.vs.name, ctx.port)
    return out


def route_body(
    ctx: RouteContext, route: HTTPRoute, match: HTTPMatchRequest | None
) -> rc.Route | None:
    """`translate_route` without the provenance metadata and the trace decorator, which
    the sidecar path adds as serialized fields (routes/encoded.py)."""
    if match is not None and match.port and match.port != ctx.port:
        return None
    if not source_matches(ctx, match):
        return None
    name = route.name + (f".{match.name}" if match is not None and match.name else "")
    out = rc.Route(name=name, match=route_match(match))
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
    if route.fault is not None:
        out.typed_per_filter_config[Filters.FAULT].CopyFrom(pack(fault(route.fault)))
    if route.cors_policy is not None:
        out.typed_per_filter_config[Filters.CORS].CopyFrom(pack(cors_policy(route.cors_policy)))
    return out
