"""Sidecars that select or reach nothing: a workloadSelector that matches no workload in the
namespace (IST0101 selector, Istio's sidecar.SelectorAnalyzer), and egress hosts that match no
service the namespace can see (meshpilot's MP0009)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import selector_matches, selector_text, workloads
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import host_matches
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.model.visibility import visible_to
from meshpilot.registry.model import Service

__all__ = ["check_sidecars"]


def check_sidecars(push: PushContext) -> Iterator[Diagnostic]:
    found = workloads(push)
    for sidecar in push.of_kind(Kind.SIDECAR):
        selector = sidecar.model.spec.workload_selector
        if selector is not None and selector.labels:
            matched = any(
                w.namespace == sidecar.namespace and selector_matches(selector.labels, w.labels)
                for w in found
            )
            if not matched:
                yield finding(
                    sidecar,
                    ("spec", "workloadSelector", "labels", sorted(selector.labels)[0]),
                    f"Referenced selector not found: {quoted(selector_text(selector.labels))}",
                    code="IST0101",
                )
        yield from _check_egress(push, sidecar)


def _check_egress(push: PushContext, sidecar: ConfigObject[Any]) -> Iterator[Diagnostic]:
    default = push.mesh.default_service_export_to
    visible = [
        s
        for s in push.registry.services
        if visible_to(s.export_to, s.namespace, sidecar.namespace, default)
    ]
    for l_index, listener in enumerate(sidecar.model.spec.egress):
        for index, entry in enumerate(listener.hosts):
            namespace, slash, host = entry.partition("/")
            if not slash or namespace == "~":
                continue
            if namespace == ".":
                namespace = sidecar.namespace
            if not _any_match(visible, namespace, host):
                yield finding(
                    sidecar,
                    ("spec", "egress", l_index, "hosts", index),
                    f"egress host {quoted(entry)} matches no service "
                    f"{_where(namespace, sidecar.namespace)}; the sidecars it applies to get "
                    "no route to it",
                    code="MP0009",
                )


def _where(namespace: str, own: str) -> str:
    if namespace == own:
        return f"in namespace {own}"
    if namespace == "*":
        return f"visible to namespace {own}"
    return f"in namespace {namespace} visible to namespace {own}"


def _any_match(services: Sequence[Service], namespace: str, host: str) -> bool:
    return any(
        (namespace == "*" or s.namespace == namespace) and host_matches(host, s.hostname)
        for s in services
    )
