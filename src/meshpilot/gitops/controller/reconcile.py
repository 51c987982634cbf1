"""One reconcile of one Application (runs in a worker thread): refresh, health with the
mesh findings, auto-sync (with self-heal), status written when it changed, and the
notification events of the transitions. The async loop (loop.py) decides when."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.controller.autosync import AutoSync, decide
from meshpilot.gitops.controller.findings import Findings
from meshpilot.gitops.controller.fingerprint import Fingerprint, fingerprint, wanted_keys
from meshpilot.gitops.controller.view import StoreView
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.health import MeshFindings, assess_app
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
from meshpilot.gitops.refresh import (
    AppState,
    RefreshDeps,
    SourceRevision,
    compare_rendered,
    refresh_app,
    render_app,
    save_status,
    store_key,
    tracking_name,
)
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
    skipped: bool = False  # nothing changed since the last comparison: not compared again
    stale_health: bool = False  # health used mesh findings older than the store
    errors: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class _Quiet:
    """A comparison that found nothing to do: its inputs, and what it answered."""

    inputs: Fingerprint
    sources: tuple[SourceRevision, ...]
    wanted: frozenset[ConfigKey]
    result: ReconcileResult


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
        # per app: the inputs and result of the last comparison that found nothing to do
        self._quiet: dict[ConfigKey, _Quiet] = {}

    def reconcile(
        self, key: ConfigKey, fresh: bool = True, pause: Callable[[], None] | None = None
    ) -> ReconcileResult:
        """`fresh=False` (drift, webhook, resync): health may use the mesh findings from
        before the latest mesh change (the result says so with `stale_health`; the
        controller looks again). An app whose inputs did not change since its last quiet
        comparison is not rendered or compared again (`skipped`). `pause`, for work that
        is not urgent, is called before rendering and before writing status (holding no
        lock): it waits while urgent work runs."""
        started = time.perf_counter()
        app = self._load(key)
        if app is None:
            self._finished.pop(key, None)
            self._quiet.pop(key, None)
            return ReconcileResult(key, exists=False)
        findings = self.view.findings(wait=fresh)
        stale = not fresh and not self.view.findings_current()
        quiet = self._quiet.pop(key, None)
        if quiet is not None and not stale and self._unchanged(app, quiet, findings):
            # nothing the comparison reads changed since it last found nothing to do
            self._quiet[key] = quiet
            return replace(quiet.result, seconds=time.perf_counter() - started, skipped=True)
        if pause is not None:
            pause()
        rendered = render_app(app, self.deps)
        inputs = None
        if not rendered.conditions:
            wanted = wanted_keys(rendered, store_key)
            commits = tuple(s.commit for s in rendered.sources)
            inputs = self._inputs(app, commits, rendered.tracking, wanted, findings)
        before = facts_of(app, key.namespace)
        compared = compare_rendered(rendered, self.deps) if inputs is not None else rendered
        state = self._assessed(compared, findings.by_resource)
        decision = decide(
            app, state, self.self_heal_timeout, time.time(), self._finished.get(key, 0),
            interrupted=self._interrupted(app),
        )  # fmt: skip
        status = _with_sync_error(state.status(previous=app.status), decision)
        # A new revision about to be synced: its status is written once, after the sync
        # (Argo CD persists the comparison with the operation it starts). Drift is written
        # at once: OutOfSync is what a user watching the app must see, healed or not.
        written = decision.sync and not decision.self_heal
        if not written and pause is not None:
            pause()
        written = written or self._save(key, app.status, status)
        after = facts_of(app.model_copy(update={"status": status}), key.namespace)
        events = [_event(t, after) for t in transitions(before, after)]
        outcome = None
        found = str(state.sync_status)
        if decision.sync:
            outcome, more, state, stale = self._auto_sync(
                key, app, after, decision, fresh, compared
            )
            events += more
            written = True
        result = ReconcileResult(
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
            stale_health=stale,
        )
        if (
            not stale
            and inputs is not None
            and state.ok
            and not written
            and decision == AutoSync(False, decision.reason)
            and len(rendered.sources) == len(app.spec.all_sources)  # no unrendered `ref`
        ):
            quiet_result = replace(result, events=())
            self._quiet[key] = _Quiet(inputs, rendered.sources, wanted, quiet_result)
        return result

    def refresh(self, app: Application) -> AppState:
        """refresh_app, with health judged against the mesh findings of the whole store
        (computed once per store version rather than once per app)."""
        return self._assessed(refresh_app(app, self.deps), self.view.mesh_findings())

    def _assessed(self, state: AppState, findings: MeshFindings) -> AppState:
        if state.comparison is None:
            return state
        return replace(state, health=assess_app(state.comparison, findings))

    def _inputs(
        self,
        app: Application,
        commits: tuple[str, ...],
        tracking: str,
        wanted: frozenset[ConfigKey],
        findings: Findings,
    ) -> Fingerprint:
        live = self.view.tracked_keys(tracking) | wanted
        objects = self.view.snapshot().objects
        return fingerprint(app, commits, live, objects, self.view.projects(), findings.by_key)

    def _unchanged(self, app: Application, quiet: _Quiet, findings: Findings) -> bool:
        """The inputs of the last quiet comparison, checked without rendering: the same
        sources resolve to the same commits (from the repo service's memory)."""
        if app is not quiet.inputs.app:
            return False
        repos = self.deps.renderer.repos
        try:
            commits = tuple(repos.resolve(s.repo_url, s.target_revision) for s in quiet.sources)
        except MeshpilotError:
            return False
        tracking = tracking_name(app, self.deps.control_namespace)
        return self._inputs(app, commits, tracking, quiet.wanted, findings).same(quiet.inputs)

    def _load(self, key: ConfigKey) -> Application | None:
        obj = self.view.get(key)
        model = obj.model if obj is not None else None
        return model if isinstance(model, Application) else None

    def _interrupted(self, app: Application) -> bool:
        """A Running operation in the store whose lock nobody holds: its process died (on
        etcd only the leader runs operations, and that is this one now)."""
        op = app.status.operation_state
        if op is None or not op.phase.running:
            return False
        try:
            with operation_lock(self.lock_dir, app):
                return True
        except OperationInProgress:
            return False

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
        self,
        key: ConfigKey,
        app: Application,
        facts: AppFacts,
        decision: AutoSync,
        fresh: bool,
        compared: AppState,
    ) -> tuple[SyncOutcome | None, list[NotificationEvent], AppState, bool]:
        """The sync, then the app's status after it (with the mesh findings as `reconcile`
        got them: stale ones for drift, and then the returned flag is set)."""
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
                app,
                self.deps,
                params,
                sleep=self._sleep,
                lock_dir=self.lock_dir,
                compared=compared,
            )
        except (OperationInProgress, SyncWindowBlocked):
            outcome = None  # someone else's operation, or a window: look again later
        except MeshpilotError as exc:
            outcome = SyncOutcome(OperationPhase.ERROR, str(exc))
        self._finished[key] = time.time()
        synced = self._load(key) or app
        findings = self.view.findings(wait=fresh)
        stale = not fresh and not self.view.findings_current()
        # the operation's own comparison after it, when the spec did not change meanwhile
        done = outcome.after if outcome is not None else None
        if done is None or synced.spec != app.spec:
            done = refresh_app(synced, self.deps)
        state = self._assessed(done, findings.by_resource)
        status = state.status(previous=synced.status)
        own_op = outcome is not None and outcome.phase is OperationPhase.ERROR
        if own_op and outcome is not None:
            status = _with_error_operation(status, outcome)
        self._save(key, synced.status, status, own_op)
        final = facts_of(synced.model_copy(update={"status": status}), key.namespace)
        if outcome is not None:
            events += [_event(t, final) for t in transitions(running, final)]
        return outcome, events, state, stale

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
