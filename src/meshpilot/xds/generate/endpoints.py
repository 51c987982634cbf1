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
from meshpilot.registry.model import Service
from meshpilot.xds.generate.batch_parse import parse_many
from meshpilot.xds.generate.endpoint_groups import encoder, group_bytes, port_endpoints
from meshpilot.xds.generate.endpoint_wire import ONE_BYTE
from meshpilot.xds.names import parse_cluster_name
from meshpilot.xds.wire import field_number, tag, varint

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
        assembler = _Assembler(push, proxy, plans, locality_plan)
        wanted = sorted(names or ())
        built, bodies = [], []
        for name in wanted:
            if name not in memo:
                body = assembler.body(name)
                if body is None:
                    memo[name] = _NONE
                else:
                    built.append(name)
                    bodies.append(body)
        memo.update(zip(built, parse_many(endpoint_pb2.ClusterLoadAssignment, bodies), strict=True))
        shared: list[endpoint_pb2.ClusterLoadAssignment] = []
        localized: list[tuple[int, LocalityPlan]] = []
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


class _Assembler:
    """A proxy class's serialized shared assignments, by cluster name. `plans` records how
    locality LB rewrites an assignment per proxy, for those it does. (Plain messages in the
    memo: thousands of small wrapper objects cost more in garbage collection than they
    saved.) `locality_plan` is endpoint_locality's, passed in: imported here it was an
    import statement per name."""

    __slots__ = ("_groups", "_locality_plan", "_plans", "_proxy", "_push", "_resolved", "_scope")

    def __init__(
        self,
        push: PushContext,
        proxy: Proxy,
        plans: dict[str, LocalityPlan],
        locality_plan: _PlanOf,
    ) -> None:
        self._push, self._proxy, self._plans = push, proxy, plans
        self._locality_plan = locality_plan
        self._scope = push.proxy_scope(proxy)
        self._resolved: dict[str, _Resolved] = {}  # a service's clusters: one lookup
        self._groups = encoder(push).groups

    def body(self, name: str) -> bytes | None:
        """The serialized assignment of cluster `name`, None if it has none."""
        parts = name.split("|")
        if len(parts) == 4 and parts[1].isdigit():  # the form CDS names clusters in
            if parts[0] != "outbound":
                return None
            port, subset, hostname = int(parts[1]), parts[2], parts[3]
        else:
            parsed = parse_cluster_name(name)
            if parsed is None or parsed[0] != "outbound":
                return None
            _, port, subset, hostname = parsed
        resolved = self._resolved
        found = resolved[hostname] if hostname in resolved else self._resolve(hostname)
        if found is None:
            return None
        svc, rule, by_name, localizes = found
        labels = by_name.get(subset) if subset else None
        if subset and labels is None:
            return None
        if localizes:
            plan = self._locality_plan(self._push, svc, port, subset, rule)
            if plan is not None:
                self._plans[name] = plan
        # Assembled from the push's framed groups, parsed with the others: no copies.
        encoded = name.encode()
        n = len(encoded)
        head = _CLA_NAME_TAG + (ONE_BYTE[n] if n < 0x80 else varint(n))
        return head + encoded + port_endpoints(self._groups(svc, port), labels)

    def _resolve(self, hostname: str) -> _Resolved:
        svc = self._scope.service(hostname)
        found = None
        if svc is not None:
            rule = self._push.destination_rule(self._proxy, svc)
            by_name: dict[str, Mapping[str, str]] = {}
            for s in reversed(rule.obj.model.spec.subsets if rule else ()):
                by_name[s.name] = s.labels  # the first subset of a name wins
            found = (svc, rule, by_name, _may_localize(self._push, rule))
        self._resolved[hostname] = found
        return found


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


_CLA_NAME_TAG = tag(field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "cluster_name"))
