"""The traffic policy that applies to one port of one subset, merged as Istio merges it."""

from __future__ import annotations

from meshpilot.config.istio.destination_rule import (
    DestinationRule,
    PortTrafficPolicy,
    TrafficPolicy,
)

__all__ = ["effective_traffic_policy"]

_FIELDS = ("load_balancer", "connection_pool", "outlier_detection", "tls")


def _port_level(policy: TrafficPolicy | None, port: int) -> TrafficPolicy | None:
    """Istio's GetPortLevelTrafficPolicy: a matching portLevelSettings entry replaces the
    policy's fields it sets (lb, pool, outlier, tls); unset fields keep the top level."""
    if policy is None or not policy.port_level_settings:
        return policy  # the usual case: no generator to find nothing
    match: PortTrafficPolicy | None = next(
        (p for p in policy.port_level_settings if p.port and p.port.number == port), None
    )
    if match is None:
        return policy
    update = {f: getattr(match, f) for f in _FIELDS if getattr(match, f) is not None}
    return policy.model_copy(update=update)


def effective_traffic_policy(
    rule: DestinationRule | None, port: int, subset: str = ""
) -> TrafficPolicy | None:
    """Top-level policy, then port-level, then the subset's (which overrides field by field)."""
    if rule is None:
        return None
    policy = _port_level(rule.spec.traffic_policy, port)
    if not subset:
        return policy
    sub = next((s for s in rule.spec.subsets if s.name == subset), None)
    if sub is None or sub.traffic_policy is None:
        return policy
    sub_policy = _port_level(sub.traffic_policy, port)
    if policy is None or sub_policy is None:
        return sub_policy or policy
    update = {
        f: getattr(sub_policy, f)
        for f in (*_FIELDS, "tunnel", "proxy_protocol")
        if getattr(sub_policy, f) is not None
    }
    return policy.model_copy(update=update)
