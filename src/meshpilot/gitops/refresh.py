"""Refresh one Application: project checks, render every source, read its live objects from
the store, compare, assess health. The result (`AppState`) is what `gitops get --refresh`,
`gitops diff`, sync and the controller all start from.

    state = refresh_app(app, RefreshDeps(store=store, renderer=renderer))
    state.sync_status, state.health, state.comparison, state.conditions
    save_status(store, state.status(previous=app.status))

`refresh_app` never raises for a problem of the app itself (bad project, unreachable repo,
a commit that does not render): it returns an AppState whose `errors` and `conditions`
say what went wrong (InvalidSpecError / ComparisonError, Argo CD's condition types) with a
sync status of Unknown. Several sources are rendered in order and their manifests merged.

Tracking: resources carry `argocd.argoproj.io/tracking-id: <app>:...`, where `<app>` is
the app name for apps in the control namespace and `<namespace>_<name>` otherwise (Argo CD's
apps-in-any-namespace naming), see `tracking_name`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.admission import projects_in
from meshpilot.gitops.diff import Comparison, compare_app, key_of, parse_ignore_differences
from meshpilot.gitops.diff.keys import ResourceKey, is_namespaced
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION
from meshpilot.gitops.errors import ApplicationNotFound, GitopsError
from meshpilot.gitops.health import AppHealth, analyze_manifests, assess_app
from meshpilot.gitops.model import (
    Application,
    ApplicationCondition,
    ApplicationStatus,
    AppProject,
    ConditionType,
    HealthStatus,
    HealthStatusCode,
    ResourceStatus,
    SyncStatus,
    SyncStatusCode,
)
from meshpilot.gitops.projects import (
    CONTROL_NAMESPACE,
    ProjectIndex,
    application_violations,
    resource_violation,
)
from meshpilot.gitops.render import Renderer, SourceType
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.gitops.source import ChartDetector, render_requests, rendered_sources
from meshpilot.store.writes import ConflictError, LiveStore

__all__ = [
    "AppState",
    "RefreshDeps",
    "SourceRevision",
    "app_key",
    "now",
    "refresh_app",
    "save_status",
    "tracking_name",
]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class RefreshDeps:
    """What a refresh needs. `assess_mesh` runs the mesh analyzers over the store for the
    health of mesh kinds (off: kinds' own checks only, cheaper)."""

    store: LiveStore
    renderer: Renderer
    has_chart: ChartDetector | None = None
    control_namespace: str = CONTROL_NAMESPACE
    assess_mesh: bool = True


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


def app_key(app: Application) -> ConfigKey:
    return ConfigKey(Kind.APPLICATION, app.metadata.namespace or "default", app.metadata.name)


def tracking_name(app: Application, control_namespace: str = CONTROL_NAMESPACE) -> str:
    namespace = app.metadata.namespace or "default"
    return app.name if namespace == control_namespace else f"{namespace}_{app.name}"


def _condition(kind: ConditionType, message: str) -> ApplicationCondition:
    return ApplicationCondition(type=kind, message=message)


def refresh_app(
    app: Application, deps: RefreshDeps, *, revisions: Sequence[str] | None = None
) -> AppState:
    """Render, compare and assess `app` against the live store (see the module docstring).
    `revisions` overrides targetRevision per source position (sync --revision, rollback)."""
    snapshot = deps.store.snapshot()
    index = ProjectIndex(projects_in(snapshot), deps.control_namespace)
    base = AppState(
        app=app,
        key=app_key(app),
        tracking=tracking_name(app, deps.control_namespace),
        project=index.project_for(app),
    )
    invalid = application_violations(app, index)
    dest = app.spec.destination
    if not dest.is_in_cluster:
        where = dest.server or dest.name
        kind = "URL" if dest.server else "name"
        invalid.append(
            f"unable to find destination server: there are no clusters with this {kind}: {where}"
        )
    if invalid:
        spec_error = ConditionType.INVALID_SPEC_ERROR
        return replace(base, conditions=tuple(_condition(spec_error, m) for m in invalid))
    try:
        requests = render_requests(app, has_chart=deps.has_chart, revisions=revisions)
        rendered = []
        for number, request in enumerate(requests, start=1):
            try:
                rendered.append((request, deps.renderer.render(request)))
            except MeshpilotError as exc:
                raise _SourceFailed(number, len(requests), str(exc)) from None
    except (_SourceFailed, MeshpilotError) as exc:
        message = f"Failed to load target state: {exc}"
        return replace(base, conditions=(_condition(ConditionType.COMPARISON_ERROR, message),))
    positions = [p for p, _ in rendered_sources(app)]
    sources = tuple(
        SourceRevision(req.repo_url, req.path, req.revision, result.commit, pos)
        for pos, (req, result) in zip(positions, rendered, strict=True)
    )
    targets = tuple(m for _, result in rendered for m in result.manifests)
    kind = _SOURCE_TYPES.get(requests[0].source_type, "Plugin")
    return _compare(replace(base, source_type=kind), sources, targets, deps)


_SOURCE_TYPES = {SourceType.DIRECTORY: "Directory", SourceType.HELM: "Helm"}


class _SourceFailed(Exception):
    def __init__(self, number: int, total: int, message: str) -> None:
        super().__init__(f"failed to generate manifest for source {number} of {total}: {message}")


def _compare(
    base: AppState,
    sources: tuple[SourceRevision, ...],
    targets: tuple[Manifest, ...],
    deps: RefreshDeps,
) -> AppState:
    app = base.app
    namespace = app.spec.destination.namespace
    conditions: list[ApplicationCondition] = []
    try:
        ignore = parse_ignore_differences(
            [
                r.model_dump(by_alias=True, exclude_defaults=True)
                for r in app.spec.ignore_differences
            ]
        )
    except MeshpilotError as exc:
        conditions.append(_condition(ConditionType.COMPARISON_ERROR, str(exc)))
        return replace(base, sources=sources, targets=targets, conditions=tuple(conditions))
    target_data = [m.data for m in targets]
    wanted = {key_of(t, namespace) for t in target_data}
    live = _live_objects(deps.store, base.tracking, wanted)
    comparison = compare_app(base.tracking, target_data, live, namespace=namespace, ignore=ignore)
    findings = None
    if deps.assess_mesh:
        findings = analyze_manifests(_all_manifests(deps.store))
    health = assess_app(comparison, findings)
    conditions.extend(_condition(c.type, c.message) for c in comparison.conditions)
    problems: list[str] = []
    if base.project is not None:
        for res in comparison.resources:
            if res.requires_pruning:
                continue
            k = res.key
            ns = k.namespace if is_namespaced(k.kind) else None
            problem = resource_violation(base.project, app, k.group, k.kind, ns)
            if problem is not None and problem not in problems:
                problems.append(problem)
    return replace(
        base,
        sources=sources,
        targets=targets,
        live=tuple(live),
        comparison=comparison,
        health=health,
        conditions=tuple(conditions),
        resource_problems=tuple(problems),
    )


def _all_manifests(store: LiveStore) -> list[dict[str, Any]]:
    snapshot = store.snapshot()
    return [m for k in sorted(snapshot.objects) if (m := store.manifest(k)) is not None]


def _live_objects(
    store: LiveStore, tracking: str, wanted: set[ResourceKey]
) -> list[dict[str, Any]]:
    """Store objects that matter to the app: those at a target's key and those whose
    tracking id names the app (compare_app checks the id fully). A store with an ownership
    index (the controller's view) answers without walking every object."""
    if isinstance(store, TrackingIndex):
        keys = store.tracked_keys(tracking) | {k for w in wanted if (k := _config_key(w))}
        found = ((key, store.manifest(key)) for key in sorted(keys))
        return [m for _, m in found if m is not None and _belongs(m, tracking, wanted)]
    out = []
    for key in sorted(store.snapshot().objects):
        manifest = store.manifest(key)
        if manifest is not None and _belongs(manifest, tracking, wanted):
            out.append(manifest)
    return out


@runtime_checkable
class TrackingIndex(Protocol):
    def tracked_keys(self, tracking: str) -> set[ConfigKey]: ...


def _belongs(manifest: dict[str, Any], tracking: str, wanted: set[ResourceKey]) -> bool:
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    owner = str(annotations.get(TRACKING_ANNOTATION) or "")
    return owner.startswith(f"{tracking}:") or key_of(manifest) in wanted


def _config_key(key: ResourceKey) -> ConfigKey | None:
    try:
        kind = Kind(key.kind)
    except ValueError:
        return None  # a kind the store cannot hold
    return ConfigKey(kind, key.namespace if is_namespaced(key.kind) else "", key.name)


def save_status(store: LiveStore, key: ConfigKey, status: ApplicationStatus) -> None:
    """Write `status` into the stored Application (its spec untouched). A concurrent write
    of the app (a spec edit) is retried on the fresh object: status is ours alone."""
    for _attempt in range(5):
        manifest = store.manifest(key)
        if manifest is None:
            raise ApplicationNotFound(key.name)
        manifest["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        document = RawDocument(f"<{key}>", 1, manifest, {})
        try:
            store.apply([document])
            return
        except ConflictError:
            continue
    raise GitopsError(f"application {key.name}: status could not be written (kept changing)")
