"""`inject_pod`: one pod (or a workload's pod template) in, the injected pod out.

Istio's steps (pkg/kube/inject inject.go): decide, render the templates into partial pods,
merge them into the pod, re-apply the user's own istio-proxy/istio-init settings, then
post-process: Prometheus merge, app probe rewrite, metadata (status annotation, injected
annotations), container order. The webhook, kube-inject and `meshpilot run` all call it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.inject.config import Injector
from meshpilot.inject.data import TemplateData, WorkloadMeta, template_data
from meshpilot.inject.merge import merge, overlay_user_containers, reorder
from meshpilot.inject.policy import (
    STATUS_ANNOTATION,
    Decision,
    PodFacts,
    injection_required,
    should_inject,
)
from meshpilot.inject.probes import REWRITE_ANNOTATION, rewrite_probes
from meshpilot.inject.template import render, template_names

__all__ = ["InjectionResult", "inject_pod"]

JSON = dict[str, Any]
_SCRAPE = ("prometheus.io/scrape", "prometheus.io/path", "prometheus.io/port")


@dataclass(frozen=True, slots=True)
class InjectionResult:
    pod: JSON  # the injected pod; the original (a copy) when not injected
    injected: bool
    decision: Decision
    warnings: tuple[str, ...] = ()


def _facts(pod: JSON, namespace: str) -> PodFacts:
    meta = pod.get("metadata") or {}
    return PodFacts(
        namespace=meta.get("namespace") or namespace or "default",
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        host_network=bool((pod.get("spec") or {}).get("hostNetwork")),
    )


def _decide(
    pod: JSON,
    injector: Injector,
    workload: WorkloadMeta,
    namespace_labels: Mapping[str, str] | None,
    revisions: frozenset[str] | None,
) -> Decision:
    facts = _facts(pod, workload.namespace)
    config = injector.config
    selectors = (config.never_inject_selector, config.always_inject_selector)
    if namespace_labels is None:  # the webhook's selectors were applied already
        return injection_required(facts, config.policy, *selectors)
    served = revisions or frozenset({injector.revision_name})
    return should_inject(facts, namespace_labels, served, config.policy, *selectors)


def _prometheus_merge(pod: JSON, data: TemplateData) -> None:
    """Point Prometheus at the agent, which merges the app's metrics with Envoy's; the
    app's own scrape settings go to the agent in ISTIO_PROMETHEUS_ANNOTATIONS."""
    annotations = pod["metadata"].setdefault("annotations", {})
    if not data.mesh.enable_prometheus_merge or annotations.get(_SCRAPE[0]) == "false":
        return
    port = str(data.status_port)
    if annotations.get(_SCRAPE[2]) == port:
        return
    original = {k.split("/")[1]: annotations[k] for k in _SCRAPE if annotations.get(k)}
    proxy = next((c for c in pod["spec"]["containers"] if c.get("name") == "istio-proxy"), None)
    if original and proxy is not None:
        value = json.dumps(original, separators=(",", ":"))
        proxy.setdefault("env", []).append({"name": "ISTIO_PROMETHEUS_ANNOTATIONS", "value": value})
    annotations.update({_SCRAPE[2]: port, _SCRAPE[1]: "/stats/prometheus", _SCRAPE[0]: "true"})


def _set_proxy_env(spec: JSON, env: Mapping[str, str]) -> None:
    for container in spec.get("containers") or []:
        if container.get("name") == "istio-proxy" and env:
            kept = [e for e in container.get("env") or [] if e.get("name") not in env]
            container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]


def _status(partials: list[JSON], revision: str) -> str:
    """The sidecar.istio.io/status annotation: what injection added, and the revision."""

    def names(field: str) -> list[str] | None:
        found = [str(i["name"]) for p in partials for i in p["spec"].get(field) or []]
        return found or None

    status = {
        "initContainers": names("initContainers"),
        "containers": names("containers"),
        "volumes": names("volumes"),
        "imagePullSecrets": names("imagePullSecrets"),
        "revision": revision,
    }
    return json.dumps(status, separators=(",", ":"))


def inject_pod(
    pod: JSON,
    injector: Injector,
    workload: WorkloadMeta | None = None,
    namespace_labels: Mapping[str, str] | None = None,
    revisions: frozenset[str] | None = None,
    proxy_env: Mapping[str, str] | None = None,
) -> InjectionResult:
    """Inject `pod` (Kubernetes JSON, not modified) with `injector`'s templates.

    `workload` names the object the pod comes from (the owner in the proxy's metadata);
    without it, the pod itself. With `namespace_labels`, the webhook selectors are applied
    too (the revision must be one of `revisions`, default the injector's); without, only the
    injector's own decision, as for the webhook and istioctl kube-inject. `proxy_env` sets
    env of istio-proxy (the webhook's `/inject/:ENV:K=V` and `/inject/cluster/C/net/N`). Raises
    `InjectError` for a pod that asks for something impossible (a bad annotation)."""
    meta = pod.get("metadata") or {}
    if workload is None:
        workload = WorkloadMeta("v1", "Pod", meta.get("name", ""), meta.get("namespace", ""))
    decision = _decide(pod, injector, workload, namespace_labels, revisions)
    if not decision.inject:
        return InjectionResult(copy.deepcopy(pod), False, decision, decision.warnings)
    data = template_data(pod, workload, injector)
    names = template_names(data, injector.config.default_templates, injector.config.aliases)
    partials = render(data, names)
    # metadata before spec, as Kubernetes writes a pod template that had none
    out = copy.deepcopy(pod) if "metadata" in pod else {"metadata": {}, **copy.deepcopy(pod)}
    out.setdefault("spec", {})
    for partial in partials:
        out = merge(out, partial)
    overlay_user_containers(out["spec"], pod.get("spec") or {})
    _set_proxy_env(out["spec"], proxy_env or {})
    warnings = list(decision.warnings) + data.warnings
    _prometheus_merge(out, data)
    status_port = data.status_port
    default_rewrite = injector.values.sidecar_injector_webhook.rewrite_app_http_probe
    rewrite = data.annotation(REWRITE_ANNOTATION, str(default_rewrite)).lower() == "true"
    warnings += rewrite_probes(out["spec"].get("containers") or [], status_port, rewrite)
    annotations = out["metadata"].setdefault("annotations", {})
    annotations.update(injector.values.sidecar_injector_webhook.injected_annotations)
    annotations.update(injector.config.injected_annotations)
    annotations[STATUS_ANNOTATION] = _status(partials, injector.revision_name)
    reorder(out["spec"], data.hold)
    dns = out["spec"].get("dnsPolicy")
    if dns not in (None, "ClusterFirst", "ClusterFirstWithHostNet"):
        warnings.append(f"dnsPolicy {dns} is not ClusterFirst: DNS capture may not work")
    return InjectionResult(out, True, decision, tuple(warnings))
