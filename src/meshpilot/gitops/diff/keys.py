"""The identity of a manifest: (group, kind, namespace, name), as Argo CD keys resources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLUSTER_SCOPED_KINDS",
    "Manifest",
    "ResourceKey",
    "group_of",
    "is_namespaced",
    "key_of",
]

# A Kubernetes-style object as rendered from Git or read from the store.
Manifest = Mapping[str, Any]

# Kinds without a namespace. Anything else is namespaced (as are all Istio kinds).
CLUSTER_SCOPED_KINDS: frozenset[str] = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "IngressClass",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "MeshConfig",
    }
)


@dataclass(frozen=True, slots=True, order=True)
class ResourceKey:
    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        kind = f"{self.group}/{self.kind}" if self.group else self.kind
        return f"{kind}/{self.namespace}/{self.name}" if self.namespace else f"{kind}/{self.name}"


def group_of(api_version: str) -> str:
    """`networking.istio.io/v1` -> `networking.istio.io`; `v1` -> `` (the core group)."""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def is_namespaced(kind: str) -> bool:
    return kind not in CLUSTER_SCOPED_KINDS


def key_of(obj: Manifest, default_namespace: str = "") -> ResourceKey:
    """The key of `obj`. A namespaced object without a namespace is in `default_namespace`
    (the Application's destination namespace); a cluster-scoped one has none."""
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind") or "")
    namespace = str(meta.get("namespace") or "") if is_namespaced(kind) else ""
    if not namespace and is_namespaced(kind):
        namespace = default_namespace
    name = str(meta.get("name") or meta.get("generateName") or "")
    return ResourceKey(group_of(str(obj.get("apiVersion") or "")), kind, namespace, name)
