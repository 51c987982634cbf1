"""A sync task: one thing a sync does to one resource, in a phase and a wave."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from meshpilot.gitops.diff.keys import Manifest, ResourceKey

__all__ = ["HookDeletePolicy", "SyncAction", "SyncPhase", "SyncTask"]


class SyncPhase(StrEnum):
    """Phases in the order they run (gitops-engine syncPhaseOrder); SyncFail runs only when
    the sync fails."""

    PRE_SYNC = "PreSync"
    SYNC = "Sync"
    POST_SYNC = "PostSync"
    SYNC_FAIL = "SyncFail"

    @property
    def order(self) -> int:
        return _PHASE_ORDER.index(self)


_PHASE_ORDER = list(SyncPhase)


class SyncAction(StrEnum):
    CREATE = "create"  # not in the store (hooks are always created)
    UPDATE = "update"  # in the store, differs
    UNCHANGED = "unchanged"  # in the store and in sync: applying changes nothing
    PRUNE = "prune"  # in the store, tracked to this app, gone from Git
    SKIP = "skip"  # left alone; `message` says why


class HookDeletePolicy(StrEnum):
    HOOK_SUCCEEDED = "HookSucceeded"
    HOOK_FAILED = "HookFailed"
    BEFORE_HOOK_CREATION = "BeforeHookCreation"


@dataclass(frozen=True, slots=True)
class SyncTask:
    """`target` is what to write (CREATE/UPDATE/UNCHANGED), `live` what is stored; both may
    hold Secret values and are kept out of repr and comparison."""

    key: ResourceKey
    action: SyncAction
    phase: SyncPhase = SyncPhase.SYNC
    wave: int = 0
    message: str = ""
    hook: bool = False
    delete_policies: frozenset[HookDeletePolicy] = frozenset()
    prune_last: bool = False
    target: Manifest | None = field(default=None, repr=False, compare=False)
    live: Manifest | None = field(default=None, repr=False, compare=False)

    @property
    def is_prune(self) -> bool:
        return self.action is SyncAction.PRUNE

    @property
    def writes(self) -> bool:
        return self.action in (SyncAction.CREATE, SyncAction.UPDATE, SyncAction.UNCHANGED)
