"""A plain directory source is cached by the git tree id of its path: a commit that leaves
the path alone reuses the manifests (no checkout, no render), a change to the path renders
again, and only the path itself is extracted."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.render import Renderer, RendererConfig, RenderRequest
from meshpilot.gitops.repo import RepoService
from tests.gitops_fixtures import make_repo

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: '{v}'\n"


def test_commit_elsewhere_reuses_the_apps_manifests(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"apps/a/cm.yaml": CM.format(name="a", v=1), "apps/b/cm.yaml": CM.format(name="b", v=1)},
    )
    renderer = Renderer(RepoService(tmp_path / "cache"), RendererConfig(temp_dir=tmp_path))

    def render(path: str) -> tuple[str, bool, list[str]]:
        request = RenderRequest(repo_url=str(repo.path), revision="main", path=path)
        result = renderer.render(request)
        return result.commit, result.cached, [m.data["data"]["v"] for m in result.manifests]

    first, cached, values = render("apps/a")
    assert (cached, values) == (False, ["1"])
    second = repo.commit({"apps/b/cm.yaml": CM.format(name="b", v=2)})
    assert render("apps/a") == (second, True, ["1"])  # new commit, same tree: no render
    assert render("apps/b")[1:] == (False, ["2"])
    third = repo.commit({"apps/a/cm.yaml": CM.format(name="a", v=3)})
    assert render("apps/a") == (third, False, ["3"])
    assert first != second != third


def test_missing_path_still_reports_clearly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"apps/a/cm.yaml": CM.format(name="a", v=1)})
    renderer = Renderer(RepoService(tmp_path / "cache"), RendererConfig(temp_dir=tmp_path))
    request = RenderRequest(repo_url=str(repo.path), revision="main", path="apps/nope")
    with pytest.raises(MeshpilotError, match="apps/nope"):
        renderer.render(request)
