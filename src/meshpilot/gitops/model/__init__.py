"""Argo CD's Application and AppProject as typed models, and their registration as store kinds.

The loader (a mesh package) cannot import gitops, so the kinds are registered through
`config.models.register_model`; the CLI calls `register_gitops_kinds()` once at start-up.
"""

from __future__ import annotations

from meshpilot.config.kinds import Kind
from meshpilot.config.models import register_model
from meshpilot.gitops.model.application import (
    IN_CLUSTER_NAME,
    IN_CLUSTER_SERVER,
    Application,
    ApplicationDestination,
    ApplicationSource,
    ApplicationSpec,
    DirectorySource,
    HelmSource,
    PluginSource,
    ResourceIgnoreDifferences,
    SyncPolicy,
)
from meshpilot.gitops.model.project import (
    DEFAULT_PROJECT,
    AppProject,
    AppProjectSpec,
    GroupKind,
    ProjectDestination,
    ProjectRole,
    SyncWindow,
    default_project,
)
from meshpilot.gitops.model.status import (
    ApplicationCondition,
    ApplicationStatus,
    ConditionType,
    HealthStatus,
    HealthStatusCode,
    OperationPhase,
    OperationState,
    ResourceStatus,
    RevisionHistory,
    SyncStatus,
    SyncStatusCode,
)

__all__ = [
    "DEFAULT_PROJECT",
    "IN_CLUSTER_NAME",
    "IN_CLUSTER_SERVER",
    "AppProject",
    "AppProjectSpec",
    "Application",
    "ApplicationCondition",
    "ApplicationDestination",
    "ApplicationSource",
    "ApplicationSpec",
    "ApplicationStatus",
    "ConditionType",
    "DirectorySource",
    "GroupKind",
    "HealthStatus",
    "HealthStatusCode",
    "HelmSource",
    "OperationPhase",
    "OperationState",
    "PluginSource",
    "ProjectDestination",
    "ProjectRole",
    "ResourceIgnoreDifferences",
    "ResourceStatus",
    "RevisionHistory",
    "SyncPolicy",
    "SyncStatus",
    "SyncStatusCode",
    "SyncWindow",
    "default_project",
    "register_gitops_kinds",
]


def register_gitops_kinds() -> None:
    """Let the loader (and so the live store) validate Applications and AppProjects.
    Idempotent."""
    register_model(Kind.APPLICATION, Application)
    register_model(Kind.APP_PROJECT, AppProject)
