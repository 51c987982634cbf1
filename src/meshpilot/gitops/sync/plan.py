"""The sync plan: what a sync of one Application will do, in which phase and wave. Pure:
it reads target and live manifests and decides; the controller executes it against the
store one wave at a time (gitops/sync/operation.py, later).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from meshpilot.gitops.diff.annotations import SYNC_OPTIONS, options_of
from meshpilot.gitops.diff.compare import compare_app
from meshpilot.gitops.diff.ignore import IgnoreRule, keep_live_values
from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of
from meshpilot.gitops.diff.memo import PairMemo
from meshpilot.gitops.diff.normalize import plain
from meshpilot.gitops.diff.result import Comparison, Condition, ResourceResult
from meshpilot.gitops.diff.tracking import with_tracking
from meshpilot.gitops.model.status import ConditionType, SyncStatusCode
from meshpilot.gitops.sync.hooks import hook_spec, wave_of
from meshpilot.gitops.sync.options import SyncOptionError, SyncOptions, parse_resource_options
from meshpilot.gitops.sync.ordering import sort_tasks
from meshpilot.gitops.sync.task import SyncAction, SyncPhase, SyncTask
from meshpilot.gitops.sync.waves import prune_waves

__all__ = ["SyncPlan", "SyncRequest", "Wave", "plan_sync"]


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """One sync of `app` into destination `namespace`. `prune` allows deleting resources
    gone from Git (`--prune` or automated prune); `only` limits a selective sync."""

    app: str
    namespace: str = ""
    prune: bool = False
    dry_run: bool = False
    options: SyncOptions = field(default_factory=SyncOptions)
    ignore: tuple[IgnoreRule, ...] = ()
    only: frozenset[ResourceKey] | None = None


@dataclass(frozen=True, slots=True)
class Wave:
    phase: SyncPhase
    wave: int
    tasks: tuple[SyncTask, ...]


@dataclass(frozen=True, slots=True)
class SyncPlan:
    app: str
    waves: tuple[Wave, ...]
    on_fail: tuple[SyncTask, ...] = ()  # SyncFail hooks, run only when the sync fails
    problems: tuple[str, ...] = ()  # any problem: the plan must not run
    notes: tuple[str, ...] = ()
    dry_run: bool = False
    comparison: Comparison | None = field(default=None, repr=False, compare=False)

    @property
    def runnable(self) -> bool:
        return not self.problems

    @property
    def tasks(self) -> tuple[SyncTask, ...]:
        return tuple(task for wave in self.waves for task in wave.tasks)


def plan_sync(
    targets: Sequence[Manifest],
    live: Iterable[Manifest],
    request: SyncRequest,
    memo: PairMemo | None = None,
) -> SyncPlan:
    """`memo`: the controller's remembered comparisons (the refresh before the plan
    compared the same objects)."""
    live = list(live)
    comparison = compare_app(
        request.app, targets, live, namespace=request.namespace, ignore=request.ignore, memo=memo
    )
    problems: list[str] = []
    notes = list(request.options.notes)
    tasks: list[SyncTask] = []
    for res in comparison.resources:
        try:
            tasks.append(_resource_task(res, request, notes))
        except SyncOptionError as exc:
            problems.append(str(exc))
    if request.only is None:  # as in Argo CD, a selective sync runs no hooks
        tasks.extend(_hook_tasks(targets, request, problems))
    else:
        tasks = [t for t in tasks if t.key in request.only]
    tasks.extend(_namespace_task(targets, live, request))
    if request.options.fail_on_shared_resource:
        problems.extend(f"{c.message}: FailOnSharedResource=true" for c in _shared(comparison))
    ordered = sort_tasks(prune_waves(tasks, request.options.prune_last))
    main = [t for t in ordered if t.phase is not SyncPhase.SYNC_FAIL]
    return SyncPlan(
        app=request.app,
        waves=_group(main),
        on_fail=tuple(t for t in ordered if t.phase is SyncPhase.SYNC_FAIL),
        problems=tuple(problems),
        notes=tuple(notes),
        dry_run=request.dry_run,
        comparison=comparison,
    )


def _resource_task(res: ResourceResult, request: SyncRequest, notes: list[str]) -> SyncTask:
    where = str(res.key)
    obj = res.live if res.requires_pruning else res.target
    assert obj is not None  # a result has a target, or a live object to prune
    wave = wave_of(obj, where)
    own = parse_resource_options(options_of(obj, SYNC_OPTIONS), f"{where}: {SYNC_OPTIONS}")
    notes.extend(f"{where}: {note}" for note in own.notes)
    task = SyncTask(res.key, SyncAction.SKIP, wave=wave, target=res.target, live=res.live)
    if res.requires_pruning:
        prune_last = request.options.prune_last or own.prune_last
        if not own.prune:
            return replace(task, message="ignored (no prune)")
        if not request.prune:
            return replace(task, message="ignored (requires pruning)")
        return replace(task, action=SyncAction.PRUNE, prune_last=prune_last, message="pruned")
    if res.conflict_owner:
        owner = res.conflict_owner
        return replace(task, message=f"shared with application {owner}: not overwritten")
    if res.live is None:
        return replace(task, action=SyncAction.CREATE, message="created")
    if res.status is SyncStatusCode.OUT_OF_SYNC:
        target = _respecting_ignored(res, request)
        return replace(task, action=SyncAction.UPDATE, target=target, message="configured")
    if request.options.apply_out_of_sync_only:
        return replace(task, message="in sync (ApplyOutOfSyncOnly=true)")
    return replace(task, action=SyncAction.UNCHANGED, message="unchanged")


def _respecting_ignored(res: ResourceResult, request: SyncRequest) -> Manifest | None:
    if not request.options.respect_ignore_differences or res.target is None:
        return res.target
    target: dict[str, Any] = plain(res.target)
    for rule in request.ignore:
        if rule.matches(res.key):
            for pointer in rule.pointers:
                keep_live_values(target, res.live, pointer)
    return target


def _hook_tasks(
    targets: Sequence[Manifest], request: SyncRequest, problems: list[str]
) -> list[SyncTask]:
    tasks = []
    for target in targets:
        key = key_of(target, request.namespace)
        try:
            spec = hook_spec(target, str(key))
            if spec is None or spec.skip:
                continue
            wave = wave_of(target, str(key))
        except SyncOptionError as exc:
            problems.append(str(exc))
            continue
        obj = with_tracking(target, request.app, key)
        for phase in spec.phases:
            tasks.append(
                SyncTask(
                    key,
                    SyncAction.CREATE,
                    phase=phase,
                    wave=wave,
                    message=f"{phase} hook",
                    hook=True,
                    delete_policies=spec.delete_policies,
                    target=obj,
                )
            )
    return tasks


def _namespace_task(
    targets: Sequence[Manifest], live: list[Manifest], request: SyncRequest
) -> list[SyncTask]:
    """CreateNamespace=true: the destination namespace, unless Git or the store has it."""
    if not request.options.create_namespace or not request.namespace:
        return []
    key = ResourceKey("", "Namespace", "", request.namespace)
    if any(key_of(obj) == key for obj in [*targets, *live]):
        return []
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": key.name}}
    return [SyncTask(key, SyncAction.CREATE, message="CreateNamespace=true", target=manifest)]


def _shared(comparison: Comparison) -> list[Condition]:
    shared = ConditionType.SHARED_RESOURCE_WARNING
    return [c for c in comparison.conditions if c.type is shared]


def _group(tasks: list[SyncTask]) -> tuple[Wave, ...]:
    waves: list[Wave] = []
    for task in tasks:
        if waves and (waves[-1].phase, waves[-1].wave) == (task.phase, task.wave):
            waves[-1] = Wave(task.phase, task.wave, (*waves[-1].tasks, task))
        else:
            waves.append(Wave(task.phase, task.wave, (task,)))
    return tuple(waves)
