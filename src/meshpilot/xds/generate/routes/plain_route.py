"""Plain sidecar routes encoded straight to bytes, without a upb Route per route.

Most VirtualService HTTP routes are plain: a match, one destination or a weighted split,
a timeout, retries and perhaps consistent hashing. Building each as a upb Route (action,
weighted clusters, durations, a copied retry policy) cost more than the rest of route
generation; here the route is written as its serialized fields. Only the match is still
built as a message when it is not simple (match_bytes.py), and the few shared parts (timeout,
retry policy, hash policy) are serialized from messages once per distinct value, so the
result parses to exactly the message route_body would build. Routes with anything else
(redirects, header operations, rewrites, mirrors, faults, CORS) take route_body's path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.destination_rule import ConsistentHashLB
from meshpilot.config.istio.virtual_service import (
    Destination,
    HTTPMatchRequest,
    HTTPRetry,
    HTTPRoute,
)
from meshpilot.xds.generate.routes.action import set_timeout
from meshpilot.xds.generate.routes.assembly import (
    EncodedRoute,
    encoded_route,
    fixed_operation,
    match_path,
)
from meshpilot.xds.generate.routes.context import RouteContext
from meshpilot.xds.generate.routes.hash_policy import hash_policy
from meshpilot.xds.generate.routes.http_route import source_matches
from meshpilot.xds.generate.routes.match import matches_everything, route_match
from meshpilot.xds.generate.routes.match_bytes import simple_match
from meshpilot.xds.generate.routes.retry import retry_policy
from meshpilot.xds.wire import field_number, length_delimited, varint

__all__ = ["PlainParts", "encode_plain_route", "is_plain"]


def is_plain(route: HTTPRoute) -> bool:
    """Does the route use only what `encode_plain_route` writes?"""
    if not (
        route.redirect is None
        and route.direct_response is None
        and route.headers is None
        and route.rewrite is None
        and route.fault is None
        and route.cors_policy is None
        and route.mirror is None
        and not route.mirrors
    ):
        return False
    for d in route.route:  # noqa: SIM110 (a loop, not all(): this runs for every route)
        if d.headers is not None or d.weight < 0:
            return False
    return True


@dataclass(slots=True)
class PlainParts:
    """The serialized RouteAction fields many routes share, by the value they come from."""

    timeouts: dict[int | None, bytes] = field(default_factory=dict)
    retries: dict[tuple[HTTPRetry | None, bool], bytes] = field(default_factory=dict)
    # By id: the entry keeps the (DestinationRule's) settings alive, so ids stay unique.
    hashes: dict[int, tuple[ConsistentHashLB, bytes]] = field(default_factory=dict)
    # A destination's cluster and consistent hash, by what decides them for one sidecar:
    # VirtualService namespace, host, subset, explicit port, listener port (one string:
    # thousands of key tuples were work for the garbage collector).
    clusters: dict[str, str] = field(default_factory=dict)
    consistent_hashes: dict[str, ConsistentHashLB | None] = field(default_factory=dict)
    # By cluster name: its `RouteAction.cluster` field (the same bytes as a weighted
    # cluster's `name`), and `host:port` of its fixed trace decorator (None: not outbound).
    cluster_fields: dict[str, bytes] = field(default_factory=dict)
    operations: dict[str, str | None] = field(default_factory=dict)
    weights: dict[int, bytes] = field(default_factory=dict)  # ClusterWeight.weight fields

    def timeout(self, timeout_ns: int | None) -> bytes:
        found = self.timeouts.get(timeout_ns)
        if found is None:
            action = rc.RouteAction()
            set_timeout(action, timeout_ns)
            found = self.timeouts[timeout_ns] = action.SerializeToString()
        return found

    def retry(self, retries: HTTPRetry | None, consistent_hash: bool) -> bytes:
        key = (retries, consistent_hash)
        found = self.retries.get(key)
        if found is None:
            policy = retry_policy(retries, consistent_hash)
            found = self.retries[key] = (
                b"" if policy is None else length_delimited(_RETRY, policy.SerializeToString())
            )
        return found

    def hash(self, ch: ConsistentHashLB | None) -> bytes:
        if ch is None:
            return b""
        found = self.hashes.get(id(ch))
        if found is None or found[0] is not ch:
            policy = hash_policy(ch)
            encoded = b"" if policy is None else length_delimited(_HASH, policy.SerializeToString())
            found = self.hashes[id(ch)] = (ch, encoded)
        return found[1]

    def destination(
        self, ctx: RouteContext, dest: Destination
    ) -> tuple[str, ConsistentHashLB | None]:
        """(cluster, consistent hash) of `dest`; sidecar contexts only (their service ports
        depend on the listener port alone)."""
        port = dest.port.number if dest.port else ""
        key = f"{ctx.vs.namespace}/{dest.host}/{dest.subset}/{port}/{ctx.port}"
        cluster = self.clusters.get(key)
        if cluster is None:
            host = ctx.host(dest)
            cluster = self.clusters[key] = ctx.cluster_of(dest, host)
            self.consistent_hashes[key] = ctx.consistent_hash_of(dest, host)
        return cluster, self.consistent_hashes[key]

    def cluster_field(self, cluster: str) -> bytes:
        found = self.cluster_fields.get(cluster)
        if found is None:
            found = self.cluster_fields[cluster] = length_delimited(_CLUSTER, cluster.encode())
        return found

    def weight_field(self, weight: int) -> bytes:
        found = self.weights.get(weight)
        if found is None:
            found = self.weights[weight] = length_delimited(
                _CW_WEIGHT, _UINT32_VALUE + varint(weight)
            )
        return found

    def operation(self, cluster: str, path: str) -> str | None:
        """assembly.fixed_operation, the cluster name parsed once."""
        if cluster in self.operations:
            prefix = self.operations[cluster]
        else:
            prefix = self.operations[cluster] = fixed_operation(cluster, "")
        return None if prefix is None else prefix + path


def encode_plain_route(
    ctx: RouteContext,
    route: HTTPRoute,
    match: HTTPMatchRequest | None,
    extra: bytes,
    parts: PlainParts,
) -> EncodedRoute | None:
    """route_body + encode_route for a plain route (`is_plain`); None as route_body."""
    if match is not None and match.port and match.port != ctx.port:
        return None
    if not source_matches(ctx, match):
        return None
    dests = route.route
    if not dests or (len(dests) > 1 and all(d.weight == 0 for d in dests)):
        return None  # no usable destination (as apply_route_action)
    name = route.name + (f".{match.name}" if match is not None and match.name else "")
    out = [length_delimited(_NAME, name.encode())] if name else []
    if match is None:
        out.append(_MATCH_ALL)
        path, catch_all = _MATCH_ALL_PATH, True
    else:
        simple = simple_match(match)
        if simple is None:
            m = route_match(match)
            serialized, path, catch_all = (
                m.SerializeToString(),
                match_path(m),
                matches_everything(m),
            )
        else:
            serialized, path, catch_all = simple
        out.append(length_delimited(_MATCH, serialized))
        if match.stat_prefix:
            out.append(length_delimited(_STAT_PREFIX, match.stat_prefix.encode()))
    action = [parts.timeout(route.timeout)]
    cluster = ""
    hashed = False
    if len(dests) == 1:
        cluster, ch = parts.destination(ctx, dests[0].destination)
        action.append(parts.cluster_field(cluster))
        hashed = ch is not None
        action.append(parts.hash(ch))
    else:
        entries = []
        for d in dests:
            if d.weight == 0:
                continue  # Istio drops weight-0 destinations when there are several
            weighted_cluster, ch = parts.destination(ctx, d.destination)
            entry = parts.cluster_field(weighted_cluster) + parts.weight_field(d.weight)
            entries.append(length_delimited(_WC_CLUSTERS, entry))
            action.append(parts.hash(ch))
        action.append(length_delimited(_WEIGHTED, b"".join(entries)))
    action.append(parts.retry(route.retries or ctx.push.mesh.default_http_retry_policy, hashed))
    out.append(length_delimited(_ACTION, b"".join(action)))
    out.append(extra)
    fixed = parts.operation(cluster, path) if cluster else None  # weighted: names the port
    return encoded_route(b"".join(out), ctx.vs.name, path, fixed, catch_all)


_NAME = field_number(rc.Route.DESCRIPTOR, "name")
_MATCH = field_number(rc.Route.DESCRIPTOR, "match")
_ACTION = field_number(rc.Route.DESCRIPTOR, "route")
_STAT_PREFIX = field_number(rc.Route.DESCRIPTOR, "stat_prefix")
_CLUSTER = field_number(rc.RouteAction.DESCRIPTOR, "cluster")
_WEIGHTED = field_number(rc.RouteAction.DESCRIPTOR, "weighted_clusters")
_RETRY = field_number(rc.RouteAction.DESCRIPTOR, "retry_policy")
_HASH = field_number(rc.RouteAction.DESCRIPTOR, "hash_policy")
_WC_CLUSTERS = field_number(rc.WeightedCluster.DESCRIPTOR, "clusters")
_CW_NAME = field_number(rc.WeightedCluster.ClusterWeight.DESCRIPTOR, "name")
_CW_WEIGHT = field_number(rc.WeightedCluster.ClusterWeight.DESCRIPTOR, "weight")
_UINT32_VALUE = b"\x08"  # google.protobuf.UInt32Value.value: field 1, varint
# PlainParts.cluster_field serves both: RouteAction.cluster and ClusterWeight.name.
assert _CW_NAME == _CLUSTER
# A route without match: `/` (route_match(None)), which matches everything.
_MATCH_ALL_MESSAGE = route_match(None)
_MATCH_ALL = length_delimited(_MATCH, _MATCH_ALL_MESSAGE.SerializeToString())
_MATCH_ALL_PATH = match_path(_MATCH_ALL_MESSAGE)
assert matches_everything(_MATCH_ALL_MESSAGE)
