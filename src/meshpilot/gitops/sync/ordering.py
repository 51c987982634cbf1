"""The order of sync tasks: (phase, wave, kind order, name), gitops-engine's syncTasks.Less,
then Namespaces moved before the first task in them and CRDs before their custom resources.

The kind order is Helm's (via gitops-engine); unknown kinds come after all known ones, by
name. We extend it for the mesh: Endpoints next to Services, and the Istio kinds after the
workloads (where Argo CD puts custom resources) in an order of their own, so a ServiceEntry,
a DestinationRule (its subsets) and a Gateway exist before a VirtualService routes to them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from meshpilot.gitops.sync.task import SyncTask

__all__ = ["KIND_ORDER", "kind_rank", "sort_key", "sort_tasks"]

KIND_ORDER: tuple[str, ...] = (
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "Endpoints",  # meshpilot: a Service's endpoints right after it
    "EndpointSlice",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    # meshpilot: the mesh's kinds, referenced objects before those that reference them.
    "ServiceEntry",
    "WorkloadEntry",
    "WorkloadGroup",
    "PeerAuthentication",
    "RequestAuthentication",
    "AuthorizationPolicy",
    "DestinationRule",
    "Gateway",
    "Sidecar",
    "VirtualService",
    "EnvoyFilter",
)

_RANK = {kind: index - len(KIND_ORDER) for index, kind in enumerate(KIND_ORDER)}


def kind_rank(kind: str) -> int:
    """Negative for known kinds, 0 for the rest (gitops-engine's trick)."""
    return _RANK.get(kind, 0)


def sort_key(task: SyncTask) -> tuple[int, int, int, str]:
    return (task.phase.order, task.wave, kind_rank(task.key.kind), task.key.name)


def sort_tasks(tasks: Iterable[SyncTask]) -> list[SyncTask]:
    ordered = sorted(tasks, key=sort_key)
    ordered = _adjust(ordered, _namespace_of_task, _namespace_used)
    return _adjust(ordered, _crd_defined, _crd_used)


DepKey = Callable[[SyncTask], str | None]


def _adjust(tasks: list[SyncTask], provides: DepKey, needs: DepKey) -> list[SyncTask]:
    """Move each task that provides a dependency before the first task needing it, taking
    that task's phase and wave (gitops-engine adjustDeps). Only written objects count."""
    first_need: dict[str, int] = {}
    out = list(tasks)
    for index, task in enumerate(list(out)):
        if not task.writes:
            continue
        dep = provides(task)
        if dep is not None:
            at = first_need.get(dep)
            if at is not None:
                head = out[at]
                moved = replace(task, phase=head.phase, wave=head.wave)
                del out[index]
                out.insert(at, moved)
                first_need = {k: v + 1 if v >= at else v for k, v in first_need.items()}
            continue
        need = needs(task)
        if need is not None:
            first_need.setdefault(need, index)
    return out


def _namespace_of_task(task: SyncTask) -> str | None:
    return task.key.name if task.key.kind == "Namespace" and task.key.group == "" else None


def _namespace_used(task: SyncTask) -> str | None:
    return task.key.namespace or None


def _crd_defined(task: SyncTask) -> str | None:
    if task.key.kind != "CustomResourceDefinition" or task.target is None:
        return None
    spec = task.target.get("spec") or {}
    group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
    return f"{group}/{kind}" if group and kind else None


def _crd_used(task: SyncTask) -> str | None:
    return f"{task.key.group}/{task.key.kind}"
