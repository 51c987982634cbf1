"""Kinds that are healthy once they exist: Namespace (unless terminating), Secret,
ConfigMap, ServiceAccount; and Service (a LoadBalancer waits for its ingress address)."""

from __future__ import annotations

from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.health.status import Health, healthy, progressing

__all__ = ["existing_health", "namespace_health", "service_health"]


def existing_health(obj: Manifest) -> Health:
    return healthy()


def namespace_health(obj: Manifest) -> Health:
    if (obj.get("status") or {}).get("phase") == "Terminating":
        return progressing("Namespace is terminating")
    return healthy()


def service_health(obj: Manifest) -> Health:
    """gitops-engine: only a LoadBalancer has something to wait for."""
    if (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return healthy()
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        return healthy()
    return progressing("Waiting for the load balancer to get an address")
