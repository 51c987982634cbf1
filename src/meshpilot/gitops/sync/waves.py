"""Waves of prune tasks (gitops-engine getSyncTasks): deletion runs in the reverse order of
creation, so prune waves are mirrored; PruneLast moves a prune after the last wave of the
Sync phase."""

from __future__ import annotations

from dataclasses import replace

from meshpilot.gitops.sync.task import SyncPhase, SyncTask

__all__ = ["prune_waves"]


def prune_waves(tasks: list[SyncTask], prune_last: bool) -> list[SyncTask]:
    waves = sorted({t.wave for t in tasks if t.is_prune})
    mirror = dict(zip(waves, reversed(waves), strict=True))
    out = [replace(t, wave=mirror[t.wave]) if t.is_prune else t for t in tasks]
    last = max((t.wave for t in out if t.phase is SyncPhase.SYNC and not t.is_prune), default=0)
    return [
        replace(t, wave=last + 1) if t.is_prune and (prune_last or t.prune_last) else t for t in out
    ]
