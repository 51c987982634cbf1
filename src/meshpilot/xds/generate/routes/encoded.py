"""A VirtualService's sidecar routes as serialized `VirtualHost.routes` entries.

A VirtualService's routes usually come out the same on every port of its host: for one
proxy each route is translated and serialized once (plain routes straight to bytes,
plain_route.py), and only its trace decorator, which names the listener port, is redone
per port (routes/assembly.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from meshpilot.config.istio.virtual_service import HTTPMatchRequest, HTTPRoute
from meshpilot.config.keys import ConfigKey
from meshpilot.xds.generate.routes.assembly import EncodedRoute, encode_route
from meshpilot.xds.generate.routes.context import DestinationMemo, RouteContext
from meshpilot.xds.generate.routes.http_route import (
    metadata_field,
    port_dependent,
    route_body,
    route_matches,
)
from meshpilot.xds.generate.routes.match import is_catch_all
from meshpilot.xds.generate.routes.plain_route import PlainParts, encode_plain_route, is_plain

__all__ = ["RouteMemo", "encoded_virtual_service"]


@dataclass(slots=True)
class _VsRoutes:
    """One VirtualService's matches, in order: (route, match, port dependent), and what
    each came out as, by (match position, listener port if the route depends on it)."""

    plan: list[tuple[HTTPRoute, HTTPMatchRequest | None, bool]]
    metadata: bytes  # Route.metadata, the same for all its routes (http_route.metadata_field)
    encoded: dict[tuple[int, int | None], EncodedRoute | None] = field(default_factory=dict)


@dataclass(slots=True)
class RouteMemo:
    """The routes one proxy's VirtualServices came out as (shared by its ports), and the
    DestinationRules of their destinations (RouteContext.rules)."""

    by_vs: dict[ConfigKey, _VsRoutes] = field(default_factory=dict)
    rules: DestinationMemo = field(default_factory=DestinationMemo)
    parts: PlainParts = field(default_factory=PlainParts)


def encoded_virtual_service(
    ctx: RouteContext, routes: Sequence[HTTPRoute], memo: RouteMemo
) -> bytes:
    """`http_route.translate_virtual_service` as serialized route entries."""
    vs = memo.by_vs.get(ctx.vs.obj.key)
    if vs is None:
        plan = [(r, m, port_dependent(r, m)) for _, r, _, m in route_matches(routes)]
        vs = memo.by_vs[ctx.vs.obj.key] = _VsRoutes(plan, metadata_field(ctx.push, ctx.vs))
    out: list[bytes] = []
    for n, (route, match, by_port) in enumerate(vs.plan):
        key = (n, ctx.port if by_port else None)
        if key in vs.encoded:
            encoded = vs.encoded[key]
        else:
            encoded = vs.encoded[key] = _encode(ctx, route, match, vs.metadata, memo.parts)
        if encoded is None:
            continue
        out.append(encoded.entry(ctx.port))
        if encoded.catch_all:
            break
    return b"".join(out)


def _encode(
    ctx: RouteContext,
    route: HTTPRoute,
    match: HTTPMatchRequest | None,
    extra: bytes,
    parts: PlainParts,
) -> EncodedRoute | None:
    if is_plain(route):
        return encode_plain_route(ctx, route, match, extra, parts)
    body = route_body(ctx, route, match)
    if body is None:
        return None
    return encode_route(body, ctx.vs.name, is_catch_all(body), extra)
