"""Run a sync operation of one Application against the live store.

    outcome = execute_sync(app, deps, SyncParams(prune=True))
    outcome.phase, outcome.message, outcome.resources

Steps: take the app's operation lock (`<store>/.gitops/locks/`; a second concurrent sync
gets `another operation is already in progress`), check sync windows, refresh (render at
the requested revision, project checks, compare), plan (waves, prune, PruneLast,
CreateNamespace), then apply wave by wave (sync/apply.py: each wave's objects in one
all-or-nothing store write, then its prunes; with several writing waves every object is
validated first in one dry run; objects stored exactly as rendered are not rewritten). A
failure before the first write leaves the store untouched: a bad commit (invalid YAML, an
invalid VirtualService, a failing plugin, a wrong SOPS key) fails the sync with the
loader's or renderer's message. Failures are retried per `syncPolicy.retry` with
backoff. The app's status (sync, health, resources, operationState, history) is written
back unless it is a dry run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.diff.keys import ResourceKey, is_namespaced
from meshpilot.gitops.model import (
    Application,
    ApplicationSource,
    OperationPhase,
    OperationState,
)
from meshpilot.gitops.refresh import (
    AppState,
    RefreshDeps,
    app_key,
    now,
    refresh_app,
    save_status,
)
from meshpilot.gitops.sync.apply import SyncFailed, apply_plan, plan_rows, validate_all
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
from meshpilot.gitops.windows import SyncWindowBlocked, can_sync

__all__ = ["SyncFailed", "execute_sync", "lock_dir_of"]

Sleep = Callable[[float], None]


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
    compared: AppState | None = None,
) -> SyncOutcome:
    """Sync `app` (see the module docstring). Raises OperationInProgress, SyncWindowBlocked
    and GitopsError for refusals before the operation starts; every failure of the
    operation itself is an outcome with phase Failed (and written to the app's status).
    `compared`: the caller's refresh of this app just before (the controller's auto-sync),
    used when nothing it read can have changed since; else the sync refreshes again."""
    params = params or SyncParams()
    with operation_lock(lock_dir or lock_dir_of(deps), app):
        effective = _with_sources(app, params)
        first = _still_current(compared, effective, params, deps) or refresh_app(
            effective, deps, revisions=params.revisions
        )
        manual = not params.automated
        if not can_sync(first.project, app, manual=manual).allowed:
            raise SyncWindowBlocked()
        started = now()
        if params.automated and not params.dry_run:
            _mark_running(app, deps, params, started)
        outcome = _run_with_retries(effective, deps, params, first, sleep)
        outcome = replace(outcome, started_at=started, finished_at=now())
        if not params.dry_run:
            outcome = _record(app, deps, params, outcome)
        return outcome


def _still_current(
    compared: AppState | None, app: Application, params: SyncParams, deps: RefreshDeps
) -> AppState | None:
    """`compared` when it was made of this very spec at the default revisions and the
    store is still at the version it read (checked under the operation lock, so another
    operation's writes would show as a newer version)."""
    if compared is None or compared.live_version is None or compared.comparison is None:
        return None
    if params.revisions is not None or params.sources is not None:
        return None
    if compared.app.spec != app.spec or compared.live_version != deps.store.snapshot().version:
        return None
    return compared


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
    plan = _plan(app, deps, params, state)
    if plan.problems:
        raise SyncFailed("; ".join(plan.problems))
    if params.dry_run:
        rows = plan_rows(plan)
        validate_all(deps.store, plan, state)
    else:
        rows = apply_plan(deps.store, plan, state)
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


def _plan(app: Application, deps: RefreshDeps, params: SyncParams, state: AppState) -> SyncPlan:
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
    return plan_sync([m.data for m in state.targets], state.live, request, deps.pairs)


def _selected(keys: frozenset[ResourceKey] | None, namespace: str) -> frozenset[ResourceKey] | None:
    """`--resource GROUP:KIND:NAME` without a namespace means the destination namespace."""
    if keys is None:
        return None
    return frozenset(
        replace(k, namespace=namespace) if not k.namespace and is_namespaced(k.kind) else k
        for k in keys
    )


def _mark_running(app: Application, deps: RefreshDeps, params: SyncParams, started: str) -> None:
    """An automated operation is in the store before its first write: when its controller
    dies before recording the end, the next one (a restart, the new leader) sees it
    Running and not locked, and runs it again to its end (idempotent), so that it is
    recorded exactly once."""
    key = app_key(app)
    current = deps.store.get(key)
    stored = (
        current.model if current is not None and isinstance(current.model, Application) else app
    )
    running = OperationState(
        operation=params.operation(), phase=OperationPhase.RUNNING, started_at=started,
        message="automated sync running",
    )  # fmt: skip
    save_status(deps.store, key, stored.status.model_copy(update={"operation_state": running}))


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
    after = refresh_app(stored, deps)
    status = after.status(previous=stored.status)
    if outcome.succeeded:
        outcome = replace(outcome, history_id=next_history_id(stored.status))
    save_status(deps.store, key, finished_status(status, stored, params, outcome))
    return replace(outcome, after=after)
