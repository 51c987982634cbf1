"""Sync planning (gitops-engine `sync`): tasks from the comparison, hooks and waves read
from annotations, sync options, Argo CD's kind order extended for the mesh, and a pure
`plan_sync` whose result the controller executes wave by wave."""

from __future__ import annotations

from meshpilot.gitops.sync.dry_run import render_plan
from meshpilot.gitops.sync.hooks import HookSpec, hook_spec, wave_of
from meshpilot.gitops.sync.options import (
    ResourceSyncOptions,
    SyncOptionError,
    SyncOptions,
    parse_resource_options,
    parse_sync_options,
)
from meshpilot.gitops.sync.ordering import KIND_ORDER, kind_rank, sort_key, sort_tasks
from meshpilot.gitops.sync.plan import SyncPlan, SyncRequest, Wave, plan_sync
from meshpilot.gitops.sync.task import HookDeletePolicy, SyncAction, SyncPhase, SyncTask

__all__ = [
    "KIND_ORDER",
    "HookDeletePolicy",
    "HookSpec",
    "ResourceSyncOptions",
    "SyncAction",
    "SyncOptionError",
    "SyncOptions",
    "SyncPhase",
    "SyncPlan",
    "SyncRequest",
    "SyncTask",
    "Wave",
    "hook_spec",
    "kind_rank",
    "parse_resource_options",
    "parse_sync_options",
    "plan_sync",
    "render_plan",
    "sort_key",
    "sort_tasks",
    "wave_of",
]
