"""Whether the controller syncs an app by itself now (Argo CD's `autoSync` rules).

- only with syncPolicy.automated, when the comparison is OutOfSync and no operation runs;
- an automated operation left Running by a controller that died is run again to its end;
- not when every difference needs pruning and automated.prune is off;
- not when prune would delete everything and allowEmpty is off ("wipe out all resources");
- a revision already synced is not synced again, unless selfHeal is on and the last sync
  to it succeeded: then drift is undone once the self-heal timeout has passed since that
  sync finished (before: wait the remainder and look again);
- a failed sync to a revision is not retried automatically (retry belongs to
  syncPolicy.retry inside the operation); the app gets a SyncError condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from meshpilot.gitops.model import Application, OperationPhase, SyncStatusCode
from meshpilot.gitops.refresh import AppState

__all__ = ["AutoSync", "decide"]


@dataclass(frozen=True, slots=True)
class AutoSync:
    sync: bool
    reason: str = ""
    wait: float | None = None  # look again after this many seconds
    self_heal: bool = False
    error: str = ""  # a SyncError condition message for the app


def decide(
    app: Application,
    state: AppState,
    self_heal_timeout: float,
    now: float,
    finished_hint: float = 0.0,
    interrupted: bool = False,
) -> AutoSync:
    """`now` is a UNIX time (operationState.finishedAt is wall-clock, to the second);
    `finished_hint` is the controller's own, finer record of the last sync's end.
    `interrupted`: the stored operation is Running but nobody runs it (its controller
    died): it is run again to its end, synced or not, so that it is recorded once."""
    policy = app.spec.sync_policy
    if policy is None or not policy.is_automated or policy.automated is None:
        return AutoSync(False, "manual sync policy")
    automated = policy.automated
    comparison = state.comparison
    running = app.status.operation_state
    if interrupted and running is not None and running.phase.running and state.ok:
        return AutoSync(True, "resuming an interrupted automated sync")
    if comparison is None or not state.ok or state.sync_status is not SyncStatusCode.OUT_OF_SYNC:
        return AutoSync(False, f"sync status {state.sync_status}")
    op = app.status.operation_state
    if op is not None and op.phase.running:
        return AutoSync(False, "an operation is running")
    differing = [r for r in comparison.resources if r.status is SyncStatusCode.OUT_OF_SYNC]
    if differing and not automated.prune and all(r.requires_pruning for r in differing):
        return AutoSync(False, "only resources that require pruning differ; prune is off")
    wipes_all = bool(comparison.resources) and all(r.requires_pruning for r in comparison.resources)
    if automated.prune and not automated.allow_empty and wipes_all:
        return AutoSync(False, error="auto-sync will wipe out all resources")
    revisions = state.revisions
    last = op.sync_result if op is not None else None
    attempted = (
        op is not None
        and last is not None
        and (last.revisions or [last.revision]) == revisions
        and not _was_dry_run(op.operation)
    )
    if not attempted or op is None:
        return AutoSync(True, f"new revision {_short(revisions)}")
    if op.phase is not OperationPhase.SUCCEEDED:
        message = f"Failed sync attempt to {_short(revisions)}: {op.message}"
        return AutoSync(False, "previous sync attempt failed", error=message)
    if not automated.self_heal:
        return AutoSync(False, f"most recent sync already to {_short(revisions)}")
    finished = max(_unix(op.finished_at), finished_hint)
    remaining = self_heal_timeout - (now - finished)
    if remaining > 0:
        return AutoSync(False, "self-heal timeout not passed", wait=remaining)
    return AutoSync(True, "self-heal: undoing drift", self_heal=True)


def _was_dry_run(operation: dict[str, object]) -> bool:
    sync = operation.get("sync")
    return isinstance(sync, dict) and bool(sync.get("dryRun"))


def _short(revisions: list[str]) -> str:
    return ", ".join(r[:7] for r in revisions) or "<none>"


def _unix(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0
