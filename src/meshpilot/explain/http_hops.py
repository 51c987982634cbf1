"""The HTTP part of the outbound walk: connection manager, route configuration, virtual host,
route (and why earlier routes did not match), and the route's action."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.config.kinds import Kind
from meshpilot.explain.action import route_action
from meshpilot.explain.result import ObjectRef, Outcome
from meshpilot.explain.route_match import match_route, match_vhost
from meshpilot.explain.sources import ObjectIndex

if TYPE_CHECKING:
    from meshpilot.explain.walk import _Outbound

__all__ = ["route_config_of", "route_ref", "walk_http", "weighted_note"]


def route_config_of(
    hcm: hcm_pb2.HttpConnectionManager, routes: list[route_pb2.RouteConfiguration]
) -> route_pb2.RouteConfiguration | None:
    if hcm.HasField("route_config"):
        return hcm.route_config
    name = hcm.rds.route_config_name
    return next((r for r in routes if r.name == name), None)


def walk_http(walk: _Outbound, hcm: hcm_pb2.HttpConnectionManager) -> Outcome:
    assert walk.source.config is not None
    req, trail, index = walk.request, walk.trail, walk.scene.index
    filters = [f.name.removeprefix("envoy.filters.http.") for f in hcm.http_filters]
    trail.add(
        "http_connection_manager",
        hcm.stat_prefix,
        "HTTP connection manager",
        (f"HTTP filters: {', '.join(filters)}",),
    )
    config = route_config_of(hcm, walk.source.config.routes)
    if config is None:
        trail.add("route_config", hcm.rds.route_config_name, "the route configuration is missing")
        return Outcome(False, 404, "", "no route configuration", dies_at="route_config", flags="NR")
    trail.add(
        "route_config",
        config.name,
        f"route configuration {config.name} ({len(config.virtual_hosts)} virtual hosts)",
    )
    vh = match_vhost(config, req)
    if vh.vhost is None:
        trail.add("virtual_host", "", f"no virtual host has a domain matching {vh.authority}: 404")
        return Outcome(
            False,
            404,
            "",
            f"no virtual host for {vh.authority} (NR)",
            dies_at="virtual_host",
            flags="NR",
        )
    trail.add(
        "virtual_host",
        vh.vhost.name,
        f"domain {vh.domain!r} matches {vh.authority}",
        (),
        (index.vhost_ref(vh.vhost.name),),
    )
    if vh.vhost.require_tls and req.scheme == "http":
        # Envoy answers before routing: a Gateway server's tls.httpsRedirect.
        trail.add("route", vh.vhost.name, "require_tls: plaintext gets 301 to https://")
        why = f"301 redirect to https://{vh.authority}{req.path} (require_tls)"
        return Outcome(False, 301, "", why, dies_at="virtual_host")
    choice = match_route(vh.vhost, req)
    skipped = tuple(f"route {name} skipped: {why}" for name, why in choice.skipped)
    if choice.route is None:
        trail.add(
            "route",
            vh.vhost.name,
            f"no route in {vh.vhost.name} matches {req.method} {req.path}: 404",
            skipped,
        )
        return Outcome(False, 404, "", "no route matched (NR)", dies_at="route", flags="NR")
    route = choice.route
    ref = route_ref(index, vh.vhost, choice.index)
    trail.add(
        "route",
        route.name or f"#{choice.index}",
        f"route #{choice.index} {_match_text(route.match)} matches",
        skipped,
        (ref,),
    )
    action = route_action(route)
    trail.add(
        "action",
        route.name or f"#{choice.index}",
        _action_summary(action.clusters, action.direct_code),
        action.details,
        (ref,),
    )
    if action.direct_code is not None and vh.vhost.name == "block_all":
        why = f"outboundTrafficPolicy REGISTRY_ONLY: {vh.authority} is not in the registry"
        return Outcome(False, action.direct_code, "", why, dies_at="action")
    if action.direct_code is not None:
        return Outcome(
            False,
            action.direct_code,
            "",
            f"answered by the route with {action.direct_code}",
            dies_at="action",
        )
    if action.abort_code is not None:
        return Outcome(
            False,
            action.abort_code,
            action.chosen,
            f"fault injection aborts with {action.abort_code}",
            dies_at="action",
            flags="FI",
        )
    if 0 < action.abort_share < 1:
        walk.notes.append(f"fault injection aborts {100 * action.abort_share:g}% of these requests")
    branches = tuple((c, w) for c, w in action.clusters if w > 0)
    if len(branches) > 1:
        walk.notes.append(weighted_note(branches, action.chosen, walk.request.request_id))
        return replace(walk.to_cluster(action.chosen, http=True), branches=branches)
    return walk.to_cluster(action.chosen, http=True)


def weighted_note(branches: tuple[tuple[str, int], ...], chosen: str, request_id: str) -> str:
    """Envoy draws a weighted route's branch at random for each request: no header (not
    even x-request-id) decides it, so explain can only give the odds."""
    total = sum(w for _, w in branches) or 1
    shares = ", ".join(f"{c} {100 * w / total:g}%" for c, w in branches)
    which = f"request {request_id}" if request_id else "each request"
    return (
        f"weighted route: Envoy picks the branch for {which} at random with these shares "
        f"({shares}); this walk follows the heaviest, {chosen}"
    )


def _action_summary(clusters: tuple[tuple[str, int], ...], direct: int | None) -> str:
    if direct is not None:
        return f"answers {direct} itself"
    if len(clusters) == 1:
        return f"route to {clusters[0][0]}"
    return f"split over {len(clusters)} clusters by weight"


def _match_text(m: rc.RouteMatch) -> str:
    spec = m.WhichOneof("path_specifier") or "prefix"
    value = m.safe_regex.regex if spec == "safe_regex" else getattr(m, spec)
    parts = [f"{spec} {value}"]
    parts += [f"header {h.name}" for h in m.headers]
    return "(" + ", ".join(parts) + ")"


def route_ref(index: ObjectIndex, vhost: rc.VirtualHost, position: int) -> ObjectRef | None:
    """The VirtualService (and `spec.http[i].match[j]`) a route came from."""
    route = vhost.routes[position]
    config = _config(route)
    if not config:
        return None
    plain = index.from_path(config)
    if plain is None:
        return None
    obj = index.get(Kind(plain.kind), plain.namespace, plain.name)
    http: list[Any] = (
        list(getattr(getattr(obj.model, "spec", None), "http", None) or []) if obj else []
    )
    # Envoy routes from one VirtualService follow its http list, one per match (or one).
    k = sum(1 for r in vhost.routes[:position] if _config(r) == config)
    for i, h in enumerate(http):
        if route.name and h.name == route.name:
            return index.from_path(config, ("spec", "http", i))
    for i, h in enumerate(http):
        count = max(1, len(h.match or []))
        if k < count:
            path: tuple[str | int, ...] = (
                ("spec", "http", i, "match", k) if h.match else ("spec", "http", i)
            )
            return index.from_path(config, path)
        k -= count
    return plain


def _config(route: rc.Route) -> str:
    md = route.metadata.filter_metadata
    if "istio" not in md or "config" not in md["istio"].fields:
        return ""
    return str(md["istio"].fields["config"].string_value)
