"""Health assessment (gitops-engine `health`): one small check per kind, a registry by
(group, kind), the mesh's own kinds judged by meshpilot's validators and analyzers, and the
Application's health as the worst of its resources'."""

from __future__ import annotations

from meshpilot.gitops.health.app import AppHealth, assess_app, worst
from meshpilot.gitops.health.mesh import MeshFindings, analyze_manifests, mesh_health, overlay
from meshpilot.gitops.health.registry import HEALTH_CHECKS, check_for, resource_health
from meshpilot.gitops.health.status import Check, Health, HealthStatusCode

__all__ = [
    "HEALTH_CHECKS",
    "AppHealth",
    "Check",
    "Health",
    "HealthStatusCode",
    "MeshFindings",
    "analyze_manifests",
    "assess_app",
    "check_for",
    "mesh_health",
    "overlay",
    "resource_health",
    "worst",
]
