"""Route hash policies from a DestinationRule's consistentHash (ring hash / Maglev keys)."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.destination_rule import ConsistentHashLB, DestinationRule, TrafficPolicy
from meshpilot.config.istio.virtual_service import Destination
from meshpilot.xds.protos import duration

__all__ = ["destination_hash", "hash_policy", "hashes_anywhere", "service_hash"]

_Hash = rc.RouteAction.HashPolicy


def _consistent_hash(policy: TrafficPolicy | None) -> ConsistentHashLB | None:
    lb = policy.load_balancer if policy is not None else None
    return lb.consistent_hash if lb is not None else None


def _port_level_hash(policy: TrafficPolicy | None, port: int) -> ConsistentHashLB | None:
    if policy is None:
        return None
    for setting in policy.port_level_settings:
        if setting.port is not None and setting.port.number == port:
            lb = setting.load_balancer
            return lb.consistent_hash if lb is not None else None
    return None


def service_hash(rule: DestinationRule | None, port: int) -> ConsistentHashLB | None:
    """A default route's hash: the rule's, replaced by the port's own when it sets one."""
    if rule is None:
        return None
    policy = rule.spec.traffic_policy
    return _port_level_hash(policy, port) or _consistent_hash(policy)


def hashes_anywhere(rule: DestinationRule) -> bool:
    """Does any traffic policy of the rule (top level, port level, subsets) set a consistent
    hash? When none does, `destination_hash` is None for every destination."""
    policies = [rule.spec.traffic_policy, *(s.traffic_policy for s in rule.spec.subsets)]
    for policy in policies:
        if policy is None:
            continue
        if _consistent_hash(policy) is not None:
            return True
        for setting in policy.port_level_settings:
            if setting.load_balancer is not None and setting.load_balancer.consistent_hash:
                return True
    return False


def destination_hash(rule: DestinationRule | None, dest: Destination) -> ConsistentHashLB | None:
    """Istio's HashForHTTPDestination: subset port-level, subset, port-level (only with an
    explicit destination port), then top level."""
    if rule is None:
        return None
    policy = rule.spec.traffic_policy
    explicit_port = dest.port.number if dest.port is not None else None
    subset = next((s for s in rule.spec.subsets if s.name == dest.subset), None)
    candidates = []
    if subset is not None:
        if explicit_port is not None:
            candidates.append(_port_level_hash(subset.traffic_policy, explicit_port))
        candidates.append(_consistent_hash(subset.traffic_policy))
    if explicit_port is not None:
        candidates.append(_port_level_hash(policy, explicit_port))
    candidates.append(_consistent_hash(policy))
    return next((c for c in candidates if c is not None), None)


def hash_policy(ch: ConsistentHashLB | None) -> rc.RouteAction.HashPolicy | None:
    if ch is None:
        return None
    if ch.http_header_name is not None:
        return _Hash(header=_Hash.Header(header_name=ch.http_header_name))
    if ch.http_cookie is not None:
        cookie = _Hash.Cookie(name=ch.http_cookie.name, path=ch.http_cookie.path)
        if ch.http_cookie.ttl is not None:
            cookie.ttl.CopyFrom(duration(ch.http_cookie.ttl))
        return _Hash(cookie=cookie)
    if ch.use_source_ip is not None:
        return _Hash(connection_properties=_Hash.ConnectionProperties(source_ip=ch.use_source_ip))
    if ch.http_query_parameter_name is not None:
        return _Hash(query_parameter=_Hash.QueryParameter(name=ch.http_query_parameter_name))
    return None
