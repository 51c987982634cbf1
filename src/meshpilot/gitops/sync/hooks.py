"""Resource hooks and sync waves read from annotations (gitops-engine hook/, syncwaves/).

`argocd.argoproj.io/hook: PreSync,PostSync` runs the resource in each phase named; `Skip`
leaves it out of the sync altogether. Helm's pre/post-install/upgrade hooks map onto PreSync
and PostSync, with `helm.sh/hook-weight` as the wave when no sync-wave is given. With no
delete policy a hook gets BeforeHookCreation, as in Argo CD.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.gitops.diff.annotations import (
    HELM_HOOK,
    HELM_HOOK_DELETE_POLICY,
    HELM_HOOK_WEIGHT,
    HOOK,
    HOOK_DELETE_POLICY,
    SYNC_WAVE,
    annotation,
)
from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.sync.options import SyncOptionError
from meshpilot.gitops.sync.task import HookDeletePolicy, SyncPhase

__all__ = ["HookSpec", "hook_spec", "wave_of"]

_HELM_PHASES = {
    "pre-install": SyncPhase.PRE_SYNC,
    "pre-upgrade": SyncPhase.PRE_SYNC,
    "post-install": SyncPhase.POST_SYNC,
    "post-upgrade": SyncPhase.POST_SYNC,
}
_HELM_POLICIES = {
    "hook-succeeded": HookDeletePolicy.HOOK_SUCCEEDED,
    "hook-failed": HookDeletePolicy.HOOK_FAILED,
    "before-hook-creation": HookDeletePolicy.BEFORE_HOOK_CREATION,
}
SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class HookSpec:
    phases: tuple[SyncPhase, ...]  # empty when the hook is `Skip`
    delete_policies: frozenset[HookDeletePolicy]
    skip: bool = False


def wave_of(obj: Manifest, where: str) -> int:
    """The sync wave (default 0); a value that is not an integer is an error naming it."""
    for name in (SYNC_WAVE, HELM_HOOK_WEIGHT):
        text = annotation(obj, name)
        if name == HELM_HOOK_WEIGHT and not annotation(obj, HELM_HOOK):
            continue
        if text:
            try:
                return int(text)
            except ValueError:
                raise SyncOptionError(f"{where}: {name}: {text!r} is not an integer") from None
    return 0


def hook_spec(obj: Manifest, where: str) -> HookSpec | None:
    """The hook of `obj`, or None when it is an ordinary resource."""
    argo = [p.strip() for p in annotation(obj, HOOK).split(",") if p.strip()]
    if argo:
        if SKIP in argo:
            return HookSpec((), frozenset(), skip=True)
        phases = []
        for value in argo:
            try:
                phases.append(SyncPhase(value))
            except ValueError:
                known = ", ".join([*(p.value for p in SyncPhase), SKIP])
                raise SyncOptionError(
                    f"{where}: {HOOK}: unknown hook {value!r} (known: {known})"
                ) from None
        return HookSpec(
            tuple(sorted(set(phases), key=lambda p: p.order)), _argo_policies(obj, where)
        )
    helm = [p.strip() for p in annotation(obj, HELM_HOOK).split(",")]
    helm_phases = {_HELM_PHASES[p] for p in helm if p in _HELM_PHASES}
    if not helm_phases:
        return None
    return HookSpec(tuple(sorted(helm_phases, key=lambda p: p.order)), _helm_policies(obj))


def _argo_policies(obj: Manifest, where: str) -> frozenset[HookDeletePolicy]:
    values = [p.strip() for p in annotation(obj, HOOK_DELETE_POLICY).split(",") if p.strip()]
    if not values:
        return _helm_policies(obj)
    policies = set()
    for value in values:
        try:
            policies.add(HookDeletePolicy(value))
        except ValueError:
            known = ", ".join(p.value for p in HookDeletePolicy)
            raise SyncOptionError(
                f"{where}: {HOOK_DELETE_POLICY}: unknown policy {value!r} (known: {known})"
            ) from None
    return frozenset(policies)


def _helm_policies(obj: Manifest) -> frozenset[HookDeletePolicy]:
    values = [p.strip() for p in annotation(obj, HELM_HOOK_DELETE_POLICY).split(",")]
    policies = {_HELM_POLICIES[v] for v in values if v in _HELM_POLICIES}
    return frozenset(policies or {HookDeletePolicy.BEFORE_HOOK_CREATION})
