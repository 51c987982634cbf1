"""One affected app: render at the merge base and at head, diff the manifests, and load the
rendered objects the mesh reads (with field lines for the ones it refuses)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import LoadResult
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.preview.affected import AffectedApp
from meshpilot.gitops.preview.changes import ChangeSet, read_blob
from meshpilot.gitops.preview.manifests import Rendered, diff_renders, render_all
from meshpilot.gitops.preview.mesh import load_app
from meshpilot.gitops.preview.model import AppPreview
from meshpilot.gitops.preview.sources import requests_at
from meshpilot.gitops.render.service import Renderer

__all__ = ["AppRender", "render_app"]


@dataclass(frozen=True, slots=True)
class AppRender:
    preview: AppPreview  # manifests only; findings and proxies are added by effect.py
    base: LoadResult  # the mesh objects the app rendered at the merge base
    head: LoadResult  # ... at head, with the base version of every object head breaks


def render_app(
    affected: AffectedApp, renderer: Renderer, url: str, changes: ChangeSet
) -> AppRender:
    app, repos = affected.app, renderer.repos
    namespace = app.spec.destination.namespace
    head = render_all(renderer, requests_at(app, repos, url, changes.head_commit))
    try:
        base = render_all(renderer, requests_at(app, repos, url, changes.merge_base))
    except MeshpilotError:
        base = Rendered(())  # a new app, or its path did not exist yet
    base_loaded = load_app(base.manifests, namespace)
    # field lines for the files the change touched (analyzer findings point into them) ...
    changed = {m.file for m in head.manifests} & set(changes.files)
    texts = _texts(renderer, url, changes.head_commit, changed)
    head_loaded = load_app(head.manifests, namespace, texts)
    errors = {d.file for d in head_loaded.diagnostics if d.severity is Severity.ERROR}
    if errors - texts.keys():  # ... and for any other file the loader refuses
        texts |= _texts(renderer, url, changes.head_commit, errors - texts.keys())
        head_loaded = load_app(head.manifests, namespace, texts)
    refused = _refused(head_loaded.diagnostics)
    kept = LoadResult(
        objects=[*head_loaded.objects, *(o for o in base_loaded.objects if o.key in refused)],
        mesh=head_loaded.mesh,
        mesh_origin=head_loaded.mesh_origin,
        diagnostics=head_loaded.diagnostics,
    )  # a refused object keeps its base version: the store would refuse the sync
    preview = AppPreview(
        app=affected.ref,
        reason=affected.reason,
        base_commit=changes.merge_base,
        head_commit=changes.head_commit,
        resources=diff_renders(base, head, namespace),
    )
    return AppRender(preview, base_loaded, kept)


def _refused(diagnostics: Iterable[Diagnostic]) -> set[ConfigKey]:
    out = set()
    for d in diagnostics:
        if d.severity is Severity.ERROR and d.kind and d.name:
            try:
                out.add(ConfigKey(Kind(d.kind), d.namespace, d.name))
            except ValueError:
                continue
    return out


def _texts(renderer: Renderer, url: str, commit: str, files: Iterable[str]) -> dict[str, str]:
    """Source text of repository files (a Helm template name has none)."""
    out = {}
    for file in sorted(files):
        text = read_blob(renderer.repos, url, commit, file)
        if text is not None:
            out[file] = text
    return out
