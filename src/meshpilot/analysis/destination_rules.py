"""DestinationRules that apply to nothing: a host that matches no service (IST0174) and
subsets whose labels select no endpoint of the host (IST0173). Istio's
destinationrule.PodNotSelectedAnalyzer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.analysis.lookup import endpoint_labels, selector_matches, services_intersecting
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import resolve_host
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Service

__all__ = ["check_destination_rules"]


def check_destination_rules(push: PushContext) -> Iterator[Diagnostic]:
    for dr in push.of_kind(Kind.DESTINATION_RULE):
        spec = dr.model.spec
        host = resolve_host(spec.host, dr.namespace, push.domain_suffix)
        services = services_intersecting(push, host)
        if not services:
            yield finding(
                dr,
                ("spec", "host"),
                f"The host {spec.host} defined in the DestinationRule does not match any "
                "services in the mesh.",
                code="IST0174",
            )
            continue
        yield from _check_subsets(push, dr, services)


def _check_subsets(
    push: PushContext, dr: ConfigObject[Any], services: list[Service]
) -> Iterator[Diagnostic]:
    labels = [
        endpoint_labels(ep)
        for svc in services
        for port in svc.ports
        for ep in push.registry.endpoints_of(svc, port.port)
    ]
    for index, subset in enumerate(dr.model.spec.subsets):
        if not subset.labels or any(selector_matches(subset.labels, lb) for lb in labels):
            continue
        yield finding(
            dr,
            ("spec", "subsets", index, "labels"),
            f"The Subset {subset.name} defined in the DestinationRule does not select any "
            "pods. Which may lead to 503 UH (NoHealthyUpstream).",
            code="IST0173",
        )
