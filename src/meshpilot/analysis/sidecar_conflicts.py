"""Sidecars that compete for the same proxies, where which one applies is undefined: several
without a workloadSelector in one namespace (IST0111, Istio's sidecar.DefaultSelectorAnalyzer)
and several whose selectors pick the same Pod (IST0110, sidecar.SelectorAnalyzer)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import selector_matches
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_sidecar_conflicts"]

_NAME = ("metadata", "name")


def check_sidecar_conflicts(push: PushContext) -> Iterator[Diagnostic]:
    plain: dict[str, list[ConfigObject[Any]]] = defaultdict(list)
    selecting: dict[str, list[ConfigObject[Any]]] = defaultdict(list)
    for sidecar in push.of_kind(Kind.SIDECAR):
        selector = sidecar.model.spec.workload_selector
        if selector is None or not selector.labels:
            plain[sidecar.namespace].append(sidecar)
        else:
            selecting[sidecar.namespace].append(sidecar)
    for namespace, group in sorted(plain.items()):
        if len(group) < 2:
            continue
        for sidecar in group:
            yield finding(
                sidecar,
                _NAME,
                f"The Sidecars {_names(group)} in namespace {quoted(namespace)} have no "
                "workload selector, which can lead to undefined behavior.",
                code="IST0111",
            )
    for pod in push.of_kind(Kind.POD):
        picked = [
            s
            for s in selecting.get(pod.namespace, ())
            if selector_matches(s.model.spec.workload_selector.labels, pod.labels)
        ]
        if len(picked) < 2:
            continue
        for sidecar in picked:
            yield finding(
                sidecar,
                _NAME,
                f"The Sidecars {_names(picked)} in namespace {quoted(pod.namespace)} select the "
                f"same workload pod {quoted(pod.name)}, which can lead to undefined behavior.",
                code="IST0110",
            )


def _names(sidecars: list[ConfigObject[Any]]) -> str:
    """Go's %v of a list of names: `[a b]`."""
    return "[" + " ".join(s.name for s in sidecars) + "]"
