"""Facts about a workload (Pod or WorkloadEntry) that endpoints and proxies carry."""

from __future__ import annotations

import re
from collections.abc import Mapping

from meshpilot.registry.model import Locality

__all__ = [
    "TLS_MODE_LABEL",
    "canonical_revision",
    "canonical_service",
    "locality_from_labels",
    "pod_workload_name",
    "tls_mode_from_labels",
    "workload_metadata",
]

TLS_MODE_LABEL = "security.istio.io/tlsMode"
_HASH_SUFFIX = re.compile(r"-[a-z0-9]{5}$")


def tls_mode_from_labels(labels: Mapping[str, str]) -> str:
    """Istio's tlsMode label; injected workloads carry 'istio'."""
    return labels.get(TLS_MODE_LABEL, "")


def locality_from_labels(labels: Mapping[str, str]) -> Locality:
    if "istio-locality" in labels:
        return Locality.parse(labels["istio-locality"])
    return Locality(
        labels.get("topology.kubernetes.io/region", ""),
        labels.get("topology.kubernetes.io/zone", ""),
        labels.get("topology.istio.io/subzone", ""),
    )


def pod_workload_name(pod_name: str, labels: Mapping[str, str]) -> str:
    """The owning Deployment's name, derived as Istio does from the ReplicaSet hash."""
    template_hash = labels.get("pod-template-hash")
    if template_hash:
        marker = f"-{template_hash}-"
        if marker in pod_name:
            return pod_name.rsplit(marker, 1)[0]
    if labels.get("controller-revision-hash"):  # StatefulSet / DaemonSet pods
        return _HASH_SUFFIX.sub("", pod_name)
    return pod_name


def canonical_service(labels: Mapping[str, str], workload: str) -> str:
    for key in ("service.istio.io/canonical-name", "app.kubernetes.io/name", "app"):
        if labels.get(key):
            return labels[key]
    return workload


def canonical_revision(labels: Mapping[str, str]) -> str:
    for key in ("service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"):
        if labels.get(key):
            return labels[key]
    return "latest"


def workload_metadata(
    workload: str, namespace: str, labels: Mapping[str, str], cluster_id: str = "Kubernetes"
) -> str:
    """The compressed `istio.workload` endpoint metadata: name;ns;canonical-svc;rev;cluster."""
    return ";".join(
        (
            workload,
            namespace,
            canonical_service(labels, workload),
            canonical_revision(labels),
            cluster_id,
        )
    )
