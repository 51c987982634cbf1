"""DestinationRules by host, looked up with Istio's namespace precedence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from meshpilot.config.hosts import host_matches, host_specificity, resolve_host
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.model.visibility import visible_to

__all__ = ["BoundDestinationRule", "DestinationRuleIndex"]


@dataclass(frozen=True, slots=True)
class BoundDestinationRule:
    obj: ConfigObject[DestinationRule]
    host: str  # fully qualified

    @property
    def namespace(self) -> str:
        return self.obj.namespace


@dataclass(frozen=True, slots=True)
class DestinationRuleIndex:
    by_namespace: Mapping[str, tuple[BoundDestinationRule, ...]]
    root_namespace: str
    default_export_to: tuple[str, ...]

    @classmethod
    def build(
        cls, objects: Sequence[ConfigObject[DestinationRule]], mesh: MeshConfig, domain_suffix: str
    ) -> DestinationRuleIndex:
        by_ns: dict[str, list[BoundDestinationRule]] = {}
        for obj in sorted(
            objects, key=lambda o: (o.model.metadata.creation_timestamp or "", o.namespace, o.name)
        ):
            host = resolve_host(obj.model.spec.host, obj.namespace, domain_suffix)
            by_ns.setdefault(obj.namespace, []).append(BoundDestinationRule(obj, host))
        return cls(
            {ns: tuple(v) for ns, v in by_ns.items()},
            mesh.root_namespace,
            tuple(mesh.default_destination_rule_export_to),
        )

    def lookup(
        self,
        proxy_namespace: str,
        proxy_labels: Mapping[str, str],
        hostname: str,
        service_namespace: str,
    ) -> BoundDestinationRule | None:
        """The rule for `hostname` as Istio picks it: the proxy's namespace, then the service's,
        then the root namespace; the most specific host wins within a namespace."""
        for ns in dict.fromkeys((proxy_namespace, service_namespace, self.root_namespace)):
            found = self._best(ns, proxy_namespace, proxy_labels, hostname)
            if found is not None:
                return found
        return None

    def _best(
        self, ns: str, proxy_namespace: str, proxy_labels: Mapping[str, str], hostname: str
    ) -> BoundDestinationRule | None:
        candidates = []
        for dr in self.by_namespace.get(ns, ()):
            if not host_matches(dr.host, hostname):
                continue
            if not visible_to(
                dr.obj.model.spec.export_to, dr.namespace, proxy_namespace, self.default_export_to
            ):
                continue
            selector = dr.obj.model.spec.workload_selector
            if selector is not None and (
                ns != proxy_namespace
                or not all(proxy_labels.get(k) == v for k, v in selector.match_labels.items())
            ):
                continue
            candidates.append(dr)
        if not candidates:
            return None
        # Workload-specific rules before namespace-wide ones, then host specificity.
        candidates.sort(
            key=lambda d: (d.obj.model.spec.workload_selector is None, host_specificity(d.host))
        )
        return candidates[0]
