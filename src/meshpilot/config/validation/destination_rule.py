"""DestinationRule: host, traffic policy, subsets, exportTo, workload selector (Istio's
ValidateDestinationRule)."""

from __future__ import annotations

from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_export_to,
    check_labels,
    check_selector,
    wildcard_domain_error,
)
from meshpilot.config.validation.destinations import subset_name_error
from meshpilot.config.validation.traffic_policy import check_traffic_policy

__all__ = ["validate_destination_rule"]

SPEC: Path = ("spec",)


def validate_destination_rule(dr: DestinationRule, p: Problems) -> None:
    spec = dr.spec
    p.add((*SPEC, "host"), wildcard_domain_error(spec.host))
    check_traffic_policy(p, (*SPEC, "trafficPolicy"), spec.traffic_policy)
    names: dict[str, int] = {}
    for index, subset in enumerate(spec.subsets):
        where = (*SPEC, "subsets", index)
        if subset.name in names:
            p.error(
                (*where, "name"),
                f"duplicate subset names: {subset.name} (also subsets[{names[subset.name]}])",
            )
        names.setdefault(subset.name, index)
        p.add((*where, "name"), subset_name_error(subset.name))
        check_labels(p, (*where, "labels"), subset.labels)
        check_traffic_policy(p, (*where, "trafficPolicy"), subset.traffic_policy)
    selector = spec.workload_selector
    check_export_to(
        p,
        (*SPEC, "exportTo"),
        spec.export_to,
        dr.metadata.namespace or "default",
        has_selector=selector is not None,
    )
    if selector is not None:
        check_selector(
            p, (*SPEC, "workloadSelector", "matchLabels"), selector.match_labels, "DestinationRule"
        )
