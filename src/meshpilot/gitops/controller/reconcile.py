"""One reconcile of one Application (runs in a worker thread): refresh, health with the
mesh findings, auto-sync (with self-heal), status written when it changed, and the
notification events of the transitions. The async loop (loop.py) decides when."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.controller.autosync import AutoSync, decide
from meshpilot.gitops.controller.view import StoreView
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.health import assess_app
from meshpilot.gitops.model import (
    Application,
    ApplicationCondition,
    ApplicationStatus,
    ConditionType,
    OperationPhase,
    OperationState,
)
from meshpilot.gitops.notify.events import (
    AppFacts,
    EventType,
    NotificationEvent,
    facts_of,
    now,
    transitions,
)
from meshpilot.gitops.refresh import AppState, RefreshDeps, refresh_app, save_status
from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import (
    OperationInProgress,
    SyncOutcome,
    SyncParams,
    operation_lock,
)
from meshpilot.gitops.windows import SyncWindowBlocked

__all__ = ["ReconcileResult", "Reconciler", "config_key"]

_VOLATILE = {"reconciled_at", "observed_at"}


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    key: ConfigKey
    exists: bool
    owned: frozenset[ConfigKey] = frozenset()
    sources: tuple[tuple[str, str], ...] = ()  # (repoURL, targetRevision) for webhooks
    events: tuple[NotificationEvent, ...] = ()
    wait: float | None = None  # look again after this many seconds
    outcome: SyncOutcome | None = None
    sync_status: str = ""  # what the refresh found (before any auto-sync)
    final_status: str = ""  # after the auto-sync, if one ran
    seconds: float = 0.0
    status_written: bool = False
    errors: tuple[str, ...] = field(default=())


def config_key(key: ResourceKey) -> ConfigKey | None:
    try:
        return ConfigKey(Kind(key.kind), key.namespace, key.name)
    except ValueError:
        return None


class Reconciler:
    def __init__(
        self,
        view: StoreView,
        deps: RefreshDeps,
        self_heal_timeout: float,
        lock_dir: Path | None,
        stopping: threading.Event,
    ) -> None:
        self.view = view
        self.deps = deps
        self.self_heal_timeout = self_heal_timeout
        self.lock_dir = lock_dir
        self.stopping = stopping
        self._finished: dict[ConfigKey, float] = {}  # our own syncs' ends (UNIX time)

    def reconcile(self, key: ConfigKey) -> ReconcileResult:
        started = time.perf_counter()
        app = self._load(key)
        if app is None:
            self._finished.pop(key, None)
            return ReconcileResult(key, exists=False)
        before = facts_of(app, key.namespace)
        state = self.refresh(app)
        decision = decide(
            app, state, self.self_heal_timeout, time.time(), self._finished.get(key, 0)
        )
        status = _with_sync_error(state.status(previous=app.status), decision)
        written = self._save(key, app.status, status)
        after = facts_of(app.model_copy(update={"status": status}), key.namespace)
        events = [_event(t, after) for t in transitions(before, after)]
        outcome = None
        found = str(state.sync_status)
        if decision.sync:
            outcome, more, state = self._auto_sync(key, app, after, decision)
            events += more
            written = True
        return ReconcileResult(
            key=key,
            exists=True,
            owned=_owned(state),
            sources=tuple((s.repo_url, s.revision) for s in app.spec.all_sources),
            events=tuple(events),
            wait=decision.wait,
            outcome=outcome,
            sync_status=found,
            final_status=str(state.sync_status),
            seconds=time.perf_counter() - started,
            status_written=written,
            errors=state.errors,
        )

    def refresh(self, app: Application) -> AppState:
        """refresh_app, with health judged against the mesh findings of the whole store
        (computed once per store version rather than once per app)."""
        state = refresh_app(app, self.deps)
        if state.comparison is None:
            return state
        return replace(state, health=assess_app(state.comparison, self.view.mesh_findings()))

    def _load(self, key: ConfigKey) -> Application | None:
        obj = self.view.get(key)
        model = obj.model if obj is not None else None
        return model if isinstance(model, Application) else None

    def _save(
        self, key: ConfigKey, old: ApplicationStatus, new: ApplicationStatus, own_op: bool = False
    ) -> bool:
        """Write `new` unless only timestamps changed. Under the app's operation lock, so a
        sync (CLI, API) cannot finish between our read and our write; while one runs we
        leave the status to it (its end is a store event that brings us back)."""
        app = self._load(key)
        if app is None:
            return False
        try:
            with operation_lock(self.lock_dir, app):
                return self._save_locked(key, old, new, own_op)
        except OperationInProgress:
            return False

    def _save_locked(
        self, key: ConfigKey, old: ApplicationStatus, new: ApplicationStatus, own_op: bool
    ) -> bool:
        current = self._load(key)
        if current is not None and not own_op:
            # operationState and history belong to operations: keep the stored ones.
            new = new.model_copy(
                update={
                    "operation_state": current.status.operation_state,
                    "history": current.status.history,
                }
            )
            old = current.status
        if old.model_dump(exclude=_VOLATILE) == new.model_dump(exclude=_VOLATILE):
            return False
        try:
            save_status(self.view, key, new)
        except MeshpilotError:
            return False  # the app was deleted meanwhile; the next event says so
        return True

    def _auto_sync(
        self, key: ConfigKey, app: Application, facts: AppFacts, decision: AutoSync
    ) -> tuple[SyncOutcome | None, list[NotificationEvent], AppState]:
        policy = app.spec.sync_policy
        prune = bool(policy and policy.automated and policy.automated.prune)
        running = replace(
            facts,
            operation_phase=OperationPhase.RUNNING,
            operation_started_at=now(),
            operation_message=decision.reason,
            operation_revision=facts.revision,
        )
        events = [_event(EventType.SYNC_RUNNING, running)]
        params = SyncParams(prune=prune, automated=True)
        try:
            outcome: SyncOutcome | None = execute_sync(
                app, self.deps, params, sleep=self._sleep, lock_dir=self.lock_dir
            )
        except (OperationInProgress, SyncWindowBlocked):
            outcome = None  # someone else's operation, or a window: look again later
        except MeshpilotError as exc:
            outcome = SyncOutcome(OperationPhase.ERROR, str(exc))
        self._finished[key] = time.time()
        synced = self._load(key) or app
        state = self.refresh(synced)
        status = state.status(previous=synced.status)
        own_op = outcome is not None and outcome.phase is OperationPhase.ERROR
        if own_op and outcome is not None:
            status = _with_error_operation(status, outcome)
        self._save(key, synced.status, status, own_op)
        final = facts_of(synced.model_copy(update={"status": status}), key.namespace)
        if outcome is not None:
            events += [_event(t, final) for t in transitions(running, final)]
        return outcome, events, state

    def _sleep(self, seconds: float) -> None:
        """Retry backoff that a shutdown cuts short."""
        self.stopping.wait(seconds)


def _event(kind: EventType, facts: AppFacts) -> NotificationEvent:
    return NotificationEvent(kind, facts, now())


def _owned(state: AppState) -> frozenset[ConfigKey]:
    if state.comparison is None:
        return frozenset()
    keys = (config_key(r.key) for r in state.comparison.resources)
    return frozenset(k for k in keys if k is not None)


def _with_sync_error(status: ApplicationStatus, decision: AutoSync) -> ApplicationStatus:
    if not decision.error:
        return status
    old = {(c.type, c.message): c for c in status.conditions}
    cond = old.get((ConditionType.SYNC_ERROR, decision.error)) or ApplicationCondition(
        type=ConditionType.SYNC_ERROR, message=decision.error, last_transition_time=now()
    )
    others = [c for c in status.conditions if c.type is not ConditionType.SYNC_ERROR]
    return status.model_copy(update={"conditions": [*others, cond]})


def _with_error_operation(status: ApplicationStatus, outcome: SyncOutcome) -> ApplicationStatus:
    state = OperationState(
        operation={"sync": {}, "initiatedBy": {"automated": True}},
        phase=OperationPhase.ERROR,
        message=outcome.message,
        started_at=now(),
        finished_at=now(),
    )
    return status.model_copy(update={"operation_state": state})
