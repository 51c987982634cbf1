"""GitOps delivery (Argo CD style): Applications and AppProjects, projects, RBAC, and (from
other modules of this package) repo rendering, diff, health and sync.

Only the light, stable surface is re-exported here; subpackages are imported directly.
The package talks to the live store through `meshpilot.store` interfaces only, and mesh
packages never import it (DESIGN.md import rules).
"""

from __future__ import annotations

from meshpilot.gitops.model import (
    Application,
    AppProject,
    HealthStatusCode,
    OperationPhase,
    SyncStatusCode,
    register_gitops_kinds,
)

__all__ = [
    "AppProject",
    "Application",
    "HealthStatusCode",
    "OperationPhase",
    "SyncStatusCode",
    "register_gitops_kinds",
]
