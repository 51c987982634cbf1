"""Argo CD's annotation names, and reading them off a manifest. Kept here (not in sync/)
because comparison already needs them (hooks are not compared) and sync builds on diff."""

from __future__ import annotations

from meshpilot.gitops.diff.keys import Manifest

__all__ = [
    "COMPARE_OPTIONS",
    "HELM_HOOK",
    "HELM_HOOK_DELETE_POLICY",
    "HELM_HOOK_WEIGHT",
    "HOOK",
    "HOOK_DELETE_POLICY",
    "SYNC_OPTIONS",
    "SYNC_WAVE",
    "annotation",
    "is_hook",
    "options_of",
]

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
HOOK = "argocd.argoproj.io/hook"
HOOK_DELETE_POLICY = "argocd.argoproj.io/hook-delete-policy"
HELM_HOOK = "helm.sh/hook"
HELM_HOOK_WEIGHT = "helm.sh/hook-weight"
HELM_HOOK_DELETE_POLICY = "helm.sh/hook-delete-policy"

# Helm hooks Argo CD maps onto its phases; other Helm hooks (e.g. crd-install) are not hooks.
_HELM_HOOKS = frozenset({"pre-install", "pre-upgrade", "post-install", "post-upgrade"})


def annotation(obj: Manifest | None, name: str) -> str:
    """The annotation's value, stripped; `` when absent or not a string."""
    if obj is None:
        return ""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(name)
    return value.strip() if isinstance(value, str) else ""


def options_of(obj: Manifest | None, name: str) -> frozenset[str]:
    """The comma-separated options of an annotation (`Prune=false,PruneLast=true`)."""
    return frozenset(part.strip() for part in annotation(obj, name).split(",") if part.strip())


def is_hook(obj: Manifest) -> bool:
    """A resource hook: excluded from comparison, run by sync in its phase(s)."""
    if annotation(obj, HOOK):
        return True
    helm = {part.strip() for part in annotation(obj, HELM_HOOK).split(",")}
    return bool(helm & _HELM_HOOKS)
