"""Applying a sync plan to the live store: one all-or-nothing store write per wave, then
the wave's prunes; result rows as Argo CD's ResourceResult.

Work a write would not change is not done: an in-sync object whose rendered manifest is
exactly what the store holds (the store's own `unchanged` rule, so it is safe whatever
the sync options) is neither validated nor written; it is reported Synced as before.
Validation runs once: when a single wave writes, its store write validates everything
before touching a file; with several writing waves, every object is validated up front
in one dry run so that a bad object in a late wave leaves the store untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.refresh import AppState
from meshpilot.gitops.sync.plan import SyncPlan
from meshpilot.gitops.sync.task import SyncAction, SyncTask
from meshpilot.store.base import LiveStore
from meshpilot.store.writes import StoreWriteError, keeps_stored

__all__ = ["SyncFailed", "apply_plan", "plan_rows", "validate_all"]


class SyncFailed(Exception):
    """An attempt failed; `resources` are the rows so far."""

    def __init__(self, message: str, resources: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.resources = tuple(resources)


@dataclass(frozen=True, slots=True)
class _Step:
    """One wave as the store sees it: the documents to write and the keys to delete."""

    tasks: tuple[SyncTask, ...]
    writes: tuple[tuple[SyncTask, RawDocument], ...]
    prunes: tuple[SyncTask, ...]

    @property
    def active(self) -> bool:
        return bool(self.writes or self.prunes)


def apply_plan(store: LiveStore, plan: SyncPlan, state: AppState) -> list[dict[str, Any]]:
    """Run every wave; the rows of all tasks. Raises SyncFailed (with the rows so far)."""
    steps = [_step(wave.tasks, state) for wave in plan.waves]
    active = [s for s in steps if s.active]
    if len(active) > 1:
        _validate(store, [doc for s in active for _, doc in s.writes])
    rows: list[dict[str, Any]] = []
    for step in steps:
        _run(store, step, rows)
    return rows


def validate_all(store: LiveStore, plan: SyncPlan, state: AppState) -> None:
    """A dry run's check: every object the plan writes, in-sync ones included."""
    tasks = [t for t in plan.tasks if t.writes and t.target is not None]
    _validate(store, [_document(t, state) for t in tasks])


def plan_rows(plan: SyncPlan) -> list[dict[str, Any]]:
    """The rows a dry run reports."""
    return [_row(t, _status(t), t.message) for t in plan.tasks]


def _step(tasks: Sequence[SyncTask], state: AppState) -> _Step:
    writes = []
    for task in tasks:
        if not task.writes or task.target is None:
            continue
        if task.action is SyncAction.UNCHANGED and _kept(task):
            continue
        writes.append((task, _document(task, state)))
    prunes = tuple(t for t in tasks if t.is_prune)
    return _Step(tuple(tasks), tuple(writes), prunes)


def _kept(task: SyncTask) -> bool:
    key = _config_key(task)
    target = task.target
    return key is not None and target is not None and keeps_stored(key, dict(target), task.live)


def _document(task: SyncTask, state: AppState) -> RawDocument:
    assert task.target is not None
    rendered = state.target(task.key)
    data = copy.deepcopy(dict(task.target))
    if task.key.namespace:
        data.setdefault("metadata", {})["namespace"] = task.key.namespace
    if rendered is None:
        return RawDocument(f"<{task.key}>", 1, data, {})
    # the rendered field positions: the loader then names the bad field's own line
    return RawDocument(rendered.file, rendered.line, data, dict(rendered.positions))


def _validate(store: LiveStore, documents: list[RawDocument]) -> None:
    """Every object of every wave through the store's loader at once, before any write."""
    if not documents:
        return
    try:
        store.apply(documents, dry_run=True)
    except StoreWriteError as exc:
        raise SyncFailed(f"one or more objects failed to apply, reason: {exc}") from None


def _config_key(task: SyncTask) -> ConfigKey | None:
    try:
        return ConfigKey(Kind(task.key.kind), task.key.namespace, task.key.name)
    except ValueError:
        return None


def _run(store: LiveStore, step: _Step, rows: list[dict[str, Any]]) -> None:
    try:
        if step.writes:
            store.apply([doc for _, doc in step.writes])
        if step.prunes:
            store.delete(
                [ConfigKey(Kind(t.key.kind), t.key.namespace, t.key.name) for t in step.prunes]
            )
    except (StoreWriteError, ValueError) as exc:
        attempted = [t for t in step.tasks if t.writes and t.target is not None]
        failed = [_row(t, "SyncFailed", str(exc)) for t in [*attempted, *step.prunes]]
        raise SyncFailed(
            f"one or more objects failed to apply, reason: {exc}", [*rows, *failed]
        ) from None
    rows.extend(_row(t, _status(t), t.message) for t in step.tasks)


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
