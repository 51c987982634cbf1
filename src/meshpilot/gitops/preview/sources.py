"""Which sources of an Application come from the repository under review, the render
requests at one of its commits, and the repository paths each source reads (what a changed
file must touch for the app to be affected)."""

from __future__ import annotations

import posixpath

from meshpilot.gitops.model import Application
from meshpilot.gitops.render.request import RenderRequest, SourceType
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.urls import normalize_url
from meshpilot.gitops.source import chart_detector, render_requests, rendered_sources

__all__ = ["requests_at", "touches", "uses_repo", "watched_paths"]


def uses_repo(app: Application, repo_url: str) -> bool:
    wanted = normalize_url(repo_url)
    return any(normalize_url(s.repo_url) == wanted for _, s in rendered_sources(app))


def requests_at(
    app: Application, repos: RepoService, repo_url: str, commit: str
) -> list[RenderRequest]:
    """The app's render requests with the sources from `repo_url` pinned to `commit`; other
    sources keep their own targetRevision (their content does not change in this review)."""
    wanted = normalize_url(repo_url)
    sources = app.spec.all_sources
    revisions = [commit if normalize_url(s.repo_url) == wanted else "" for s in sources]
    return render_requests(app, has_chart=chart_detector(repos), revisions=revisions)


def _norm(path: str) -> str:
    out = posixpath.normpath(path.strip("/") or ".")
    return "" if out == "." else out


def watched_paths(request: RenderRequest) -> tuple[str, ...]:
    """Repository-relative prefixes (directories or files) the request's output depends on;
    `""` is the whole repository."""
    base = _norm(request.path)
    paths = [base]
    if request.source_type is SourceType.HELM:
        for value_file in request.helm.value_files:
            if "://" not in value_file:
                paths.append(_norm(posixpath.join(base, value_file)))
    if request.source_type is SourceType.LAYERED and request.layered is not None:
        layered = request.layered
        paths = [
            _norm(posixpath.join(base, "namespaces", layered.namespace)),
            _norm(posixpath.join(base, "clusters", layered.cluster, layered.namespace)),
        ]
    return tuple(dict.fromkeys(paths))


def touches(paths: tuple[str, ...], changed: str) -> bool:
    """Whether the changed file `changed` lies under one of `paths`."""
    return any(not p or changed == p or changed.startswith(p + "/") for p in paths)
