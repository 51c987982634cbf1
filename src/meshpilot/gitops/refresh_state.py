"""What a refresh learned about one Application (`AppState`) and the status it implies.
Split from refresh.py, which computes it; both are imported from there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.gitops.diff import Comparison, key_of
from meshpilot.gitops.diff.keys import ResourceKey
from meshpilot.gitops.health import AppHealth
from meshpilot.gitops.model import (
    Application,
    ApplicationCondition,
    ApplicationStatus,
    AppProject,
    HealthStatus,
    HealthStatusCode,
    ResourceStatus,
    SyncStatus,
    SyncStatusCode,
)
from meshpilot.gitops.render.manifest import Manifest

__all__ = ["AppState", "SourceRevision", "now"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class SourceRevision:
    """One rendered source: what it asks for and the commit that answered."""

    repo_url: str
    path: str
    target_revision: str
    commit: str
    position: int


@dataclass(frozen=True, slots=True)
class AppState:
    """Everything a refresh learned. `targets` are the rendered manifests (with file and
    line) of all sources, in order; `comparison`/`health` are None when rendering or the
    project check failed (then `errors` says why)."""

    app: Application
    key: ConfigKey
    tracking: str
    project: AppProject | None
    sources: tuple[SourceRevision, ...] = ()
    targets: tuple[Manifest, ...] = field(default=(), repr=False)
    # The store objects the comparison looked at (this app's and those at target keys).
    live: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    comparison: Comparison | None = field(default=None, repr=False)
    health: AppHealth | None = None
    conditions: tuple[ApplicationCondition, ...] = ()
    # Resources the project refuses (`resource g:k is not permitted in project p`, ...).
    resource_problems: tuple[str, ...] = ()
    source_type: str = ""  # Argo CD's: Directory, Helm or Plugin (of the first source)
    reconciled_at: str = field(default_factory=now)
    # The store version the comparison read (None: not compared): a sync started right after
    # may use this comparison while the store is still at that version.
    live_version: int | None = None

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(c.message for c in self.conditions if c.type.is_error)

    @property
    def ok(self) -> bool:
        return self.comparison is not None and not self.errors

    @property
    def sync_status(self) -> SyncStatusCode:
        return self.comparison.status if self.comparison is not None else SyncStatusCode.UNKNOWN

    @property
    def revision(self) -> str:
        return self.sources[0].commit if self.sources else ""

    @property
    def revisions(self) -> list[str]:
        return [s.commit for s in self.sources]

    def location(self, key: ResourceKey) -> tuple[str, int] | None:
        """File (relative to its source path) and line a target came from."""
        manifest = self.target(key)
        return (manifest.file, manifest.line) if manifest is not None else None

    def target(self, key: ResourceKey) -> Manifest | None:
        """The rendered manifest at `key` (with its file and field positions)."""
        namespace = self.app.spec.destination.namespace
        return next((m for m in self.targets if key_of(m.data, namespace) == key), None)

    def status(self, previous: ApplicationStatus | None = None) -> ApplicationStatus:
        """The Application's status after this refresh; operationState and history are
        kept from `previous` (they belong to operations, not to refreshes)."""
        previous = previous or ApplicationStatus()
        spec = self.app.spec
        compared: dict[str, Any] = {
            "destination": spec.destination.model_dump(by_alias=True, exclude_defaults=True)
        }
        if spec.sources:
            compared["sources"] = [
                s.model_dump(by_alias=True, exclude_none=True) for s in spec.sources
            ]
        elif spec.source is not None:
            compared["source"] = spec.source.model_dump(by_alias=True, exclude_none=True)
        multi = bool(spec.sources)
        sync = SyncStatus(
            status=self.sync_status,
            revision="" if multi else self.revision,
            revisions=self.revisions if multi else [],
            compared_to=compared,
        )
        health = HealthStatus(status=HealthStatusCode.UNKNOWN)
        if self.health is not None:
            health = HealthStatus(status=self.health.status, message=self.health.message)
        return ApplicationStatus(
            sync=sync,
            health=health,
            conditions=_keep_times(list(self.conditions), previous.conditions),
            operation_state=previous.operation_state,
            history=previous.history,
            resources=self._resources(),
            reconciled_at=self.reconciled_at,
            observed_at=self.reconciled_at,
            source_type=self.source_type,
            summary=previous.summary,
        )

    def _resources(self) -> list[ResourceStatus]:
        if self.comparison is None:
            return []
        out = []
        for res in self.comparison.resources:
            k = res.key
            h = self.health.resources.get(k) if self.health is not None else None
            obj = res.target or res.live or {}
            version = str(obj.get("apiVersion") or "").rpartition("/")[2]
            out.append(
                ResourceStatus(
                    group=k.group,
                    version=version,
                    kind=k.kind,
                    namespace=k.namespace,
                    name=k.name,
                    status=res.status,
                    health=HealthStatus(status=h.status, message=h.message) if h else None,
                    requires_pruning=res.requires_pruning,
                )
            )
        return out


def _keep_times(
    conditions: list[ApplicationCondition], previous: Sequence[ApplicationCondition]
) -> list[ApplicationCondition]:
    """A condition that was already there keeps its lastTransitionTime."""
    seen = {(c.type, c.message): c.last_transition_time for c in previous}
    return [
        c.model_copy(update={"last_transition_time": seen.get((c.type, c.message)) or now()})
        for c in conditions
    ]
