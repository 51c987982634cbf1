"""Render a RenderRequest: resolve the revision, reuse cached manifests for an unchanged
(commit, path, parameters), else check out the commit privately and dispatch by source type."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from meshpilot.gitops.render.charts import ChartCache
from meshpilot.gitops.render.directory import render_directory
from meshpilot.gitops.render.errors import PluginError, RenderError
from meshpilot.gitops.render.helm import HelmInputs, render_helm
from meshpilot.gitops.render.layered import render_layered
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.gitops.render.plugin import DEFAULT_BASE_ENV, PluginSource, plugin_env, run_plugin
from meshpilot.gitops.render.request import PluginSpec, RenderRequest, SourceType
from meshpilot.gitops.render.sops import AgeIdentity
from meshpilot.gitops.repo.cache import CacheKey, ManifestCache
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.urls import normalize_url, scrub

__all__ = ["RenderResult", "Renderer", "RendererConfig"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RenderResult:
    commit: str
    manifests: tuple[Manifest, ...]
    cached: bool


@dataclass(frozen=True, slots=True)
class RendererConfig:
    plugins: Mapping[str, PluginSpec] = field(default_factory=dict)
    age_identities: Sequence[AgeIdentity] = ()
    chart_cache_dir: Path | None = None
    temp_dir: Path | None = None  # parent of private working copies (default: system temp)
    plugin_base_env: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_BASE_ENV))


class Renderer:
    def __init__(
        self,
        repos: RepoService,
        config: RendererConfig | None = None,
        cache: ManifestCache[tuple[Manifest, ...]] | None = None,
    ) -> None:
        self.repos = repos
        self.config = config or RendererConfig()
        self.cache = cache if cache is not None else ManifestCache()
        cache_dir = self.config.chart_cache_dir
        self.charts = ChartCache(cache_dir) if cache_dir is not None else None

    def render(self, request: RenderRequest) -> RenderResult:
        commit = self.repos.resolve(request.repo_url, request.revision)
        key = self._cache_key(request, commit)
        hit = self.cache.get(key)
        if hit is not None:
            return RenderResult(commit, hit, cached=True)
        only = request.path if key.commit.startswith("tree:") else ""  # a directory that exists
        with self.repos.checkout(request.repo_url, commit, self.config.temp_dir, only) as root:
            manifests = tuple(self._dispatch(request, root, commit))
        self.cache.put(key, manifests)
        log.info(
            "rendered %s path %s at %s: %d manifests",
            scrub(request.repo_url),
            request.path,
            commit[:12],
            len(manifests),
        )
        return RenderResult(commit, manifests, cached=False)

    def _cache_key(self, request: RenderRequest, commit: str) -> CacheKey:
        """A plain directory renders from its own tree alone: keyed by that tree's id, a
        commit that leaves the path alone reuses the manifests. Helm, layered and plugin
        sources may read outside their path (values, charts) or see the commit: by commit."""
        version = commit
        if request.source_type is SourceType.DIRECTORY:
            tree = self.repos.tree_hash(request.repo_url, commit, request.path)
            if tree is not None:
                version = f"tree:{tree}"
        url = normalize_url(request.repo_url)
        return CacheKey(url, version, request.path, request.fingerprint())

    def _source_dir(self, root: Path, path: str) -> Path:
        rel = PurePosixPath(path or ".")
        if rel.is_absolute() or ".." in rel.parts:
            raise RenderError(f"source path {path!r} must stay inside the repository")
        return root / rel

    def _dispatch(self, request: RenderRequest, root: Path, commit: str) -> list[Manifest]:
        source = self._source_dir(root, request.path)
        label = request.path or "."
        identities = self.config.age_identities
        match request.source_type:
            case SourceType.DIRECTORY:
                return render_directory(source, request.directory, label)
            case SourceType.HELM:
                inputs = HelmInputs(source, root, label)
                return render_helm(inputs, request.helm, request.app, identities, self.charts)
            case SourceType.LAYERED:
                if request.layered is None:
                    raise RenderError("layered source without cluster and namespace")
                return render_layered(source, request.layered, request.app, identities, self.charts)
            case SourceType.PLUGIN:
                return self._plugin(request, source, commit)
        raise RenderError(f"unknown source type {request.source_type!r}")

    def _plugin(self, request: RenderRequest, source: Path, commit: str) -> list[Manifest]:
        if request.plugin is None:
            raise PluginError("plugin source without a plugin name")
        spec = self.config.plugins.get(request.plugin.name)
        if spec is None:
            raise PluginError(f"plugin {request.plugin.name!r} is not configured")
        facts = PluginSource(
            repo_url=scrub(request.repo_url),
            path=request.path,
            target_revision=request.revision,
            revision=commit,
        )
        env = plugin_env(request.app, facts, request.plugin, self.config.plugin_base_env)
        return run_plugin(spec, source, env, self.config.temp_dir)
