"""Sidecar injection, as Istio's injection.Analyzer sees it: a namespace without an injection
label (IST0102, Info), a namespace with more than one kind of injection label (IST0123), and
a Pod of an injected namespace without the istio-proxy container (IST0103).

In universal mode meshpilot runs each Pod with its sidecar whatever its containers say, so a
Pod's container list only tells something once the input is post-injection: IST0103 is
checked only when some Pod carries the `sidecar.istio.io/status` annotation injection adds
(a dump of a live cluster), as the preview does (gitops/preview/proxies.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.analysis.port_names import SYSTEM_NAMESPACES
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_injection"]

INJECTION_LABEL = "istio-injection"
REVISION_LABEL = "istio.io/rev"
DATAPLANE_MODE_LABEL = "istio.io/dataplane-mode"
INJECT = "sidecar.istio.io/inject"
STATUS_ANNOTATION = "sidecar.istio.io/status"
PROXY_CONTAINER = "istio-proxy"
_NAME = ("metadata", "name")


def check_injection(push: PushContext) -> Iterator[Diagnostic]:
    injected: set[str] = set()
    control_plane = {push.mesh.root_namespace, "istio-system"}
    for ns in push.of_kind(Kind.NAMESPACE):
        if ns.name in control_plane or ns.name in SYSTEM_NAMESPACES:
            continue
        labels = ns.labels
        found = _injection_labels(labels)
        if len(found) > 1:
            yield finding(
                ns,
                _NAME,
                f"The namespace has more than one type of injection labels [{' '.join(found)}], "
                "which may lead to undefined behavior. Make sure only one injection label "
                "exists.",
                code="IST0123",
            )
        if labels.get(DATAPLANE_MODE_LABEL) == "ambient":
            continue
        if not labels.get(INJECTION_LABEL) and REVISION_LABEL not in labels:
            yield finding(
                ns,
                _NAME,
                "The namespace is not enabled for Istio injection. Run 'kubectl label "
                f"namespace {ns.name} istio-injection=enabled' to enable it, or 'kubectl label "
                f"namespace {ns.name} istio-injection=disabled' to explicitly mark it as not "
                "needing injection.",
                code="IST0102",
            )
        elif labels.get(INJECTION_LABEL, "enabled") == "enabled":
            injected.add(ns.name)
    pods = push.of_kind(Kind.POD)
    if any(STATUS_ANNOTATION in p.model.metadata.annotations for p in pods):
        yield from _pods_missing_proxy(pods, injected)


def _injection_labels(labels: dict[str, str]) -> list[str]:
    """Istio's list of the injection labels a namespace carries (`key=value`)."""
    found = [f"{INJECTION_LABEL}={labels[INJECTION_LABEL]}"] if INJECTION_LABEL in labels else []
    legacy_enabled = labels.get(INJECTION_LABEL, "enabled") == "enabled"
    for key in (REVISION_LABEL, DATAPLANE_MODE_LABEL):
        if key in labels and legacy_enabled:
            found.append(f"{key}={labels[key]}")
    return found


def _pods_missing_proxy(
    pods: Sequence[ConfigObject[Any]], injected: set[str]
) -> Iterator[Diagnostic]:
    for pod in pods:
        if pod.namespace not in injected:
            continue
        meta = pod.model.metadata
        inject = meta.labels.get(INJECT, meta.annotations.get(INJECT, ""))
        spec = pod.model.spec
        if inject.lower() == "false" or (spec.model_extra or {}).get("hostNetwork") is True:
            continue
        containers = [*spec.containers, *spec.init_containers]
        if not any(c.name == PROXY_CONTAINER for c in containers):
            yield finding(
                pod,
                _NAME,
                f"The pod {pod.namespace}/{pod.name} is missing the Istio proxy. This can "
                "often be resolved by restarting or redeploying the workload.",
                code="IST0103",
            )
