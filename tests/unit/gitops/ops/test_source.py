"""Application sources → render requests, multiple sources merged, refresh conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from meshpilot.gitops.model import Application, ConditionType, SyncStatusCode
from meshpilot.gitops.refresh import refresh_app
from meshpilot.gitops.render import SourceType
from meshpilot.gitops.repo import RepoService
from meshpilot.gitops.source import SourceError, chart_detector, render_requests
from meshpilot.gitops.sync.execute import execute_sync
from tests.gitops_fixtures import make_repo
from tests.unit.gitops.ops.env import DR, SERVICE, app_yaml, make_world


def _app(**spec: Any) -> Application:
    base: dict[str, Any] = {"destination": {"name": "in-cluster", "namespace": "shop"}}
    return Application.model_validate(
        {"metadata": {"name": "shop", "namespace": "argocd"}, "spec": {**base, **spec}}
    )


def test_tools_map_to_source_types() -> None:
    app = _app(
        sources=[
            {"repoURL": "r", "path": "d", "directory": {"recurse": True, "include": "*.yaml"}},
            {"repoURL": "r", "path": "c", "helm": {"valueFiles": ["v.yaml"],
                                                   "parameters": [{"name": "a", "value": "1"}]}},
            {"repoURL": "r", "path": "p", "plugin": {"name": "cmp",
                                                     "env": [{"name": "X", "value": "1"}]}},
            {"repoURL": "r", "path": ".", "plugin": {"name": "meshpilot-layered",
                                                     "env": [{"name": "CLUSTER", "value": "dev"}]}},
            {"repoURL": "r", "ref": "values"},
        ]
    )  # fmt: skip
    requests = render_requests(app, revisions=["", "v2"])
    assert [r.source_type for r in requests] == [
        SourceType.DIRECTORY, SourceType.HELM, SourceType.PLUGIN, SourceType.LAYERED,
    ]  # fmt: skip
    assert requests[0].directory.recurse and requests[0].revision == "HEAD"
    assert requests[1].revision == "v2"
    assert requests[1].helm.release_name == "shop" and requests[1].helm.namespace == "shop"
    assert requests[2].plugin is not None and requests[2].plugin.env == (("X", "1"),)
    assert requests[3].layered is not None
    assert (requests[3].layered.cluster, requests[3].layered.namespace) == ("dev", "shop")


def test_chart_repository_is_refused_with_the_field_named() -> None:
    app = _app(source={"repoURL": "https://charts.example.com", "chart": "nginx"})
    with pytest.raises(SourceError, match=r"spec.source.chart: Helm chart repositories"):
        render_requests(app)


def test_chart_yaml_means_helm(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"chart/Chart.yaml": "apiVersion: v2\n", "plain/a.yaml": ""})
    detect = chart_detector(RepoService(tmp_path / "cache"))
    chart = _app(source={"repoURL": str(repo.path), "path": "chart"})
    plain = _app(source={"repoURL": str(repo.path), "path": "plain"})
    assert render_requests(chart, has_chart=detect)[0].source_type is SourceType.HELM
    assert render_requests(plain, has_chart=detect)[0].source_type is SourceType.DIRECTORY


def test_multiple_sources_are_merged(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    other = make_repo(tmp_path / "other", {"extra/dr.yaml": DR, "extra/svc.yaml": SERVICE})
    app = app_yaml(repo=str(world.repo.path))
    app["spec"].pop("source")
    app["spec"]["sources"] = [
        {"repoURL": str(world.repo.path), "path": "mesh", "targetRevision": "main"},
        {"repoURL": str(other.path), "path": "extra", "targetRevision": "main"},
    ]
    world.put(app)
    state = refresh_app(world.app(), world.deps)
    assert [s.commit for s in state.sources] == [
        world.repo.git("rev-parse", "HEAD"), other.git("rev-parse", "HEAD"),
    ]  # fmt: skip
    assert state.comparison is not None
    assert any(
        c.type is ConditionType.REPEATED_RESOURCE_WARNING for c in state.conditions
    )  # the DR and Service are in both repos
    assert execute_sync(world.app(), world.deps).succeeded
    status = world.status()
    assert status["sync"]["revisions"] == [s.commit for s in state.sources]
    assert len(status["history"][0]["sources"]) == 2


def test_unreachable_repo_is_a_comparison_error(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.put(app_yaml(repo=str(tmp_path / "missing")))
    state = refresh_app(world.app(), world.deps)
    assert state.sync_status is SyncStatusCode.UNKNOWN
    assert [c.type for c in state.conditions] == [ConditionType.COMPARISON_ERROR]
    assert state.conditions[0].message.startswith("Failed to load target state:")
