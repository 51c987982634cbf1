"""Application.source / sources[] → RenderRequests (what repo-server is asked to generate).

Tool selection, as Argo CD does it:

- `plugin: {name: meshpilot-layered}` → the seed team's layered chart + SOPS layout (built
  in; `env` CLUSTER defaults to the destination name, else `in-cluster`, and NAMESPACE to
  the destination namespace);
- any other `plugin` → that config management plugin (`env` → ARGOCD_ENV_*);
- `helm` → the Helm chart at `path`;
- `directory` → plain YAML/JSON;
- none of them → Helm when `path/Chart.yaml` exists at the revision (ask `has_chart`),
  else a plain directory.

A source with only `ref` (Argo CD's values-only source) renders nothing and is skipped.
Helm charts from chart repositories (`chart:`) are refused with a clear message: the repo
service fetches git only.

    requests = render_requests(app, has_chart=chart_detector(repos))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace

from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import Application, ApplicationSource
from meshpilot.gitops.render.request import (
    AppContext,
    DirectoryOptions,
    HelmOptions,
    HelmParameter,
    LayeredOptions,
    PluginOptions,
    RenderRequest,
    SourceType,
)
from meshpilot.gitops.repo.errors import GitCommandError, RepoError
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.git import GitEnv, run_git

__all__ = [
    "LAYERED_PLUGIN",
    "ChartDetector",
    "SourceError",
    "chart_detector",
    "render_request",
    "render_requests",
    "rendered_sources",
]

LAYERED_PLUGIN = "meshpilot-layered"

# (repo URL, revision, path) → whether `path/Chart.yaml` exists there.
ChartDetector = Callable[[str, str, str], bool]


class SourceError(GitopsError):
    """An Application source that cannot be turned into a render request."""


def rendered_sources(app: Application) -> list[tuple[int, ApplicationSource]]:
    """The sources that produce manifests, with their position in `spec.sources` (0 for
    `spec.source`): values-only `ref` sources are left out."""
    return [(i, s) for i, s in enumerate(app.spec.all_sources) if not (s.ref and not s.path)]


def render_requests(
    app: Application,
    *,
    has_chart: ChartDetector | None = None,
    revisions: Sequence[str] | None = None,
) -> list[RenderRequest]:
    """One RenderRequest per rendered source, in source order.

    `revisions` (optional) overrides targetRevision per position of `spec.sources` (or the
    one source): a sync to `--revision R` or a rollback passes them; empty strings keep the
    source's own. Raises SourceError naming the field that is wrong.
    """
    out = []
    for position, source in rendered_sources(app):
        revision = source.revision
        if revisions is not None and position < len(revisions) and revisions[position]:
            revision = revisions[position]
        out.append(render_request(app, source, position, revision, has_chart))
    if not out:
        raise SourceError(f"application {app.name}: spec.sources: no source renders manifests")
    return out


def _field(app: Application, position: int) -> str:
    return f"spec.sources[{position}]" if app.spec.sources else "spec.source"


def render_request(
    app: Application,
    source: ApplicationSource,
    position: int,
    revision: str,
    has_chart: ChartDetector | None = None,
) -> RenderRequest:
    where = f"application {app.name}: {_field(app, position)}"
    dest = app.spec.destination
    base = RenderRequest(
        repo_url=source.repo_url,
        revision=revision,
        path=source.path or ".",
        app=AppContext(name=app.name, namespace=dest.namespace),
    )
    if source.chart:
        raise SourceError(
            f"{where}.chart: Helm chart repositories are not supported; "
            "put the chart in git and use path"
        )
    if source.plugin is not None:
        return _plugin_request(app, source, base, where)
    if source.helm is not None:
        return _helm_request(app, source, base)
    if source.directory is not None:
        d = source.directory
        options = DirectoryOptions(recurse=d.recurse, include=d.include, exclude=d.exclude)
        return replace(base, source_type=SourceType.DIRECTORY, directory=options)
    if has_chart is not None and has_chart(source.repo_url, revision, base.path):
        return _helm_request(app, source, base)
    return base


def _helm_request(
    app: Application, source: ApplicationSource, base: RenderRequest
) -> RenderRequest:
    helm = source.helm
    if helm is None:
        options = HelmOptions(release_name=app.name, namespace=base.app.namespace)
        return replace(base, source_type=SourceType.HELM, helm=options)
    values = helm.values
    if helm.values_object is not None:
        values = json.dumps(helm.values_object, sort_keys=True)
    options = HelmOptions(
        value_files=tuple(helm.value_files),
        values=values,
        parameters=tuple(HelmParameter(p.name, p.value, p.force_string) for p in helm.parameters),
        release_name=helm.release_name or app.name,
        namespace=base.app.namespace,
        skip_crds=helm.skip_crds,
        ignore_missing_value_files=helm.ignore_missing_value_files,
    )
    return replace(base, source_type=SourceType.HELM, helm=options)


def _plugin_request(
    app: Application, source: ApplicationSource, base: RenderRequest, where: str
) -> RenderRequest:
    plugin = source.plugin
    assert plugin is not None
    env = {e.name: e.value for e in plugin.env}
    if plugin.name == LAYERED_PLUGIN:
        dest = app.spec.destination
        cluster = env.get("CLUSTER") or dest.name or "in-cluster"
        namespace = env.get("NAMESPACE") or dest.namespace
        if not namespace:
            raise SourceError(
                f"{where}.plugin.env: NAMESPACE is required when the destination has no namespace"
            )
        layered = LayeredOptions(cluster=cluster, namespace=namespace)
        return replace(base, source_type=SourceType.LAYERED, layered=layered)
    if not plugin.name:
        raise SourceError(f"{where}.plugin.name: plugin discovery is not supported; name one")
    options = PluginOptions(name=plugin.name, env=tuple(sorted(env.items())))
    return replace(base, source_type=SourceType.PLUGIN, plugin=options)


def chart_detector(repos: RepoService) -> ChartDetector:
    """Argo CD's tool detection for sources naming no tool: a `Chart.yaml` at the path."""

    def has_chart(repo_url: str, revision: str, path: str) -> bool:
        try:
            commit = repos.resolve(repo_url, revision)
        except RepoError:
            return False  # the render that follows reports the problem
        rel = path.strip("/") if path not in ("", ".") else ""
        spec = f"{commit}:{rel + '/' if rel else ''}Chart.yaml"
        env = GitEnv(env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"})
        try:
            run_git(["cat-file", "-e", spec], env, cwd=repos.mirror_path(repo_url), timeout=30)
        except GitCommandError:
            return False
        return True

    return has_chart
