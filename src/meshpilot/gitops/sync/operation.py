"""A sync operation's inputs and outcome, the per-app operation lock, retry backoff, and the
status an operation leaves on the Application (operationState, history).

Messages are Argo CD's: `successfully synced (all tasks run)`, `one or more objects failed
to apply, reason: ...`, `another operation is already in progress`, `... (retried N times)`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from meshpilot.config.duration import parse_duration
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import (
    Application,
    ApplicationStatus,
    OperationPhase,
    OperationState,
    RevisionHistory,
)
from meshpilot.gitops.model.application import RetryStrategy
from meshpilot.gitops.model.status import SyncOperationResult
from meshpilot.gitops.sync.plan import SyncPlan

if TYPE_CHECKING:
    from meshpilot.gitops.refresh_state import AppState

__all__ = [
    "OperationInProgress",
    "SyncOutcome",
    "SyncParams",
    "backoff_delays",
    "finished_status",
    "next_history_id",
    "operation_lock",
]

SUCCESS_MESSAGE = "successfully synced (all tasks run)"


class OperationInProgress(GitopsError):
    def __init__(self) -> None:
        super().__init__("another operation is already in progress")


@dataclass(frozen=True, slots=True)
class SyncParams:
    """One requested sync. `revisions` override targetRevision per source position (a
    single-source app: one item); `resources` limits a selective sync; `automated` marks
    a sync started by the controller (sync windows and initiatedBy differ); `source`
    replaces spec.source(s) for this operation (rollback syncs the recorded source)."""

    prune: bool = False
    dry_run: bool = False
    revisions: tuple[str, ...] | None = None
    resources: frozenset[ResourceKey] | None = None
    automated: bool = False
    username: str = ""
    retry: RetryStrategy | None = None  # default: the app's syncPolicy.retry
    sources: tuple[dict[str, Any], ...] | None = None
    rollback_id: int | None = None

    def operation(self) -> dict[str, Any]:
        """`status.operationState.operation` as Argo CD records it."""
        sync: dict[str, Any] = {"prune": self.prune}
        if self.revisions:
            if len(self.revisions) == 1:
                sync["revision"] = self.revisions[0]
            else:
                sync["revisions"] = list(self.revisions)
        if self.dry_run:
            sync["dryRun"] = True
        if self.resources is not None:
            sync["resources"] = [
                {"group": k.group, "kind": k.kind, "namespace": k.namespace, "name": k.name}
                for k in sorted(self.resources)
            ]
        return {"sync": sync, "initiatedBy": self.initiated_by(), "retry": {}}

    def initiated_by(self) -> dict[str, Any]:
        if self.automated:
            return {"automated": True}
        return {"username": self.username or "admin"}


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """What a sync did. `resources` are Argo CD ResourceResult rows (group, kind,
    namespace, name, status Synced/SyncFailed/Pruned/PruneSkipped, message, syncPhase)."""

    phase: OperationPhase
    message: str
    revision: str = ""
    revisions: tuple[str, ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    plan: SyncPlan | None = field(default=None, repr=False)
    dry_run: bool = False
    retry_count: int = 0
    started_at: str = ""
    finished_at: str = ""
    history_id: int | None = None
    # The comparison the status after the operation was made from (against the spec's
    # own targetRevision): a caller writing the status again need not compare again.
    after: AppState | None = field(default=None, repr=False, compare=False)

    @property
    def succeeded(self) -> bool:
        return self.phase.successful


def backoff_delays(retry: RetryStrategy | None) -> list[float]:
    """Seconds to wait before each retry: duration * factor^n, capped at maxDuration
    (Argo CD's defaults 5s, 2, 3m). A negative limit means unlimited in Argo CD; here it is
    capped at 100 retries so a bad commit cannot loop forever."""
    if retry is None or retry.limit == 0:
        return []
    backoff = retry.backoff
    base = _seconds(backoff.duration if backoff else "5s", "duration")
    factor = backoff.factor if backoff else 2
    cap = _seconds(backoff.max_duration if backoff else "3m", "maxDuration")
    count = retry.limit if retry.limit > 0 else 100
    return [min(base * (factor**n), cap) for n in range(count)]


def _seconds(text: str, name: str) -> float:
    try:
        return parse_duration(text) / 1e9
    except ValueError as exc:
        raise GitopsError(f"spec.syncPolicy.retry.backoff.{name}: {exc}") from None


@contextlib.contextmanager
def operation_lock(lock_dir: Path | None, app: Application) -> Iterator[None]:
    """One operation at a time per app, across processes: an exclusive flock on
    `<lock_dir>/<namespace>_<name>.lock`; OperationInProgress when another holds it."""
    if lock_dir is None:
        yield
        return
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = lock_dir / f"{app.metadata.namespace or 'default'}_{app.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OperationInProgress() from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def finished_status(
    status: ApplicationStatus, app: Application, params: SyncParams, outcome: SyncOutcome
) -> ApplicationStatus:
    """`status` with the operation's state and, when it succeeded for real, a history entry
    (ids increase; at most spec.revisionHistoryLimit entries kept, default 10)."""
    source = _source(app, params)
    state = OperationState(
        operation=params.operation(),
        phase=outcome.phase,
        message=outcome.message,
        sync_result=SyncOperationResult(
            resources=list(outcome.resources),
            revision=outcome.revision,
            revisions=list(outcome.revisions) if len(outcome.revisions) > 1 else [],
            source=source if not app.spec.sources else None,
        ),
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        retry_count=outcome.retry_count,
    )
    history = list(status.history)
    if outcome.succeeded and not outcome.dry_run and outcome.history_id is not None:
        multi = bool(app.spec.sources) or (params.sources is not None and len(params.sources) > 1)
        history.append(
            RevisionHistory(
                id=outcome.history_id,
                revision="" if multi else outcome.revision,
                revisions=list(outcome.revisions) if multi else [],
                deployed_at=outcome.finished_at,
                deploy_started_at=outcome.started_at,
                source=None if multi else source,
                sources=_sources(app, params) if multi else [],
                initiated_by=params.initiated_by(),
            )
        )
        limit = max(app.spec.revision_history_limit, 1)
        history = history[-limit:]
    return status.model_copy(update={"operation_state": state, "history": history})


def next_history_id(status: ApplicationStatus) -> int:
    return max((h.id for h in status.history), default=-1) + 1


def _sources(app: Application, params: SyncParams) -> list[dict[str, Any]]:
    if params.sources is not None:
        return [dict(s) for s in params.sources]
    return [s.model_dump(by_alias=True, exclude_none=True) for s in app.spec.all_sources]


def _source(app: Application, params: SyncParams) -> dict[str, Any] | None:
    sources = _sources(app, params)
    return sources[0] if sources else None
