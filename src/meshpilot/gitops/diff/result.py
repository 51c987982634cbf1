"""What a comparison found: per resource, and for the Application as a whole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from meshpilot.gitops.diff.keys import Manifest, ResourceKey
from meshpilot.gitops.model.status import ConditionType, SyncStatusCode

__all__ = ["Comparison", "Condition", "DiffResult", "ResourceResult"]


@dataclass(frozen=True, slots=True)
class DiffResult:
    """gitops-engine's DiffResult. The objects may hold Secret values: never in repr."""

    modified: bool
    normalized_live: dict[str, Any] | None = field(default=None, repr=False)
    predicted_live: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Condition:
    type: ConditionType
    message: str


def _no_text() -> str:
    return ""


@dataclass(frozen=True, slots=True)
class ResourceResult:
    """One resource of the app. `target` is the manifest as sync would write it (tracking
    annotation set); `live` the stored object. `text` is the unified diff with Secret values
    masked (empty when in sync), rendered from `text_of` on first use: the controller
    compares an app several times per sync and never shows the text (two YAML dumps per
    differing resource each time)."""

    key: ResourceKey
    status: SyncStatusCode
    diff: DiffResult
    text_of: Callable[[], str] = field(default=_no_text, repr=False, compare=False)
    target: Manifest | None = field(default=None, repr=False)
    live: Manifest | None = field(default=None, repr=False)
    requires_pruning: bool = False
    # Another Application tracks the live object: reported, never overwritten.
    conflict_owner: str = ""
    # compare-options IgnoreExtraneous on a live-only object: it does not make the app OutOfSync.
    ignore_extraneous: bool = False
    _shown: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def text(self) -> str:
        if not self._shown:
            self._shown.append(self.text_of())
        return self._shown[0]

    @property
    def missing(self) -> bool:
        """In Git, not in the store."""
        return self.target is not None and self.live is None

    @property
    def counts_for_status(self) -> bool:
        return not (self.requires_pruning and self.ignore_extraneous)


@dataclass(frozen=True, slots=True)
class Comparison:
    app: str
    resources: tuple[ResourceResult, ...]
    hooks: tuple[Manifest, ...] = field(default=(), repr=False)
    conditions: tuple[Condition, ...] = ()

    @property
    def status(self) -> SyncStatusCode:
        """Synced when every counted resource is; OutOfSync otherwise."""
        counted = [r for r in self.resources if r.counts_for_status]
        if all(r.status is SyncStatusCode.SYNCED for r in counted):
            return SyncStatusCode.SYNCED
        return SyncStatusCode.OUT_OF_SYNC

    def result(self, key: ResourceKey) -> ResourceResult | None:
        return next((r for r in self.resources if r.key == key), None)

    @property
    def conflicts(self) -> tuple[ResourceResult, ...]:
        return tuple(r for r in self.resources if r.conflict_owner)

    def diff_text(self) -> str:
        """Every resource that differs, `argocd app diff` style, Secret values masked."""
        parts = []
        for res in self.resources:
            if res.text:
                key = res.key
                parts.append(f"===== {key.group}/{key.kind} {key.namespace}/{key.name} ======\n")
                parts.append(res.text)
        return "".join(parts)
