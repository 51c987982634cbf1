"""PushContext: an immutable snapshot of the whole mesh, with the indexes translation reads."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from meshpilot.config.istio.gateway import Gateway
from meshpilot.config.istio.sidecar import Sidecar
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import ENDPOINT_KINDS, Kind
from meshpilot.config.kube.core import Secret
from meshpilot.config.kube.pod import Pod
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.model.indexes.destination_rules import BoundDestinationRule, DestinationRuleIndex
from meshpilot.model.indexes.endpoint_update import update_pods
from meshpilot.model.indexes.virtual_services import VirtualServiceIndex
from meshpilot.model.lasting_memo import LastingMemo
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.sidecar_scope import SidecarScope, build_sidecar_scope, select_sidecar
from meshpilot.registry.aggregate import Registry, build_registry
from meshpilot.registry.model import Endpoint, Service

__all__ = ["REGISTRY_KINDS", "PushContext", "build_push_context", "push_version"]

DOMAIN_SUFFIX = "cluster.local"


def push_version(counter: int, now: datetime | None = None) -> str:
    """Istio's xDS version: `<RFC3339 time>/<push counter>`."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp}/{counter}"


@dataclass(frozen=True, slots=True)
class PushContext:
    version: str
    mesh: MeshConfig
    registry: Registry
    objects: Mapping[Kind, tuple[ConfigObject[Any], ...]]
    by_key: Mapping[ConfigKey, ConfigObject[Any]]
    virtual_services: VirtualServiceIndex
    destination_rules: DestinationRuleIndex
    domain_suffix: str = DOMAIN_SUFFIX
    # Memo of sidecar scopes per (namespace, Sidecar key): shared by every proxy of a class.
    _scopes: dict[tuple[str, ConfigKey | None], SidecarScope] = field(default_factory=dict)
    # Storage the generators' cache (xds/cache.py) keeps for this push; opaque here.
    memo: dict[object, object] = field(default_factory=dict)
    # Storage the generators keep across pushes (model/lasting_memo.py); opaque here.
    lasting: LastingMemo = field(default_factory=LastingMemo)

    def of_kind(self, kind: Kind) -> tuple[ConfigObject[Any], ...]:
        return self.objects.get(kind, ())

    @property
    def gateways(self) -> tuple[ConfigObject[Gateway], ...]:
        return cast(tuple[ConfigObject[Gateway], ...], self.of_kind(Kind.GATEWAY))

    def secret(self, namespace: str, name: str) -> ConfigObject[Secret] | None:
        return self.by_key.get(ConfigKey(Kind.SECRET, namespace, name))

    def pod(self, namespace: str, name: str) -> ConfigObject[Pod] | None:
        return self.by_key.get(ConfigKey(Kind.POD, namespace, name))

    def sidecar_scope(self, proxy: Proxy) -> SidecarScope:
        sidecars = cast(Sequence[ConfigObject[Sidecar]], self.of_kind(Kind.SIDECAR))
        sidecar = (
            select_sidecar(sidecars, proxy.namespace, proxy.labels, self.mesh.root_namespace)
            if sidecars
            else None
        )
        memo_key = (proxy.namespace, sidecar.key if sidecar else None)
        scope = self._scopes.get(memo_key)
        if scope is None:
            scope = build_sidecar_scope(
                proxy.namespace,
                sidecar,
                self.registry.services,
                self.mesh.outbound_traffic_policy.mode,
                self.mesh.default_service_export_to,
            )
            self._scopes[memo_key] = scope
        return scope

    def default_scope(self, namespace: str) -> SidecarScope:
        """Everything exported to `namespace`, with no Sidecar resource applied."""
        memo_key = (namespace, None)
        scope = self._scopes.get(memo_key)
        if scope is None:
            scope = build_sidecar_scope(
                namespace,
                None,
                self.registry.services,
                self.mesh.outbound_traffic_policy.mode,
                self.mesh.default_service_export_to,
            )
            self._scopes[memo_key] = scope
        return scope

    def proxy_scope(self, proxy: Proxy) -> SidecarScope:
        """The services a proxy sees: Sidecar resources apply to sidecars, not to gateways."""
        if proxy.type is ProxyType.ROUTER:
            return self.default_scope(proxy.namespace)
        return self.sidecar_scope(proxy)

    def proxy_class(self, proxy: Proxy) -> tuple[object, ...]:
        """What decides the outbound configuration proxies share: proxy type, the scope
        (namespace and Sidecar), and workload-selecting DestinationRules that apply."""
        scope = self.proxy_scope(proxy)
        sidecar = scope.sidecar.key if scope.sidecar else None
        rules = self.destination_rules
        # Most namespaces have no workload-selecting rule: no walk over their rules, which
        # would otherwise run per proxy on every push.
        selecting = (
            rules.selecting(proxy.namespace, proxy.labels)
            if proxy.namespace in rules.selector_namespaces
            else ()
        )
        return (proxy.type, scope.namespace, sidecar, proxy.intercept, selecting)

    def destination_rule(self, proxy: Proxy, svc: Service) -> BoundDestinationRule | None:
        return self.destination_rules.lookup(
            proxy.namespace, proxy.labels, svc.hostname, svc.namespace
        )

    def endpoints(self, svc: Service, port: int) -> tuple[Endpoint, ...]:
        return self.registry.endpoints_of(svc, port)

    def service_targets(self, proxy: Proxy) -> list[tuple[Service, Endpoint]]:
        """The (service, endpoint) pairs this proxy's workload serves: inbound config."""
        ips = set(proxy.ip_addresses)
        out = []
        for svc in self.registry.services:
            if svc.namespace != proxy.namespace and svc.is_kubernetes:
                continue
            for port in svc.ports:
                for ep in self.registry.endpoints_of(svc, port.port):
                    if ep.address in ips:
                        out.append((svc, ep))
        return out


# Kinds the service registry is built from (registry/aggregate.py).
REGISTRY_KINDS = frozenset(
    {
        Kind.SERVICE,
        Kind.ENDPOINTS,
        Kind.ENDPOINT_SLICE,
        Kind.POD,
        Kind.SERVICE_ENTRY,
        Kind.WORKLOAD_ENTRY,
    }
)


def build_push_context(
    objects: Sequence[ConfigObject[Any]],
    mesh: MeshConfig,
    counter: int = 1,
    now: datetime | None = None,
    prev: PushContext | None = None,
    changed: Collection[ConfigKey] | None = None,
    by_key: Mapping[ConfigKey, ConfigObject[Any]] | None = None,
) -> PushContext:
    """A PushContext for `objects`. Given the previous one and the keys whose objects changed
    since it was built, only the indexes whose kinds changed are rebuilt (Istio's
    updateContext); the rest, and the sidecar scopes, are shared with `prev`. A change of
    Pods alone updates the previous registry's affected services only (`by_key`: `objects`
    by key, when the caller has them)."""
    if prev is not None and changed and mesh == prev.mesh:
        fast = _pods_changed(objects, mesh, counter, now, prev, changed, by_key)
        if fast is not None:
            return fast
    carried = _lasting(prev, changed) if prev is not None else None
    if prev is None or changed is None or mesh != prev.mesh:
        prev, kinds = None, frozenset(Kind)
    else:
        kinds = frozenset(key.kind for key in changed)
    by_kind: dict[Kind, list[ConfigObject[Any]]] = defaultdict(list)
    for obj in objects:
        if obj.key.kind in kinds:
            by_kind[obj.key.kind].append(obj)
    ordered = dict(prev.objects) if prev else {}
    for kind in kinds:
        ordered.pop(kind, None)
    ordered.update(
        {kind: tuple(sorted(objs, key=lambda o: o.key)) for kind, objs in by_kind.items()}
    )
    if prev and not kinds & REGISTRY_KINDS:
        registry = prev.registry
    else:
        registry = build_registry(
            objects, DOMAIN_SUFFIX, mesh.trust_domain, prev.registry if prev else None, changed
        )
    # Scopes read the services only: equal services (by identity) keep them.
    scopes_kept = (
        prev is not None
        and registry.services is prev.registry.services
        and Kind.SIDECAR not in kinds
    )
    return PushContext(
        version=push_version(counter, now),
        mesh=mesh,
        registry=registry,
        objects=ordered,
        by_key={o.key: o for o in objects},
        virtual_services=prev.virtual_services
        if prev and Kind.VIRTUAL_SERVICE not in kinds
        else VirtualServiceIndex.build(
            list(ordered.get(Kind.VIRTUAL_SERVICE, ())), mesh, DOMAIN_SUFFIX
        ),
        destination_rules=prev.destination_rules
        if prev and Kind.DESTINATION_RULE not in kinds
        else DestinationRuleIndex.build(
            list(ordered.get(Kind.DESTINATION_RULE, ())), mesh, DOMAIN_SUFFIX
        ),
        _scopes=dict(prev._scopes) if prev and scopes_kept else {},
        lasting=carried if carried is not None else LastingMemo(),
    )


def _lasting(prev: PushContext, changed: Collection[ConfigKey] | None) -> LastingMemo:
    """The lasting memo of the push after `prev`. Its entries check their own inputs, so it
    is handed on whatever changed; a new generation starts (dropping what `prev`'s did not
    use) unless endpoints alone changed: their push regenerates none of what the memo keeps
    (route parts, VHDS splits), which would otherwise be gone after two endpoint pushes and
    rebuilt, for every proxy class, by the next VirtualService change."""
    if changed and all(key.kind in ENDPOINT_KINDS for key in changed):
        return prev.lasting
    return prev.lasting.successor()


def _pods_changed(
    objects: Sequence[ConfigObject[Any]],
    mesh: MeshConfig,
    counter: int,
    now: datetime | None,
    prev: PushContext,
    changed: Collection[ConfigKey],
    by_key: Mapping[ConfigKey, ConfigObject[Any]] | None,
) -> PushContext | None:
    """The next PushContext when only Pods changed (an endpoint push, which should go out
    within a debounce of the edit), from `prev` with its Pods and registry updated; None
    when the change is not Pods alone or the registry must be rebuilt."""
    if any(key.kind is not Kind.POD for key in changed):
        return None
    keyed = dict(by_key) if by_key is not None else {o.key: o for o in objects}
    kept = [p for p in prev.of_kind(Kind.POD) if p.key not in changed]
    for key in changed:
        if (obj := keyed.get(key)) is not None:
            bisect.insort(kept, obj, key=lambda o: o.key)
    pods = tuple(kept)
    registry = update_pods(
        prev.registry, prev.objects, prev.by_key, keyed, pods, changed, mesh.trust_domain
    )
    if registry is None:
        return None
    ordered = dict(prev.objects)
    ordered[Kind.POD] = pods
    if not pods:
        del ordered[Kind.POD]
    return PushContext(
        version=push_version(counter, now),
        mesh=mesh,
        registry=registry,
        objects=ordered,
        by_key=keyed,
        virtual_services=prev.virtual_services,
        destination_rules=prev.destination_rules,
        _scopes=dict(prev._scopes) if registry.services is prev.registry.services else {},
        lasting=_lasting(prev, changed),
    )
