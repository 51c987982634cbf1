"""DestinationRules by host, looked up with Istio's namespace precedence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from meshpilot.config.hosts import host_matches, host_specificity, resolve_host
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.keys import ConfigKey
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
    # Per namespace: rules by exact host, and the wildcard-host rules (checked by matching).
    exact: Mapping[str, Mapping[str, tuple[BoundDestinationRule, ...]]] = field(
        default_factory=dict
    )
    wildcard: Mapping[str, tuple[BoundDestinationRule, ...]] = field(default_factory=dict)
    # Namespaces holding workload-selecting rules: there, labels matter and nothing is memoised.
    selector_namespaces: frozenset[str] = frozenset()
    _memo: dict[tuple[str, str, str], BoundDestinationRule | None] = field(default_factory=dict)

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
        exact: dict[str, dict[str, list[BoundDestinationRule]]] = {}
        wildcard: dict[str, list[BoundDestinationRule]] = {}
        for ns, rules in by_ns.items():
            for dr in rules:
                if dr.host.startswith("*"):
                    wildcard.setdefault(ns, []).append(dr)
                else:
                    exact.setdefault(ns, {}).setdefault(dr.host, []).append(dr)
        return cls(
            {ns: tuple(v) for ns, v in by_ns.items()},
            mesh.root_namespace,
            tuple(mesh.default_destination_rule_export_to),
            {ns: {h: tuple(v) for h, v in hosts.items()} for ns, hosts in exact.items()},
            {ns: tuple(v) for ns, v in wildcard.items()},
            frozenset(
                ns
                for ns, rules in by_ns.items()
                if any(r.obj.model.spec.workload_selector is not None for r in rules)
            ),
        )

    def selecting(self, namespace: str, labels: Mapping[str, str]) -> tuple[ConfigKey, ...]:
        """Workload-selecting rules in `namespace` that select these labels: the only way a
        proxy's labels change which rule applies, hence part of its cache class."""
        return tuple(
            dr.obj.key
            for dr in self.by_namespace.get(namespace, ())
            if (sel := dr.obj.model.spec.workload_selector) is not None
            and all(labels.get(k) == v for k, v in sel.match_labels.items())
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
        if proxy_namespace in self.selector_namespaces:
            return self._lookup(proxy_namespace, proxy_labels, hostname, service_namespace)
        key = (proxy_namespace, hostname, service_namespace)
        if key not in self._memo:
            self._memo[key] = self._lookup(proxy_namespace, {}, hostname, service_namespace)
        return self._memo[key]

    def _lookup(
        self,
        proxy_namespace: str,
        proxy_labels: Mapping[str, str],
        hostname: str,
        service_namespace: str,
    ) -> BoundDestinationRule | None:
        for ns in dict.fromkeys((proxy_namespace, service_namespace, self.root_namespace)):
            found = self._best(ns, proxy_namespace, proxy_labels, hostname)
            if found is not None:
                return found
        return None

    def _best(
        self, ns: str, proxy_namespace: str, proxy_labels: Mapping[str, str], hostname: str
    ) -> BoundDestinationRule | None:
        exact = self.exact.get(ns)
        matching: Sequence[BoundDestinationRule] = exact.get(hostname, ()) if exact else ()
        wildcard = self.wildcard.get(ns)
        if wildcard:
            matching = [*matching, *(dr for dr in wildcard if host_matches(dr.host, hostname))]
        if not matching:
            return None  # most namespaces hold no rule for most hosts: no lists built
        candidates = []
        for dr in matching:
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
        if len(candidates) < 2:
            return candidates[0] if candidates else None
        # Workload-specific rules before namespace-wide ones, then host specificity.
        candidates.sort(
            key=lambda d: (d.obj.model.spec.workload_selector is None, host_specificity(d.host))
        )
        return candidates[0]
