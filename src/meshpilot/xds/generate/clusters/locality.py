"""Locality load balancing (DestinationRule `loadBalancer.localityLbSetting`, or the mesh's
`localityLbSetting`) as Istio's loadbalancer package applies it.

- `distribute`: for the first rule whose `from` matches the proxy's locality, each
  LocalityLbEndpoints matching a `to` key gets that share of the weight (split over the
  groups a wildcard key matches, rounded up); groups matching no key lose their endpoints.
- failover (only with outlierDetection, else Envoy never leaves priority 0): priorities by
  how much of region/zone/subzone a group shares with the proxy (0..3), 4 for a region
  other than the `failover` rule's `to`; with `failoverPriority`, groups are first split by
  how many of the listed labels an endpoint shares with the proxy. Priorities are then
  renumbered 0..N without gaps.

The cluster gets `locality_weighted_lb_config` when weights are meant to count.
The endpoints then depend on the proxy's locality (and labels, for failoverPriority): EDS
keys its per-proxy copies by those (see endpoint_locality.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from pydantic import ValidationError

from meshpilot.config.istio.destination_rule import LocalityLoadBalancerSetting, TrafficPolicy
from meshpilot.config.mesh import MeshConfig
from meshpilot.registry.model import Endpoint, Locality

__all__ = [
    "TOPOLOGY_LABELS",
    "apply_locality_cluster",
    "apply_locality_lb",
    "locality_setting",
    "topology_labels",
]

REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
SUBZONE_LABEL = "topology.istio.io/subzone"
NETWORK_LABEL = "topology.istio.io/network"
TOPOLOGY_LABELS = (REGION_LABEL, ZONE_LABEL, SUBZONE_LABEL)
_OVERRIDE_SEPARATOR = "="


def locality_setting(
    mesh: MeshConfig, policy: TrafficPolicy | None
) -> LocalityLoadBalancerSetting | None:
    """Istio's GetLocalityLbSetting: the DestinationRule's setting wins over the mesh's;
    either switched off by `enabled: false`."""
    lb = policy.load_balancer if policy else None
    rule = lb.locality_lb_setting if lb else None
    if rule is not None:
        return None if rule.enabled is False else rule
    if mesh.locality_lb_setting is None:
        return None
    setting = _mesh_setting(mesh)
    return None if setting.enabled is False else setting


def _mesh_setting(mesh: MeshConfig) -> LocalityLoadBalancerSetting:
    # MeshConfig keeps it untyped: a malformed one is ignored here, as if unset.
    try:
        return LocalityLoadBalancerSetting.model_validate(mesh.locality_lb_setting)
    except ValidationError:
        return LocalityLoadBalancerSetting(enabled=False)


def failover_enabled(policy: TrafficPolicy | None) -> bool:
    """Failover needs outlier detection: without ejection Envoy never leaves priority 0."""
    return policy is not None and policy.outlier_detection is not None


def apply_locality_cluster(
    cluster: cluster_pb2.Cluster, mesh: MeshConfig, policy: TrafficPolicy | None
) -> None:
    """Locality-weighted LB on the cluster when distribute or an explicit failover applies
    (Istio sets it only then: otherwise it would change how LEAST_REQUEST picks hosts)."""
    setting = locality_setting(mesh, policy)
    if setting is None or cluster.type == cluster_pb2.Cluster.ORIGINAL_DST:
        return
    explicit_failover = bool(setting.failover or setting.failover_priority)
    if setting.distribute or (failover_enabled(policy) and explicit_failover):
        cluster.common_lb_config.locality_weighted_lb_config.SetInParent()


def topology_labels(
    labels: Mapping[str, str], locality: Locality, network: str = ""
) -> dict[str, str]:
    """Labels with the topology labels Istio adds from the locality (for failoverPriority)."""
    out = dict(labels)
    for key, value in zip(
        TOPOLOGY_LABELS, (locality.region, locality.zone, locality.subzone), strict=True
    ):
        if value:
            out.setdefault(key, value)
    if network:
        out.setdefault(NETWORK_LABEL, network)
    return out


def apply_locality_lb(
    cla: endpoint_pb2.ClusterLoadAssignment,
    group_endpoints: Sequence[Sequence[Endpoint]],
    proxy_locality: Locality,
    proxy_labels: Mapping[str, str],
    setting: LocalityLoadBalancerSetting,
    enable_failover: bool,
) -> None:
    """Istio's ApplyLocalityLoadBalancer, in place. `group_endpoints[i]` are the registry
    endpoints of `cla.endpoints[i]`, in the same order as its lb_endpoints."""
    if setting.distribute:
        _apply_weights(cla, proxy_locality, setting.distribute)
    elif enable_failover:
        if setting.failover_priority:
            _apply_failover_priorities(
                cla, group_endpoints, proxy_labels, setting.failover_priority
            )
            if setting.failover:
                _apply_failover(cla, proxy_locality, setting.failover)
        else:
            _apply_failover(cla, proxy_locality, setting.failover)


def _split(rule_locality: str) -> tuple[str, str, str]:
    parts = [*rule_locality.split("/"), "", "", ""]
    return parts[0], parts[1], parts[2]


def locality_match(locality: base_pb2.Locality, rule_locality: str) -> bool:
    """Istio's LocalityMatch: `region/zone/subzone` with `*` (or a missing part) matching any."""
    region, zone, subzone = _split(rule_locality)
    return (
        (region == "*" or locality.region == region)
        and (zone in ("*", "") or locality.zone == zone)
        and (subzone in ("*", "") or locality.sub_zone == subzone)
    )


def _proto_locality(locality: Locality) -> base_pb2.Locality:
    return base_pb2.Locality(region=locality.region, zone=locality.zone, sub_zone=locality.subzone)


def _apply_weights(
    cla: endpoint_pb2.ClusterLoadAssignment,
    proxy_locality: Locality,
    distribute: Sequence[Mapping[str, object]],
) -> None:
    proxy = _proto_locality(proxy_locality)
    for rule in distribute:
        if not locality_match(proxy, str(rule.get("from", ""))):
            continue
        unmatched = set(range(len(cla.endpoints)))
        targets = rule.get("to") or {}
        assert isinstance(targets, Mapping)
        for to, weight in targets.items():
            original: dict[int, int] = {}
            for i, group in enumerate(cla.endpoints):
                if i in unmatched and locality_match(group.locality, str(to)):
                    unmatched.discard(i)
                    has_weight = group.HasField("load_balancing_weight")
                    original[i] = group.load_balancing_weight.value if has_weight else 1
            total = sum(original.values())
            for i, own in original.items():
                share = own * int(str(weight)) / total
                if share > 0:
                    cla.endpoints[i].load_balancing_weight.value = math.ceil(share)
        for i in unmatched:
            del cla.endpoints[i].lb_endpoints[:]
        return


def lb_priority(proxy: Locality, group: base_pb2.Locality) -> int:
    """0: same subzone, 1: same zone, 2: same region, 3: another region."""
    if proxy.region != group.region:
        return 3
    if proxy.zone != group.zone:
        return 2
    return 0 if proxy.subzone == group.sub_zone else 1


def _apply_failover(
    cla: endpoint_pb2.ClusterLoadAssignment,
    proxy_locality: Locality,
    failover: Sequence[Mapping[str, str]],
) -> None:
    for group in cla.endpoints:
        priority = lb_priority(proxy_locality, group.locality)
        if priority == 3:
            for rule in failover:
                if rule.get("from") == proxy_locality.region:
                    if group.locality.region != rule.get("to"):
                        priority = 4  # not the region the rule fails over to: last
                    break
        # Up to 5 locality priorities nest inside the ones failoverPriority assigned.
        group.priority = group.priority * 5 + priority
    _renumber(cla.endpoints)


def _renumber(groups: Sequence[ec_pb2.LocalityLbEndpoints]) -> None:
    """Envoy wants priorities 0..N without gaps."""
    rank = {p: i for i, p in enumerate(sorted({g.priority for g in groups}))}
    for g in groups:
        g.priority = rank[g.priority]


def _apply_failover_priorities(
    cla: endpoint_pb2.ClusterLoadAssignment,
    group_endpoints: Sequence[Sequence[Endpoint]],
    proxy_labels: Mapping[str, str],
    failover_priority: Sequence[str],
) -> None:
    if not proxy_labels or not cla.endpoints:
        return
    names: list[str] = []
    overrides: dict[str, str] = {}
    for entry in failover_priority:
        name, sep, value = entry.partition(_OVERRIDE_SEPARATOR)
        names.append(name)
        if sep:
            overrides[name] = value
    lowest = len(names)
    split: list[ec_pb2.LocalityLbEndpoints] = []
    for group, endpoints in zip(cla.endpoints, group_endpoints, strict=True):
        by_priority: dict[int, list[int]] = {}
        for i, ep in enumerate(endpoints):
            labels = topology_labels(ep.labels, ep.locality, ep.network)
            priority = 0
            for j, name in enumerate(names):
                if overrides.get(name, proxy_labels.get(name)) != labels.get(name):
                    priority = lowest - j
                    break
            by_priority.setdefault(priority, []).append(i)
        for priority in sorted(by_priority):
            part = ec_pb2.LocalityLbEndpoints(priority=priority)
            if group.HasField("locality"):
                part.locality.CopyFrom(group.locality)
            members = [group.lb_endpoints[i] for i in by_priority[priority]]
            part.lb_endpoints.extend(members)
            weight = sum(m.load_balancing_weight.value for m in members)
            part.load_balancing_weight.value = min(weight, 2**32 - 1)  # Envoy's uint32
            split.append(part)
    del cla.endpoints[:]
    cla.endpoints.extend(split)
    _renumber(cla.endpoints)
