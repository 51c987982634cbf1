"""The `route` action of a VirtualService HTTP route: destinations, timeout, rewrite, mirrors,
retries and hash policies (Istio's applyHTTPRouteDestination)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.type.matcher.v3 import regex_pb2

from meshpilot.config.istio.destination_rule import ConsistentHashLB
from meshpilot.config.istio.virtual_service import Destination, HTTPRoute, HTTPRouteDestination
from meshpilot.xds.generate.routes.context import RouteContext
from meshpilot.xds.generate.routes.hash_policy import hash_policy
from meshpilot.xds.generate.routes.headers import header_operations
from meshpilot.xds.generate.routes.policies import fraction_of_hundred, fraction_of_percent
from meshpilot.xds.generate.routes.retry import retry_policy
from meshpilot.xds.protos import boolean

__all__ = ["apply_route_action", "set_timeout"]


def set_timeout(action: rc.RouteAction, timeout_ns: int | None) -> None:
    """`timeout` (0s: none) and the deprecated max_grpc_timeout Istio still sets for Envoy
    sidecars and gateways, so gRPC deadlines do not outlive the route timeout. Set in place:
    a Duration built and copied twice per route showed in generation profiles."""
    seconds, nanos = divmod(timeout_ns or 0, 1_000_000_000)
    for field in (action.timeout, action.max_grpc_timeout):
        field.SetInParent()
        field.seconds = seconds
        field.nanos = nanos


def _mirror_fraction(route: HTTPRoute) -> base_pb2.RuntimeFractionalPercent | None:
    """mirrorPercentage, else the deprecated mirrorPercent, else 100%; an explicit 0 turns
    mirroring off."""
    if route.mirror_percentage is not None:
        if route.mirror_percentage.value <= 0:
            return None
        return base_pb2.RuntimeFractionalPercent(
            default_value=fraction_of_percent(route.mirror_percentage)
        )
    if route.mirror_percent is not None:
        if route.mirror_percent <= 0:
            return None
        return base_pb2.RuntimeFractionalPercent(
            default_value=fraction_of_hundred(route.mirror_percent)
        )
    return base_pb2.RuntimeFractionalPercent(default_value=fraction_of_hundred(100))


def _mirror_policies(
    ctx: RouteContext, route: HTTPRoute
) -> list[rc.RouteAction.RequestMirrorPolicy]:
    targets: list[tuple[Destination, base_pb2.RuntimeFractionalPercent | None]] = []
    if route.mirror is not None:
        targets.append((route.mirror, _mirror_fraction(route)))
    for m in route.mirrors:
        if m.percentage is None:
            fraction = base_pb2.RuntimeFractionalPercent(default_value=fraction_of_hundred(100))
        elif m.percentage.value > 0:
            fraction = base_pb2.RuntimeFractionalPercent(
                default_value=fraction_of_percent(m.percentage)
            )
        else:
            fraction = None
        targets.append((m.destination, fraction))
    return [
        rc.RouteAction.RequestMirrorPolicy(
            cluster=ctx.cluster(dest), runtime_fraction=fraction, trace_sampled=boolean(False)
        )
        for dest, fraction in targets
        if fraction is not None
    ]


def _hash(ctx: RouteContext, dest: Destination) -> ConsistentHashLB | None:
    return ctx.consistent_hash(dest)


def _single(
    ctx: RouteContext, out: rc.Route, action: rc.RouteAction, dst: HTTPRouteDestination
) -> bool:
    """One destination: a plain cluster; its headers join the route's. Returns whether the
    destination uses consistent hashing."""
    action.cluster = ctx.cluster(dst.destination)
    if dst.headers is not None:
        ops = header_operations(dst.headers)
        out.request_headers_to_add.extend(ops.request_add)
        out.request_headers_to_remove.extend(ops.request_remove)
        out.response_headers_to_add.extend(ops.response_add)
        out.response_headers_to_remove.extend(ops.response_remove)
        # A route-level rewrite wins, as with weighted clusters below.
        if ops.authority and action.WhichOneof("host_rewrite_specifier") is None:
            action.host_rewrite_literal = ops.authority
    ch = _hash(ctx, dst.destination)
    if (policy := hash_policy(ch)) is not None:
        action.hash_policy.append(policy)
    return ch is not None


def _weighted(ctx: RouteContext, action: rc.RouteAction, route: HTTPRoute) -> None:
    weighted = action.weighted_clusters
    weighted.SetInParent()
    for dst in route.route:
        if dst.weight == 0:
            continue  # Istio drops weight-0 destinations when there are several
        entry = weighted.clusters.add(name=ctx.cluster(dst.destination))
        entry.weight.value = dst.weight
        if dst.headers is not None:
            ops = header_operations(dst.headers)
            entry.request_headers_to_add.extend(ops.request_add)
            entry.request_headers_to_remove.extend(ops.request_remove)
            entry.response_headers_to_add.extend(ops.response_add)
            entry.response_headers_to_remove.extend(ops.response_remove)
            if ops.authority:
                entry.host_rewrite_literal = ops.authority
        if (policy := hash_policy(_hash(ctx, dst.destination))) is not None:
            action.hash_policy.append(policy)


def _rewrite(action: rc.RouteAction, route: HTTPRoute, authority: str) -> None:
    rewrite = route.rewrite
    if rewrite is not None:
        if rewrite.uri_regex_rewrite is not None:
            action.regex_rewrite.pattern.CopyFrom(
                regex_pb2.RegexMatcher(regex=rewrite.uri_regex_rewrite.match)
            )
            action.regex_rewrite.substitution = rewrite.uri_regex_rewrite.rewrite
        elif rewrite.uri:
            # Istio uses prefix_rewrite for every match kind: with an exact match it
            # replaces the whole path.
            action.prefix_rewrite = rewrite.uri
        authority = rewrite.authority or authority
    if authority:
        action.host_rewrite_literal = authority


def apply_route_action(ctx: RouteContext, out: rc.Route, route: HTTPRoute, authority: str) -> bool:
    """Fill `out.route`; False when the route has no usable destination (Envoy would reject
    an empty weighted_clusters)."""
    if not route.route or (len(route.route) > 1 and all(d.weight == 0 for d in route.route)):
        return False
    action = out.route
    set_timeout(action, route.timeout)
    _rewrite(action, route, authority)
    action.request_mirror_policies.extend(_mirror_policies(ctx, route))
    consistent_hash = False
    if len(route.route) == 1:
        consistent_hash = _single(ctx, out, action, route.route[0])
    else:
        _weighted(ctx, action, route)
    policy = retry_policy(route.retries or ctx.push.mesh.default_http_retry_policy, consistent_hash)
    if policy is not None:
        action.retry_policy.CopyFrom(policy)
    return True
