"""Application status as Argo CD reports it: sync, health, conditions, operation, history.

Value sets and their order follow Argo CD / gitops-engine, so that `kubectl get applications`
trained eyes read them unchanged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel

__all__ = [
    "ApplicationCondition",
    "ApplicationStatus",
    "ConditionType",
    "HealthStatus",
    "HealthStatusCode",
    "OperationPhase",
    "OperationState",
    "ResourceStatus",
    "RevisionHistory",
    "SyncOperationResult",
    "SyncStatus",
    "SyncStatusCode",
]


class SyncStatusCode(StrEnum):
    SYNCED = "Synced"
    OUT_OF_SYNC = "OutOfSync"
    UNKNOWN = "Unknown"


class HealthStatusCode(StrEnum):
    """Health of a resource or an app. Members are declared from most to least healthy,
    gitops-engine's `healthOrder`; an app's health is its worst resource's."""

    HEALTHY = "Healthy"
    SUSPENDED = "Suspended"
    PROGRESSING = "Progressing"
    MISSING = "Missing"
    DEGRADED = "Degraded"
    UNKNOWN = "Unknown"

    @property
    def rank(self) -> int:
        return _HEALTH_ORDER.index(self)

    def is_worse(self, other: HealthStatusCode) -> bool:
        """True when `self` is less healthy than `other` (gitops-engine `IsWorse`)."""
        return self.rank > other.rank

    @classmethod
    def worst(cls, codes: list[HealthStatusCode]) -> HealthStatusCode:
        """The least healthy of `codes`; Healthy when there are none."""
        return max(codes, key=lambda c: c.rank, default=cls.HEALTHY)


_HEALTH_ORDER = list(HealthStatusCode)


class OperationPhase(StrEnum):
    RUNNING = "Running"
    TERMINATING = "Terminating"
    FAILED = "Failed"
    ERROR = "Error"
    SUCCEEDED = "Succeeded"

    @property
    def completed(self) -> bool:
        return self in (OperationPhase.FAILED, OperationPhase.ERROR, OperationPhase.SUCCEEDED)

    @property
    def running(self) -> bool:
        return self in (OperationPhase.RUNNING, OperationPhase.TERMINATING)

    @property
    def successful(self) -> bool:
        return self is OperationPhase.SUCCEEDED


class ConditionType(StrEnum):
    """Argo CD's Application condition types (errors, then warnings)."""

    INVALID_SPEC_ERROR = "InvalidSpecError"
    COMPARISON_ERROR = "ComparisonError"
    SYNC_ERROR = "SyncError"
    UNKNOWN_ERROR = "UnknownError"
    SHARED_RESOURCE_WARNING = "SharedResourceWarning"
    REPEATED_RESOURCE_WARNING = "RepeatedResourceWarning"
    EXCLUDED_RESOURCE_WARNING = "ExcludedResourceWarning"
    ORPHANED_RESOURCE_WARNING = "OrphanedResourceWarning"

    @property
    def is_error(self) -> bool:
        return self.value.endswith("Error")


class HealthStatus(ApiModel):
    status: HealthStatusCode = HealthStatusCode.UNKNOWN
    message: str = ""


class SyncStatus(ApiModel):
    status: SyncStatusCode = SyncStatusCode.UNKNOWN
    revision: str = ""
    revisions: list[str] = Field(default_factory=list)
    # What the comparison was made against: {source, destination} as in Argo CD.
    compared_to: dict[str, Any] | None = None


class ApplicationCondition(ApiModel):
    type: ConditionType
    message: str
    last_transition_time: str | None = None


class ResourceStatus(ApiModel):
    """One managed resource in `status.resources`."""

    group: str = ""
    version: str = ""
    kind: str
    namespace: str = ""
    name: str
    status: SyncStatusCode = SyncStatusCode.UNKNOWN
    health: HealthStatus | None = None
    hook: bool = False
    requires_pruning: bool = False
    sync_wave: int = 0


class SyncOperationResult(ApiModel):
    resources: list[dict[str, Any]] = Field(default_factory=list)
    revision: str = ""
    revisions: list[str] = Field(default_factory=list)
    source: dict[str, Any] | None = None


class OperationState(ApiModel):
    operation: dict[str, Any] = Field(default_factory=dict)
    phase: OperationPhase
    message: str = ""
    sync_result: SyncOperationResult | None = None
    started_at: str | None = None
    finished_at: str | None = None
    retry_count: int = 0


class RevisionHistory(ApiModel):
    id: int
    revision: str = ""
    revisions: list[str] = Field(default_factory=list)
    deployed_at: str | None = None
    deploy_started_at: str | None = None
    source: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    initiated_by: dict[str, Any] | None = None


class ApplicationStatus(ApiModel):
    sync: SyncStatus = Field(default_factory=SyncStatus)
    health: HealthStatus = Field(default_factory=HealthStatus)
    conditions: list[ApplicationCondition] = Field(default_factory=list)
    operation_state: OperationState | None = None
    history: list[RevisionHistory] = Field(default_factory=list)
    resources: list[ResourceStatus] = Field(default_factory=list)
    reconciled_at: str | None = None
    observed_at: str | None = None
    source_type: str = ""
    summary: dict[str, Any] = Field(default_factory=dict)
