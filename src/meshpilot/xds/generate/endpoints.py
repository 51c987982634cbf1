"""Endpoints (EDS): ClusterLoadAssignments grouped by locality, with Istio's endpoint metadata
(encoded in endpoint_groups.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, cast

from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Service
from meshpilot.xds.generate.batch_parse import parse_many
from meshpilot.xds.generate.endpoint_groups import assignment_endpoints, group_bytes
from meshpilot.xds.names import parse_cluster_name
from meshpilot.xds.wire import field_number, length_delimited

if TYPE_CHECKING:
    from meshpilot.xds.generate.endpoint_locality import LocalityPlan

__all__ = ["generate_endpoints", "locality_endpoints"]


def generate_endpoints(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[endpoint_pb2.ClusterLoadAssignment]:
    """One assignment per requested outbound cluster name whose service uses EDS. Proxies of
    one class share the assignments (built once per push)."""
    # Imported here: endpoint_locality -> clusters -> clusters.outbound -> this module.
    from meshpilot.xds.generate.endpoint_locality import locality_plan, localize

    proxy_class = push.proxy_class(proxy)
    # The shared assignments and which of them locality LB rewrites depend on the class
    # alone: a second proxy of the class only redoes the rewritten ones for its locality.
    plan_key = ("eds.plan", proxy_class, frozenset(names or ()))
    plan = cast(_Plan | None, push.memo.get(plan_key))
    if plan is None:
        memo = push.memo.setdefault(("eds", proxy_class), {})
        plans = push.memo.setdefault(("eds.locality", proxy_class), {})  # by cluster name
        assert isinstance(memo, dict) and isinstance(plans, dict)
        scope = push.proxy_scope(proxy)
        shared: list[endpoint_pb2.ClusterLoadAssignment] = []
        localized: list[tuple[int, LocalityPlan]] = []
        resolved: dict[str, _Resolved] = {}  # a service's clusters: one lookup
        wanted = sorted(names or ())
        missing = [n for n in wanted if n not in memo]
        bodies = [
            _assignment(push, proxy, scope, n, resolved, plans, locality_plan) for n in missing
        ]
        built = [n for n, b in zip(missing, bodies, strict=True) if b is not None]
        parsed = parse_many(endpoint_pb2.ClusterLoadAssignment, [b for b in bodies if b])
        memo.update(dict.fromkeys(missing, _NONE))
        memo.update(zip(built, parsed, strict=True))
        for name in wanted:
            cla = memo[name]
            if cla is not _NONE:
                if name in plans:
                    localized.append((len(shared), plans[name]))
                shared.append(cla)
        plan = push.memo[plan_key] = (tuple(shared), tuple(localized))
    shared_clas, localized_plans = plan
    out = list(shared_clas)
    for i, lp in localized_plans:
        out[i] = localize(push, proxy, out[i], lp)
    return out


# The class's assignments in name order, and (index, plan) of those locality LB rewrites.
_Plan = tuple[
    tuple[endpoint_pb2.ClusterLoadAssignment, ...], tuple[tuple[int, "LocalityPlan"], ...]
]


_NONE = endpoint_pb2.ClusterLoadAssignment()  # marks names with no assignment


# A service host as the proxy sees it, with the DestinationRule that applies (or None), the
# labels of the rule's subsets by name (the first of a name, as Istio reads them) and
# whether locality LB may apply (_may_localize).
_Resolved = tuple[Service, BoundDestinationRule | None, dict[str, Mapping[str, str]], bool] | None
_PlanOf = Callable[
    [PushContext, Service, int, str, BoundDestinationRule | None], "LocalityPlan | None"
]


def _assignment(
    push: PushContext,
    proxy: Proxy,
    scope: SidecarScope,
    name: str,
    resolved: dict[str, _Resolved],
    plans: dict[str, LocalityPlan],
    locality_plan: _PlanOf,
) -> bytes | None:
    """The serialized shared assignment of cluster `name` (or None); records in `plans` how locality
    LB rewrites it per proxy, if it does. (Plain messages in the memo: thousands of small
    wrapper objects cost more in garbage collection than they saved.) `locality_plan` is
    endpoint_locality's, passed in: imported here it was an import statement per name."""
    parsed = parse_cluster_name(name)
    if parsed is None or parsed[0] != "outbound":
        return None
    _, port, subset, hostname = parsed
    if hostname in resolved:
        found = resolved[hostname]
    else:
        svc = scope.service(hostname)
        rule = push.destination_rule(proxy, svc) if svc is not None else None
        by_name: dict[str, Mapping[str, str]] = {}
        for s in reversed(rule.obj.model.spec.subsets if rule else ()):
            by_name[s.name] = s.labels  # the first subset of a name wins
        localizes = _may_localize(push, rule)
        found = resolved[hostname] = (svc, rule, by_name, localizes) if svc is not None else None
    if found is None:
        return None
    svc, rule, by_name, localizes = found
    labels = by_name.get(subset) if subset else None
    if subset and labels is None:
        return None
    # Assembled from the cached serialized groups, parsed with the others: no copies.
    body = length_delimited(_CLA_NAME, name.encode()) + assignment_endpoints(
        push, svc, port, labels
    )
    plan = locality_plan(push, svc, port, subset, rule) if localizes else None
    if plan is not None:
        plans[name] = plan
    return body


def _may_localize(push: PushContext, rule: BoundDestinationRule | None) -> bool:
    """Can locality LB apply to any of the rule's clusters? Only with the mesh's setting or
    one in the rule (a merged policy takes its settings from the rule's policies)."""
    if push.mesh.locality_lb_setting is not None:
        return True
    spec = rule.obj.model.spec if rule else None
    policies = [spec.traffic_policy, *(s.traffic_policy for s in spec.subsets)] if spec else []
    for policy in policies:
        if policy is None:
            continue
        balancers = [policy.load_balancer, *(p.load_balancer for p in policy.port_level_settings)]
        if any(lb is not None and lb.locality_lb_setting is not None for lb in balancers):
            return True
    return False


def locality_endpoints(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[ec_pb2.LocalityLbEndpoints]:
    """Healthy endpoints of one service port (filtered by subset labels), by locality."""
    return [
        ec_pb2.LocalityLbEndpoints.FromString(g)
        for g in group_bytes(push, svc, port, subset_labels)
    ]


_CLA_NAME = field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "cluster_name")
