"""Notification events: what changed in an Application's status between two reconciles.

Argo CD Notifications evaluates triggers (`on-sync-running`, `on-sync-succeeded`, ...) on
every status update and sends once per transition (`oncePer`). Here a trigger fires when
the status *moves into* its state: comparing the previous and the new `AppFacts` of an app
is all it takes, and a restarted controller starts from the stored status, so it does not
repeat what was already sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from meshpilot.gitops.model import Application, HealthStatusCode, OperationPhase, SyncStatusCode

__all__ = ["AppFacts", "EventType", "NotificationEvent", "facts_of", "transitions"]


class EventType(StrEnum):
    """Trigger names as in Argo CD's notifications catalog (plus out-of-sync)."""

    SYNC_RUNNING = "on-sync-running"
    SYNC_SUCCEEDED = "on-sync-succeeded"
    SYNC_FAILED = "on-sync-failed"
    OUT_OF_SYNC = "on-out-of-sync"
    HEALTH_DEGRADED = "on-health-degraded"


@dataclass(frozen=True, slots=True)
class AppFacts:
    """The status facts notifications speak about; nothing from manifests (no Secret can leak
    through a field that is not here)."""

    name: str
    namespace: str
    project: str
    repo_url: str
    sync_status: SyncStatusCode
    health_status: HealthStatusCode
    health_message: str = ""
    revision: str = ""
    operation_phase: OperationPhase | None = None
    operation_message: str = ""
    operation_started_at: str = ""
    operation_revision: str = ""


@dataclass(frozen=True, slots=True)
class NotificationEvent:
    type: EventType
    app: AppFacts
    time: str
    # The pull request the revision came from, when known (webhook payload or mapping).
    pull_request: int | None = None

    @property
    def revision(self) -> str:
        """The revision the event is about: the operation's for sync events."""
        if self.type in _SYNC_EVENTS and self.app.operation_revision:
            return self.app.operation_revision
        return self.app.revision


_SYNC_EVENTS = (EventType.SYNC_RUNNING, EventType.SYNC_SUCCEEDED, EventType.SYNC_FAILED)


def facts_of(app: Application, namespace: str) -> AppFacts:
    status = app.status
    op = status.operation_state
    sources = app.spec.all_sources
    op_revision = ""
    if op is not None and op.sync_result is not None:
        op_revision = op.sync_result.revision
    return AppFacts(
        name=app.name,
        namespace=namespace,
        project=app.spec.project_name,
        repo_url=sources[0].repo_url if sources else "",
        sync_status=status.sync.status,
        health_status=status.health.status,
        health_message=status.health.message,
        revision=status.sync.revision,
        operation_phase=op.phase if op is not None else None,
        operation_message=op.message if op is not None else "",
        operation_started_at=(op.started_at or "") if op is not None else "",
        operation_revision=op_revision,
    )


def transitions(old: AppFacts | None, new: AppFacts) -> list[EventType]:
    """Triggers that fire going from `old` to `new` (None: the app was just created)."""
    out: list[EventType] = []
    phase = new.operation_phase
    same_op = old is not None and old.operation_started_at == new.operation_started_at
    old_phase = old.operation_phase if same_op and old is not None else None
    if phase is not None and phase != old_phase:
        if phase.running:
            out.append(EventType.SYNC_RUNNING)
        elif phase is OperationPhase.SUCCEEDED:
            out.append(EventType.SYNC_SUCCEEDED)
        elif phase in (OperationPhase.FAILED, OperationPhase.ERROR):
            out.append(EventType.SYNC_FAILED)
    old_sync = old.sync_status if old is not None else None
    if new.sync_status is SyncStatusCode.OUT_OF_SYNC and old_sync is not SyncStatusCode.OUT_OF_SYNC:
        out.append(EventType.OUT_OF_SYNC)
    old_health = old.health_status if old is not None else None
    if (
        new.health_status is HealthStatusCode.DEGRADED
        and old_health is not HealthStatusCode.DEGRADED
    ):
        out.append(EventType.HEALTH_DEGRADED)
    return out


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
