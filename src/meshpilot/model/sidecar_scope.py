"""SidecarScope: what one class of sidecars (a namespace, or a Sidecar resource) can see."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from meshpilot.config.hosts import host_matches
from meshpilot.config.istio.sidecar import IstioEgressListener, IstioIngressListener, Sidecar
from meshpilot.config.objects import ConfigObject
from meshpilot.model.visibility import visible_to
from meshpilot.registry.model import Service

__all__ = ["EgressHost", "SidecarScope", "build_sidecar_scope", "select_sidecar"]


@dataclass(frozen=True, slots=True)
class EgressHost:
    namespace: str  # "*", "~", or a namespace (`.` already resolved)
    host: str

    @classmethod
    def parse(cls, text: str, sidecar_namespace: str) -> EgressHost:
        ns, _, host = text.partition("/")
        if not host:
            ns, host = "*", text
        if ns == ".":
            ns = sidecar_namespace
        return cls(ns, host)

    def matches(self, svc: Service) -> bool:
        if self.namespace == "~":
            return False
        if self.namespace != "*" and self.namespace != svc.namespace:
            return False
        return host_matches(self.host, svc.hostname)


@dataclass(frozen=True, slots=True)
class SidecarScope:
    namespace: str
    sidecar: ConfigObject[Sidecar] | None
    services: tuple[Service, ...]  # one per hostname, sorted by hostname
    outbound_policy: str  # ALLOW_ANY or REGISTRY_ONLY
    egress_hosts: tuple[EgressHost, ...] | None  # None: no Sidecar, everything visible
    by_hostname: Mapping[str, Service] = field(default_factory=dict)

    @property
    def ingress(self) -> tuple[IstioIngressListener, ...] | None:
        """The Sidecar's `ingress` listeners; None when it has none (service-derived inbound)."""
        listeners = self.sidecar.model.spec.ingress if self.sidecar else []
        return tuple(listeners) if listeners else None

    @property
    def port_egress(self) -> tuple[IstioEgressListener, ...]:
        """Egress listeners with a port: each gets a dedicated outbound listener."""
        listeners = self.sidecar.model.spec.egress if self.sidecar else []
        return tuple(e for e in listeners if e.port is not None and e.port.number)

    def service(self, hostname: str) -> Service | None:
        return self.by_hostname.get(hostname)

    def allows_host(self, hostname: str, namespace: str = "*") -> bool:
        """Could a VirtualService host be seen through this scope's egress hosts?"""
        if self.egress_hosts is None:
            return True
        return any(
            (e.namespace in ("*", namespace))
            and (host_matches(e.host, hostname) or host_matches(hostname, e.host))
            for e in self.egress_hosts
        )


def select_sidecar(
    sidecars: Sequence[ConfigObject[Sidecar]],
    namespace: str,
    labels: Mapping[str, str],
    root_namespace: str,
) -> ConfigObject[Sidecar] | None:
    """Istio's choice: a workload-selecting Sidecar in the namespace, then the namespace's
    selector-less one, then the root namespace's selector-less one."""
    own = sorted(
        (s for s in sidecars if s.namespace == namespace),
        key=lambda s: (s.model.metadata.creation_timestamp or "", s.name),
    )
    for s in own:
        selector = s.model.spec.workload_selector
        if (
            selector
            and selector.labels
            and all(labels.get(k) == v for k, v in selector.labels.items())
        ):
            return s
    for candidates in (own, [s for s in sidecars if s.namespace == root_namespace]):
        for s in candidates:
            selector = s.model.spec.workload_selector
            if not selector or not selector.labels:
                return s
    return None


def build_sidecar_scope(
    namespace: str,
    sidecar: ConfigObject[Sidecar] | None,
    services: Sequence[Service],
    mesh_outbound_policy: str,
    default_export_to: Sequence[str],
) -> SidecarScope:
    egress: tuple[EgressHost, ...] | None = None
    policy = mesh_outbound_policy
    if sidecar is not None:
        spec = sidecar.model.spec
        # A Sidecar without egress listeners keeps Istio's default egress: `*/*`.
        egress = (
            tuple(
                EgressHost.parse(h, sidecar.namespace)
                for listener in spec.egress
                for h in listener.hosts
            )
            or None
        )
        if spec.outbound_traffic_policy is not None:
            policy = spec.outbound_traffic_policy.mode
    chosen: dict[str, Service] = {}
    for svc in services:
        if not visible_to(svc.export_to, svc.namespace, namespace, default_export_to):
            continue
        if egress is not None and not any(e.matches(svc) for e in egress):
            continue
        current = chosen.get(svc.hostname)
        if current is None or _preferred(svc, current, namespace):
            chosen[svc.hostname] = svc
    ordered = tuple(chosen[h] for h in sorted(chosen))
    return SidecarScope(namespace, sidecar, ordered, policy, egress, dict(chosen))


def _preferred(candidate: Service, current: Service, namespace: str) -> bool:
    """Between two services of one hostname: the proxy's namespace, then Kubernetes Services."""

    def rank(s: Service) -> tuple[bool, bool, str]:
        return (s.namespace != namespace, not s.is_kubernetes, s.namespace)

    return rank(candidate) < rank(current)
