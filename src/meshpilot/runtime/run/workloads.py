"""The pods of Pod and Deployment documents, injected as a cluster would inject them.

A Pod is itself. A Deployment has `spec.replicas` pods (default 1) of its template, named
as its ReplicaSet's pods are: `<deployment>-<pod-template-hash>-<suffix>`, labelled
`pod-template-hash` and owned by the ReplicaSet `<deployment>-<hash>`. The hash is of the
template, so a changed template (`kubectl.kubernetes.io/restartedAt`, set by rollout
restart) gives new pod names, and the same template the same ones. Each pod then goes
through the webhook's decision and injection (inject_pod with its namespace's labels), so
the namespace's `istio-injection` / `istio.io/rev` labels and the pod's own say, as in a
cluster. Other kinds are left out (they belong in the store); a List's items are read.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.inject.config import Injector
from meshpilot.inject.data import WorkloadMeta
from meshpilot.inject.pod import inject_pod
from meshpilot.runtime.run.env import RunSpecError

__all__ = ["ChooseInjector", "PodToRun", "pods_of", "template_hash"]

JSON = dict[str, Any]
# (namespace labels, pod labels) -> the selected revision's injector and the names it serves;
# None: no revision's webhook selects the pod, the default injector decides
ChooseInjector = Callable[
    [Mapping[str, str], Mapping[str, str]], tuple[Injector, frozenset[str]] | None
]
# Kubernetes' rand.SafeEncodeString alphabet: no vowels, no look-alike characters
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class PodToRun:
    pod: JSON  # injected when `injected`
    workload: WorkloadMeta
    injected: bool
    reason: str  # why it was (not) injected
    revision: str = ""  # the revision whose control plane its proxy dials ("": --secure-uds's)

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])


def _fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _safe(value: int) -> str:
    """Kubernetes' SafeEncodeString of the number's decimal digits."""
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(value))


def template_hash(template: JSON) -> str:
    """The pod-template-hash of a pod template: FNV-32a (of its canonical JSON here, of
    the Go struct in Kubernetes) safe-encoded as Kubernetes does."""
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    return _safe(_fnv32a(canonical))


def _replicas(spec: JSON, where: str) -> int:
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise RunSpecError(f"{where}: spec.replicas must be a whole number >= 0, got {replicas!r}")
    return replicas


def _deployment_pods(obj: JSON, namespace: str) -> list[tuple[JSON, WorkloadMeta]]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = str(meta.get("name") or "")
    where = f"Deployment {namespace}/{name}"
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise RunSpecError(f"{where}: spec.template.spec is missing")
    hash_ = template_hash(template)
    replica_set = f"{name}-{hash_}"
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    workload = WorkloadMeta(str(obj.get("apiVersion") or "apps/v1"), "Deployment", name, namespace)
    pods = []
    for index in range(_replicas(spec, where)):
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
        pod_meta = pod.setdefault("metadata", {})
        suffix = _safe(_fnv32a(f"{replica_set}/{index}".encode()))[-5:]
        pod_meta.update(name=f"{replica_set}-{suffix}", namespace=namespace)
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), "pod-template-hash": hash_}
        pod_meta["ownerReferences"] = [owner]
        pods.append((pod, workload))
    return pods


def _documents(documents: Iterable[Any]) -> Iterable[JSON]:
    for doc in documents:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            yield from _documents(doc.get("items") or [])
        elif isinstance(doc, dict):
            yield doc


def pods_of(
    documents: Iterable[Any],
    injector: Injector,
    namespace_labels: Mapping[str, Mapping[str, str]],
    revisions: frozenset[str] | None = None,
    choose: ChooseInjector | None = None,
) -> list[PodToRun]:
    """The pods of the Pods and Deployments among `documents`, each injected or not as the
    webhook selectors (by its namespace's labels, `{}` for an unknown namespace) and the
    injector decide (`choose`'s injector when it selects a revision for the pod).
    RunSpecError / InjectError name the object that cannot run."""
    out = []
    for doc in _documents(documents):
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        if kind == "Pod":
            pod = {**copy.deepcopy(doc), "metadata": {**meta, "namespace": namespace}}
            workload = WorkloadMeta("v1", "Pod", str(meta.get("name") or ""), namespace)
            pairs = [(pod, workload)]
        elif kind == "Deployment":
            pairs = _deployment_pods(doc, namespace)
        else:
            continue
        labels = namespace_labels.get(namespace, {})
        for pod, workload in pairs:
            pod_labels = (pod.get("metadata") or {}).get("labels") or {}
            chosen = choose(labels, pod_labels) if choose is not None else None
            use, served = chosen if chosen is not None else (injector, revisions)
            result = inject_pod(pod, use, workload, labels, served)
            out.append(PodToRun(result.pod, workload, result.injected, result.decision.reason))
    return out
