"""Workloads that several Services expose on one port with different protocols (IST0116,
Istio's deployment.MultiServiceAnalyzer): the proxy can serve a port with one protocol only.

Istio checks each Deployment's pod template; meshpilot has no Deployments, so the Pods stand
in for them: Pods of one namespace with the same labels are one workload, reported once, on
the first of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.analysis.lookup import selector_matches
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_pod_services"]


def check_pod_services(push: PushContext) -> Iterator[Diagnostic]:
    # Services by (namespace, one label of their selector): a Pod is checked against the
    # Services that can select it, not every Service of its namespace.
    services: dict[tuple[str, str, str], list[ConfigObject[Any]]] = defaultdict(list)
    for svc in push.of_kind(Kind.SERVICE):
        selector = svc.model.spec.selector
        if selector:
            key = min(selector.items())
            services[(svc.namespace, *key)].append(svc)
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    for pod in push.of_kind(Kind.POD):
        workload = (pod.namespace, frozenset(pod.labels.items()))
        if workload in seen:
            continue
        seen.add(workload)
        selecting = [
            svc
            for item in sorted(pod.labels.items())
            for svc in services.get((pod.namespace, *item), ())
            if selector_matches(svc.model.spec.selector, pod.labels)
        ]
        if len(selecting) < 2:
            continue
        # port -> Kubernetes protocol (TCP, UDP, SCTP) -> names of the Services using it
        by_port: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for svc in selecting:
            for port in svc.model.spec.ports:
                name = f"{svc.namespace}/{svc.name}"
                by_port[port.port][port.protocol or "TCP"].append(name)
        for number, protocols in sorted(by_port.items()):
            if len(protocols) < 2:
                continue
            names = sorted(n for group in protocols.values() for n in group)
            yield finding(
                pod,
                ("metadata", "name"),
                f"This deployment {pod.name} is associated with multiple services using port "
                f"{number} but different protocols: [{' '.join(names)}]",
                code="IST0116",
            )
