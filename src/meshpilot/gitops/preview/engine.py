"""`gitops preview`: for a change (base..head of one repository), every affected app rendered
at the merge base and at head with its manifest diff, and what the change does to every
proxy of the mesh once the apps have synced.

    request = PreviewRequest(repo, "main", "my-branch")
    report = run_preview(request, PreviewDeps(renderer, store.snapshot()))

The "base" side is the merge base, as a pull request's diff is: commits that landed on
base since the branch was cut are not this change's doing.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.preview.affected import affected_apps
from meshpilot.gitops.preview.app import AppRender, render_app
from meshpilot.gitops.preview.changes import changed_files
from meshpilot.gitops.preview.checkouts import PreviewRepos
from meshpilot.gitops.preview.effect import mesh_effect
from meshpilot.gitops.preview.mesh import LiveMesh
from meshpilot.gitops.preview.model import AppPreview, PreviewReport
from meshpilot.gitops.render.service import Renderer
from meshpilot.gitops.repo.urls import scrub
from meshpilot.store.base import StoreSnapshot

__all__ = ["PreviewDeps", "PreviewRequest", "run_preview"]


@dataclass(frozen=True, slots=True)
class PreviewRequest:
    repo_url: str
    base: str
    head: str
    apps: tuple[str, ...] = ()  # forced: name or namespace/name


@dataclass(frozen=True, slots=True)
class PreviewDeps:
    renderer: Renderer
    snapshot: StoreSnapshot | None = None  # the live store; None: only the rendered objects


def run_preview(request: PreviewRequest, deps: PreviewDeps) -> PreviewReport:
    """Raises RepoError when base or head do not resolve, ApplicationNotFound for an
    unknown forced app; a per-app problem (a failed render) is reported in that app."""
    register_gitops_kinds()  # Applications defined in the repository are read too
    with ExitStack() as stack:
        repos = PreviewRepos(deps.renderer.repos, stack)
        renderer = Renderer(repos, deps.renderer.config, deps.renderer.cache)
        return _preview(request, renderer, deps.snapshot)


def _preview(
    request: PreviewRequest, renderer: Renderer, snapshot: StoreSnapshot | None
) -> PreviewReport:
    repos, url = renderer.repos, request.repo_url
    changes = changed_files(repos, url, request.base, request.head)
    renders: list[AppRender] = []
    failed: list[AppPreview] = []
    for affected in affected_apps(snapshot, repos, url, changes, request.apps):
        try:
            renders.append(render_app(affected, renderer, url, changes))
        except MeshpilotError as exc:  # an app's problem must not hide the others
            failed.append(AppPreview(affected.ref, affected.reason, error=str(exc)))
    live = LiveMesh(
        dict(snapshot.objects) if snapshot is not None else {},
        snapshot.mesh if snapshot is not None else LiveMesh.default_mesh(),
    )
    effect = mesh_effect(live, renders)
    return PreviewReport(
        repo=scrub(url),
        base=request.base,
        head=request.head,
        merge_base=changes.merge_base,
        head_commit=changes.head_commit,
        changed_files=changes.files,
        apps=tuple(sorted([*effect.apps, *failed], key=lambda a: a.app)),
        proxies=effect.proxies,
        unchanged_proxies=effect.unchanged_proxies,
        store_applications=(
            len(snapshot.of_kind(Kind.APPLICATION)) if snapshot is not None else None
        ),
    )
