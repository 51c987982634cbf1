"""An Application's health: the worst of its resources' (gitops-engine order Healthy <
Suspended < Progressing < Missing < Degraded < Unknown). Hooks, and kinds without a check,
do not count; a resource in Git but not in the store is Missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.diff.result import Comparison
from meshpilot.gitops.health.mesh import MeshFindings
from meshpilot.gitops.health.registry import resource_health
from meshpilot.gitops.health.status import Health, HealthStatusCode

__all__ = ["AppHealth", "assess_app", "worst"]


@dataclass(frozen=True, slots=True)
class AppHealth:
    status: HealthStatusCode
    message: str = ""
    resources: Mapping[ResourceKey, Health | None] = field(default_factory=dict)


def worst(healths: Mapping[ResourceKey, Health | None]) -> tuple[HealthStatusCode, str]:
    """The worst status and a message naming the first resource that has it."""
    counted = {k: h for k, h in sorted(healths.items()) if h is not None}
    status = HealthStatusCode.worst([h.status for h in counted.values()])
    if status is HealthStatusCode.HEALTHY:
        return status, ""
    key, health = next((k, h) for k, h in counted.items() if h.status is status)
    return status, f"{key}: {health.message}" if health.message else f"{key}: {status}"


def assess_app(comparison: Comparison, findings: MeshFindings | None = None) -> AppHealth:
    """Health of every managed resource (live state) and of the app."""
    healths: dict[ResourceKey, Health | None] = {
        res.key: resource_health(res.live, res.key, findings) for res in comparison.resources
    }
    status, message = worst(healths)
    return AppHealth(status, message, healths)
