"""Run a sync operation of one Application against the live store.

    outcome = execute_sync(app, deps, SyncParams(prune=True))
    outcome.phase, outcome.message, outcome.resources

Steps: take the app's operation lock (`<store>/.gitops/locks/`; a second concurrent sync
gets `another operation is already in progress`), check sync windows, refresh (render at
the requested revision, project checks, compare), plan (waves, prune, PruneLast,
CreateNamespace), validate every object of every wave with the store's loader in one dry
run, then apply wave by wave (each wave's objects in one all-or-nothing store write, then
its prunes). A failure before the first write leaves the store untouched: a bad commit
(invalid YAML, an invalid VirtualService, a failing plugin, a wrong SOPS key) fails the
sync with the loader's or renderer's message. Failures are retried per
`syncPolicy.retry` with backoff. The app's status (sync, health, resources,
operationState, history) is written back unless it is a dry run.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.diff.keys import Manifest, ResourceKey, is_namespaced
from meshpilot.gitops.model import Application, ApplicationSource, OperationPhase
from meshpilot.gitops.refresh import (
    AppState,
    RefreshDeps,
    app_key,
    now,
    refresh_app,
    save_status,
)
from meshpilot.gitops.sync.operation import (
    SUCCESS_MESSAGE,
    SyncOutcome,
    SyncParams,
    backoff_delays,
    finished_status,
    next_history_id,
    operation_lock,
)
from meshpilot.gitops.sync.options import parse_sync_options
from meshpilot.gitops.sync.plan import SyncPlan, SyncRequest, plan_sync
from meshpilot.gitops.sync.task import SyncAction, SyncTask
from meshpilot.gitops.windows import SyncWindowBlocked, can_sync
from meshpilot.store.writes import StoreWriteError

__all__ = ["SyncFailed", "execute_sync", "lock_dir_of"]

Sleep = Callable[[float], None]


class SyncFailed(Exception):
    """An attempt failed; `resources` are the rows so far."""

    def __init__(self, message: str, resources: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.resources = tuple(resources)


def lock_dir_of(deps: RefreshDeps) -> Path | None:
    root = getattr(deps.store, "root", None)
    return Path(root) / ".gitops" / "locks" if isinstance(root, Path) else None


def execute_sync(
    app: Application,
    deps: RefreshDeps,
    params: SyncParams | None = None,
    *,
    sleep: Sleep = time.sleep,
    lock_dir: Path | None = None,
) -> SyncOutcome:
    """Sync `app` (see the module docstring). Raises OperationInProgress, SyncWindowBlocked
    and GitopsError for refusals before the operation starts; every failure of the
    operation itself is an outcome with phase Failed (and written to the app's status)."""
    params = params or SyncParams()
    with operation_lock(lock_dir or lock_dir_of(deps), app):
        effective = _with_sources(app, params)
        first = refresh_app(effective, deps, revisions=params.revisions)
        manual = not params.automated
        if not can_sync(first.project, app, manual=manual).allowed:
            raise SyncWindowBlocked()
        started = now()
        outcome = _run_with_retries(effective, deps, params, first, sleep)
        outcome = replace(outcome, started_at=started, finished_at=now())
        if not params.dry_run:
            outcome = _record(app, deps, params, outcome)
        return outcome


def _with_sources(app: Application, params: SyncParams) -> Application:
    """The app with spec.source(s) replaced for this operation (rollback)."""
    if params.sources is None:
        return app
    sources = [ApplicationSource.model_validate(s) for s in params.sources]
    if app.spec.sources:
        spec = app.spec.model_copy(update={"sources": sources})
    else:
        spec = app.spec.model_copy(update={"source": sources[0]})
    return app.model_copy(update={"spec": spec})


def _run_with_retries(
    app: Application, deps: RefreshDeps, params: SyncParams, state: AppState, sleep: Sleep
) -> SyncOutcome:
    policy = app.spec.sync_policy
    retry = params.retry if params.retry is not None else (policy.retry if policy else None)
    delays = backoff_delays(retry)
    attempt = 0
    while True:
        try:
            return _attempt(app, deps, params, state)
        except SyncFailed as failed:
            if attempt >= len(delays):
                message = failed.message
                if attempt:
                    message += f" (retried {attempt} times)."
                return SyncOutcome(
                    phase=OperationPhase.FAILED,
                    message=message,
                    revision=state.revision,
                    revisions=tuple(state.revisions),
                    resources=failed.resources,
                    dry_run=params.dry_run,
                    retry_count=attempt,
                )
            sleep(delays[attempt])
            attempt += 1
            state = refresh_app(app, deps, revisions=params.revisions)


def _attempt(
    app: Application, deps: RefreshDeps, params: SyncParams, state: AppState
) -> SyncOutcome:
    if not state.ok:
        raise SyncFailed("; ".join(state.errors) or "comparison failed")
    if state.resource_problems:
        raise SyncFailed("; ".join(state.resource_problems))
    plan = _plan(app, params, state)
    if plan.problems:
        raise SyncFailed("; ".join(plan.problems))
    _validate(deps, plan, state)
    rows: list[dict[str, Any]] = []
    if not params.dry_run:
        for wave in plan.waves:
            _run_wave(deps, wave.tasks, state, rows)
    else:
        rows = [_row(t, _status(t), t.message) for t in plan.tasks]
    message = SUCCESS_MESSAGE + (" (dry run)" if params.dry_run else "")
    return SyncOutcome(
        phase=OperationPhase.SUCCEEDED,
        message=message,
        revision=state.revision,
        revisions=tuple(state.revisions),
        resources=tuple(rows),
        plan=plan,
        dry_run=params.dry_run,
    )


def _plan(app: Application, params: SyncParams, state: AppState) -> SyncPlan:
    policy = app.spec.sync_policy
    try:
        options = parse_sync_options(policy.sync_options if policy else [])
    except MeshpilotError as exc:
        raise SyncFailed(str(exc)) from None
    prune = params.prune or bool(policy and policy.is_automated and params.automated
                                 and policy.automated and policy.automated.prune)  # fmt: skip
    request = SyncRequest(
        app=state.tracking,
        namespace=app.spec.destination.namespace,
        prune=prune,
        dry_run=params.dry_run,
        options=options,
        only=_selected(params.resources, app.spec.destination.namespace),
    )
    return plan_sync([m.data for m in state.targets], state.live, request)


def _selected(keys: frozenset[ResourceKey] | None, namespace: str) -> frozenset[ResourceKey] | None:
    """`--resource GROUP:KIND:NAME` without a namespace means the destination namespace."""
    if keys is None:
        return None
    return frozenset(
        replace(k, namespace=namespace) if not k.namespace and is_namespaced(k.kind) else k
        for k in keys
    )


def _document(task: SyncTask, state: AppState) -> RawDocument:
    assert task.target is not None
    rendered = state.target(task.key)
    data = _plain(task.target)
    if task.key.namespace:
        data.setdefault("metadata", {})["namespace"] = task.key.namespace
    if rendered is None:
        return RawDocument(f"<{task.key}>", 1, data, {})
    # the rendered field positions: the loader then names the bad field's own line
    return RawDocument(rendered.file, rendered.line, data, dict(rendered.positions))


def _plain(obj: Manifest) -> dict[str, Any]:
    return copy.deepcopy(dict(obj))


def _validate(deps: RefreshDeps, plan: SyncPlan, state: AppState) -> None:
    """Every object of every wave through the store's loader at once, before any write."""
    documents = [_document(t, state) for t in plan.tasks if t.writes and t.target is not None]
    if not documents:
        return
    try:
        deps.store.apply(documents, dry_run=True)
    except StoreWriteError as exc:
        raise SyncFailed(f"one or more objects failed to apply, reason: {exc}") from None


def _config_key(task: SyncTask) -> ConfigKey:
    return ConfigKey(Kind(task.key.kind), task.key.namespace, task.key.name)


def _run_wave(
    deps: RefreshDeps, tasks: Sequence[SyncTask], state: AppState, rows: list[dict[str, Any]]
) -> None:
    writes = [t for t in tasks if t.writes and t.target is not None]
    prunes = [t for t in tasks if t.is_prune]
    try:
        if writes:
            deps.store.apply([_document(t, state) for t in writes])
        if prunes:
            deps.store.delete([_config_key(t) for t in prunes])
    except (StoreWriteError, ValueError) as exc:
        failed = [_row(t, "SyncFailed", str(exc)) for t in writes + prunes]
        raise SyncFailed(
            f"one or more objects failed to apply, reason: {exc}", [*rows, *failed]
        ) from None
    rows.extend(_row(t, _status(t), t.message) for t in tasks)


def _status(task: SyncTask) -> str:
    if task.is_prune:
        return "Pruned"
    if task.action is SyncAction.SKIP:
        return "PruneSkipped" if task.live is not None and task.target is None else "Synced"
    return "Synced"


def _row(task: SyncTask, status: str, message: str) -> dict[str, Any]:
    obj = task.target or task.live or {}
    version = str(obj.get("apiVersion") or "").rpartition("/")[2]
    row: dict[str, Any] = {
        "group": task.key.group,
        "version": version,
        "kind": task.key.kind,
        "namespace": task.key.namespace,
        "name": task.key.name,
        "status": status,
        "message": message,
        "syncPhase": str(task.phase),
    }
    if task.hook:
        row["hookType"] = str(task.phase)
    return row


def _record(
    app: Application, deps: RefreshDeps, params: SyncParams, outcome: SyncOutcome
) -> SyncOutcome:
    """Status after the operation: operationState, history, and a fresh comparison against
    the spec's own targetRevision (as in Argo CD, a sync to another revision or a rollback
    then shows OutOfSync)."""
    key = app_key(app)
    current = deps.store.get(key)
    stored = (
        current.model if current is not None and isinstance(current.model, Application) else app
    )
    status = refresh_app(stored, deps).status(previous=stored.status)
    if outcome.succeeded:
        outcome = replace(outcome, history_id=next_history_id(stored.status))
    save_status(deps.store, key, finished_status(status, stored, params, outcome))
    return outcome
