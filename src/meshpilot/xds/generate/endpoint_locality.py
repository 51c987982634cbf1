"""Per-proxy locality priorities and weights on a shared ClusterLoadAssignment.

EDS assignments are shared by every proxy of a class (endpoints.py). Locality load
balancing makes them depend on the proxy's locality too, and with failoverPriority on its
labels: the localized copies are memoised under exactly those, so two proxies in one zone
still share one, and proxies without locality LB keep the shared assignment untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.config.istio.destination_rule import LocalityLoadBalancerSetting
from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Service
from meshpilot.xds.generate.clusters.locality import (
    apply_locality_lb,
    failover_enabled,
    locality_setting,
    topology_labels,
)
from meshpilot.xds.generate.traffic_policies import push_traffic_policy

__all__ = ["LocalityPlan", "locality_plan", "localize"]

_MEMO = "eds.locality"


@dataclass(frozen=True, slots=True)
class LocalityPlan:
    """How locality LB applies to one cluster for a proxy class (None: it does not)."""

    svc: Service
    port: int
    setting: LocalityLoadBalancerSetting
    failover: bool


def locality_plan(
    push: PushContext,
    svc: Service,
    port: int,
    subset: str,
    rule: BoundDestinationRule | None,
) -> LocalityPlan | None:
    """Whether the cluster's assignment needs a per-proxy copy: decided by the proxy's class
    (scope and DestinationRules) and the mesh config, so it is computed once per class."""
    policy = push_traffic_policy(push, rule, port, subset)
    setting = locality_setting(push.mesh, policy)
    if setting is None:
        return None
    failover = failover_enabled(policy)
    if not (setting.distribute or failover):
        return None
    return LocalityPlan(svc, port, setting, failover)


def localize(
    push: PushContext,
    proxy: Proxy,
    cla: endpoint_pb2.ClusterLoadAssignment,
    plan: LocalityPlan,
) -> endpoint_pb2.ClusterLoadAssignment:
    """`cla` as this proxy must see it, with locality priorities and weights applied."""
    setting, failover = plan.setting, plan.failover
    labels = (
        topology_labels(proxy.labels, proxy.locality)
        if failover and setting.failover_priority and not setting.distribute
        else None
    )
    memo = push.memo.setdefault(_MEMO, {})
    assert isinstance(memo, dict)
    key = (
        cla.cluster_name,
        push.proxy_class(proxy),
        proxy.locality,
        frozenset(labels.items()) if labels is not None else None,
    )
    found = memo.get(key)
    if found is None:
        found = endpoint_pb2.ClusterLoadAssignment()
        found.CopyFrom(cla)
        groups = _group_endpoints(push, plan.svc, plan.port, found)
        apply_locality_lb(found, groups, proxy.locality, labels or {}, setting, failover)
        memo[key] = found
    return found


def _group_endpoints(
    push: PushContext, svc: Service, port: int, cla: endpoint_pb2.ClusterLoadAssignment
) -> list[list[Endpoint]]:
    """The registry endpoints behind each group's lb_endpoints (matched by address), which
    failoverPriority compares by label."""
    by_address = {(ep.address, ep.port): ep for ep in push.endpoints(svc, port)}
    out = []
    for group in cla.endpoints:
        members = []
        for lb in group.lb_endpoints:
            socket = lb.endpoint.address.socket_address
            members.append(by_address.get((socket.address, socket.port_value), Endpoint("", 0, 0)))
        out.append(members)
    return out
