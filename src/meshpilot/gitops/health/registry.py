"""Registry of health checks by (group, kind), as gitops-engine's GetHealthCheckFunc, and the
assessment of one live resource."""

from __future__ import annotations

from collections.abc import Mapping

from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of
from meshpilot.gitops.health.core import existing_health, namespace_health, service_health
from meshpilot.gitops.health.endpoints import endpoints_health
from meshpilot.gitops.health.mesh import MeshFindings, mesh_health
from meshpilot.gitops.health.pod import pod_health
from meshpilot.gitops.health.status import Check, Health, HealthStatusCode, healthy
from meshpilot.gitops.health.workloads import (
    daemon_set_health,
    deployment_health,
    stateful_set_health,
)

__all__ = ["HEALTH_CHECKS", "MESH_GROUPS", "check_for", "resource_health"]

# Groups of the mesh's own kinds: Healthy once accepted, Degraded on a finding.
MESH_GROUPS = frozenset({"networking.istio.io", "security.istio.io"})


def _mesh_accepted(obj: Manifest) -> Health:
    return healthy()


HEALTH_CHECKS: Mapping[tuple[str, str], Check] = {
    ("", "Namespace"): namespace_health,
    ("", "Service"): service_health,
    ("", "Secret"): existing_health,
    ("", "ConfigMap"): existing_health,
    ("", "ServiceAccount"): existing_health,
    ("", "Endpoints"): endpoints_health,
    ("discovery.k8s.io", "EndpointSlice"): existing_health,
    ("", "Pod"): pod_health,
    ("apps", "Deployment"): deployment_health,
    ("apps", "StatefulSet"): stateful_set_health,
    ("apps", "DaemonSet"): daemon_set_health,
    **{
        (group, kind): _mesh_accepted
        for group, kind in (
            ("networking.istio.io", "Gateway"),
            ("networking.istio.io", "VirtualService"),
            ("networking.istio.io", "DestinationRule"),
            ("networking.istio.io", "ServiceEntry"),
            ("networking.istio.io", "WorkloadEntry"),
            ("networking.istio.io", "Sidecar"),
            ("security.istio.io", "PeerAuthentication"),
            ("security.istio.io", "RequestAuthentication"),
            ("security.istio.io", "AuthorizationPolicy"),
        )
    },
}


def check_for(key: ResourceKey) -> Check | None:
    return HEALTH_CHECKS.get((key.group, key.kind))


def resource_health(
    live: Manifest | None, key: ResourceKey | None = None, findings: MeshFindings | None = None
) -> Health | None:
    """Health of a live object; Missing when there is none; None for a kind without a check
    (Argo CD leaves those out of the app's health). A mesh finding that is an error makes
    the object Degraded whatever its own check says."""
    if live is None:
        return Health(HealthStatusCode.MISSING)
    key = key or key_of(live)
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return Health(HealthStatusCode.PROGRESSING, "Pending deletion")
    if findings is not None and (degraded := mesh_health(key, findings)) is not None:
        return degraded
    check = check_for(key)
    if check is None:
        return None
    try:
        return check(live)
    except (TypeError, ValueError, AttributeError) as exc:
        # A malformed status must not stop the assessment of the rest (gitops-engine: Unknown).
        return Health(HealthStatusCode.UNKNOWN, f"cannot assess health: {exc}")
