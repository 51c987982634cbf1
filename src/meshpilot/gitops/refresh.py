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
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.admission import projects_in
from meshpilot.gitops.diff import compare_app, key_of, parse_ignore_differences
from meshpilot.gitops.diff.keys import ResourceKey, is_namespaced
from meshpilot.gitops.diff.memo import PairMemo
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION
from meshpilot.gitops.errors import ApplicationNotFound, GitopsError
from meshpilot.gitops.health import analyze_manifests, assess_app
from meshpilot.gitops.model import (
    Application,
    ApplicationCondition,
    ApplicationStatus,
    AppProject,
    ConditionType,
)
from meshpilot.gitops.projects import (
    CONTROL_NAMESPACE,
    ProjectIndex,
    application_violations,
    resource_violation,
)
from meshpilot.gitops.refresh_state import AppState, SourceRevision, now
from meshpilot.gitops.render import Renderer, SourceType
from meshpilot.gitops.source import ChartDetector, render_requests, rendered_sources
from meshpilot.store.base import LiveStore
from meshpilot.store.writes import ConflictError

__all__ = [
    "AppState",
    "ProjectSource",
    "RefreshDeps",
    "SourceRevision",
    "app_key",
    "compare_rendered",
    "now",
    "refresh_app",
    "render_app",
    "save_status",
    "store_key",
    "tracking_name",
]


@dataclass(frozen=True, slots=True)
class RefreshDeps:
    """What a refresh needs. `assess_mesh` runs the mesh analyzers over the store for the
    health of mesh kinds (off: kinds' own checks only, cheaper)."""

    store: LiveStore
    renderer: Renderer
    has_chart: ChartDetector | None = None
    control_namespace: str = CONTROL_NAMESPACE
    assess_mesh: bool = True
    # remembered per-resource comparisons (the controller's, whose store shares manifests)
    pairs: PairMemo | None = None


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
    state = render_app(app, deps, revisions=revisions)
    return state if state.conditions else compare_rendered(state, deps)


def render_app(
    app: Application, deps: RefreshDeps, *, revisions: Sequence[str] | None = None
) -> AppState:
    """The first half of a refresh: project checks and rendering. The result has `sources`
    and `targets`, and no comparison yet; or `conditions` saying why not."""
    snapshot = deps.store.snapshot()
    projects = deps.store.projects() if isinstance(deps.store, ProjectSource) else None
    index = ProjectIndex(
        projects_in(snapshot) if projects is None else projects, deps.control_namespace
    )
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
    return replace(base, source_type=kind, sources=sources, targets=targets)


@runtime_checkable
class ProjectSource(Protocol):
    """A store that keeps its AppProjects at hand (the controller's view), so a refresh
    need not walk every object to find them."""

    def projects(self) -> list[AppProject]: ...


_SOURCE_TYPES = {SourceType.DIRECTORY: "Directory", SourceType.HELM: "Helm"}


class _SourceFailed(Exception):
    def __init__(self, number: int, total: int, message: str) -> None:
        super().__init__(f"failed to generate manifest for source {number} of {total}: {message}")


def compare_rendered(base: AppState, deps: RefreshDeps) -> AppState:
    """The second half of a refresh: compare `render_app`'s targets with the live objects
    and assess health."""
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
        return replace(base, conditions=tuple(conditions))
    live_version = deps.store.snapshot().version  # before reading: a later write shows
    target_data = [m.data for m in base.targets]
    wanted = {key_of(t, namespace) for t in target_data}
    live = _live_objects(deps.store, base.tracking, wanted)
    comparison = compare_app(
        base.tracking, target_data, live, namespace=namespace, ignore=ignore, memo=deps.pairs
    )
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
        live=tuple(live),
        live_version=live_version,
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
        keys = store.tracked_keys(tracking) | {k for w in wanted if (k := store_key(w))}
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


def store_key(key: ResourceKey) -> ConfigKey | None:
    try:
        kind = Kind(key.kind)
    except ValueError:
        return None  # a kind the store cannot hold
    return ConfigKey(kind, key.namespace if is_namespaced(key.kind) else "", key.name)


def save_status(store: LiveStore, key: ConfigKey, status: ApplicationStatus) -> None:
    """Write `status` into the stored Application (its spec untouched). A concurrent write
    of the app (a spec edit) is retried on the fresh object: status is ours alone."""
    for _attempt in range(5):
        stored = store.manifest(key)
        if stored is None:
            raise ApplicationNotFound(key.name)
        manifest = dict(stored)  # a view's manifest is shared: replace the status in a copy
        manifest["status"] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        document = RawDocument(f"<{key}>", 1, manifest, {})
        try:
            store.apply([document], durable=False)  # recomputed after a crash: no fsync
            return
        except ConflictError:
            continue
    raise GitopsError(f"application {key.name}: status could not be written (kept changing)")
