"""Helm dependencies from a real HTTP chart repository (index.yaml + a chart archive made
with helm-python-sdk): fetched once into the chart cache, then rendered without the server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import helm_python
import pytest

from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.render.errors import HelmRenderError
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.gitops.render.request import AppContext, HelmOptions, RenderRequest, SourceType
from meshpilot.gitops.repo import RepoService
from tests.gitops_fixtures import GitRepo, make_repo
from tests.gitops_servers import ChartRepo, chart_repo_server

BACKEND_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-backend
data:
  color: {{ .Values.color | quote }}
"""


def write_chart(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@contextmanager
def backend_chart_repo(tmp_path: Path) -> Iterator[ChartRepo]:
    """A chart repository serving backend-0.1.0.tgz, packaged with helm-python-sdk."""
    source = write_chart(
        tmp_path / "backend",
        {
            "Chart.yaml": "apiVersion: v2\nname: backend\nversion: 0.1.0\n",
            "values.yaml": "color: blue\n",
            "templates/cm.yaml": BACKEND_TEMPLATE,
        },
    )
    served = tmp_path / "served"
    served.mkdir()
    helm_python.package(source, destination=served)
    with chart_repo_server(served) as repo:
        helm_python.repo_index_generate(served, base_url=repo.url)
        yield repo


@pytest.fixture
def chart_repo(tmp_path: Path) -> Iterator[ChartRepo]:
    with backend_chart_repo(tmp_path) as repo:
        yield repo


def app_repo(path: Path, chart_repo_url: str) -> GitRepo:
    chart = (
        "apiVersion: v2\nname: frontend\nversion: 1.0.0\ndependencies:\n"
        f"  - name: backend\n    version: 0.1.0\n    repository: {chart_repo_url}\n"
    )
    return make_repo(
        path,
        {
            "chart/Chart.yaml": chart,
            "chart/values.yaml": "backend:\n  color: green\n",
            "chart/templates/svc.yaml": "apiVersion: v1\nkind: Service\n"
            "metadata:\n  name: {{ .Release.Name }}-frontend\n",
        },
    )


def request(repo: GitRepo) -> RenderRequest:
    return RenderRequest(
        repo_url=str(repo.path),
        revision="main",
        path="chart",
        source_type=SourceType.HELM,
        app=AppContext(name="shop", namespace="default"),
        helm=HelmOptions(),
    )


def names(manifests: tuple[Manifest, ...]) -> list[str]:
    return sorted(m.name for m in manifests)


def backend_data(manifests: tuple[Manifest, ...]) -> object:
    return next(m.data["data"] for m in manifests if m.kind == "ConfigMap")


def test_dependency_fetched_once_then_served_from_the_chart_cache(
    tmp_path: Path, chart_repo: ChartRepo
) -> None:
    repo = app_repo(tmp_path / "app", chart_repo.url)
    config = RendererConfig(chart_cache_dir=tmp_path / "charts")
    first = Renderer(RepoService(tmp_path / "git"), config).render(request(repo))
    assert names(first.manifests) == ["shop-backend", "shop-frontend"]
    assert backend_data(first.manifests) == {"color": "green"}  # parent values reach the dependency
    archives = [p for p in chart_repo.log.paths() if p.endswith(".tgz")]
    assert archives == ["/backend-0.1.0.tgz"]
    assert list((tmp_path / "charts").glob("*/backend-0.1.0.tgz"))
    # another commit, another renderer: the server is not asked again
    requests = len(chart_repo.log.paths())
    repo.commit({"chart/values.yaml": "backend:\n  color: red\n"})
    again = Renderer(RepoService(tmp_path / "git"), config).render(request(repo))
    assert backend_data(again.manifests) == {"color": "red"}
    assert len(chart_repo.log.paths()) == requests


def test_second_render_needs_no_server(tmp_path: Path) -> None:
    with backend_chart_repo(tmp_path) as server:
        repo = app_repo(tmp_path / "app", server.url)
        config = RendererConfig(chart_cache_dir=tmp_path / "charts")
        Renderer(RepoService(tmp_path / "git"), config).render(request(repo))
    # the server is stopped: a new commit, in a new renderer (empty manifest cache),
    # still renders because the dependency comes from the chart cache
    repo.commit({"chart/values.yaml": "backend:\n  color: red\n"})
    second = Renderer(RepoService(tmp_path / "git"), config).render(request(repo))
    assert not second.cached
    assert backend_data(second.manifests) == {"color": "red"}
    # without the cache the same render fails, clearly, naming the dependency
    empty = RendererConfig(chart_cache_dir=tmp_path / "empty-cache")
    with pytest.raises(HelmRenderError, match=r"cannot fetch chart dependencies \(backend 0.1.0\)"):
        Renderer(RepoService(tmp_path / "git2"), empty).render(request(repo))
