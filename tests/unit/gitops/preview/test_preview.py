"""`gitops preview` end to end on real git repositories and a real directory store: the
manifest diff and the Envoy configuration diff of a branch, per app and per proxy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshpilot.gitops.preview import (
    Change,
    PreviewDeps,
    PreviewReport,
    PreviewRequest,
    render_json,
    render_markdown,
    render_text,
    run_preview,
)
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.repo import RepoService
from meshpilot.store.base import StoreSnapshot
from tests.unit.gitops.preview.mesh_fixtures import (
    DESTINATION_RULE,
    SUBSET_V3,
    WORKLOADS,
    application,
    branch,
    live_store,
    routing_repo,
    virtual_service,
)


def _renderer(tmp: Path) -> Renderer:
    return Renderer(RepoService(tmp / "cache"), RendererConfig(temp_dir=tmp))


def _preview(tmp: Path, repo: Path, head: str, snapshot: StoreSnapshot | None) -> PreviewReport:
    request = PreviewRequest(str(repo), "main", head)
    return run_preview(request, PreviewDeps(_renderer(tmp), snapshot))


@pytest.fixture
def env(tmp_path: Path) -> tuple[Path, Path, StoreSnapshot]:
    repo = routing_repo(tmp_path / "repo")
    store = live_store(tmp_path / "store", WORKLOADS, application(repo.path))
    return tmp_path, repo.path, store.snapshot()


def test_weight_shift_shows_manifest_diff_and_route_change_per_proxy(
    env: tuple[Path, Path, StoreSnapshot],
) -> None:
    tmp, repo_path, snapshot = env
    from tests.gitops_fixtures import GitRepo

    repo = GitRepo(repo_path)
    branch(repo, "shift", {"apps/routing/virtual-service.yaml": virtual_service(50, 50)})
    report = _preview(tmp, repo_path, "shift", snapshot)

    assert not report.failed
    assert report.changed_files == ("apps/routing/virtual-service.yaml",)
    (app,) = report.apps
    assert app.app == "argocd/routing"
    (res,) = app.resources
    assert res.key == "networking.istio.io/VirtualService/default/reviews"
    assert res.change is Change.CHANGED
    assert "-      weight: 80\n" in res.diff and "+      weight: 50\n" in res.diff

    by_first = {p.proxies[0]: p for p in report.proxies}
    # every sidecar sees the reviews service; the gateway routes it through bookinfo-gateway
    assert set(by_first) == {
        "istio-ingressgateway-a.istio-system",
        "productpage-v1-a.default",
        "reviews-v1-a.default",
        "reviews-v2-a.default",
    }
    assert by_first["reviews-v2-a.default"].proxies == (
        "reviews-v2-a.default",
        "reviews-v2-b.default",
    )  # identical sidecars are one class, translated once
    shift = "reviews.default.svc.cluster.local:9080 weights v1 80→50, v2 20→50 (route split)"
    sidecar = by_first["productpage-v1-a.default"]
    routes = {c.name: c for c in sidecar.changes if c.type == "routes"}
    assert (routes["9080"].change, routes["9080"].details) == (Change.CHANGED, (shift,))
    assert {c.type for c in sidecar.changes} == {"routes"}  # no listener or cluster moves
    gateway = by_first["istio-ingressgateway-a.istio-system"]
    assert gateway.proxy_type == "router"
    (gw_route,) = gateway.changes
    assert gw_route.name == "http.8080"
    assert any("weights v1 80→50, v2 20→50" in d for d in gw_route.details)
    assert report.unchanged_proxies == 0 and report.changed_proxies == 5

    markdown = render_markdown(report)
    assert "| argocd/routing | +0 -0 ~1 | 0 | ✅ |" in markdown
    assert "**Proxies:** 5 change, 0 unchanged." in markdown
    assert "<details>" in markdown and "```diff\n" in markdown
    assert shift in markdown
    text = render_text(report)
    assert shift in text and "+      weight: 50" in text
    data = json.loads(render_json(report))
    assert data["failed"] is False
    assert data["apps"][0]["counts"] == {"added": 0, "removed": 0, "changed": 1}


def test_new_subset_adds_a_cluster(env: tuple[Path, Path, StoreSnapshot]) -> None:
    tmp, repo_path, snapshot = env
    from tests.gitops_fixtures import GitRepo

    branch(
        GitRepo(repo_path),
        "subset",
        {"apps/routing/destination-rule.yaml": DESTINATION_RULE + SUBSET_V3},
    )
    report = _preview(tmp, repo_path, "subset", snapshot)
    (app,) = report.apps
    (res,) = app.resources
    assert res.key == "networking.istio.io/DestinationRule/default/reviews"
    sidecar = next(p for p in report.proxies if p.proxies[0] == "productpage-v1-a.default")
    added = [(c.type, c.name) for c in sidecar.changes if c.change is Change.ADDED]
    assert ("clusters", "outbound|9080|v3|reviews.default.svc.cluster.local") in added
    assert ("endpoints", "outbound|9080|v3|reviews.default.svc.cluster.local") in added
    md = render_markdown(report)
    assert "clusters `outbound|9080|v3|reviews.default.svc.cluster.local` added" in md


def test_invalid_virtual_service_at_head_is_reported_with_file_and_line(
    env: tuple[Path, Path, StoreSnapshot],
) -> None:
    tmp, repo_path, snapshot = env
    from tests.gitops_fixtures import GitRepo

    bad = virtual_service(50, 50, weight_key="wieght")
    branch(GitRepo(repo_path), "bad", {"apps/routing/virtual-service.yaml": bad})
    report = _preview(tmp, repo_path, "bad", snapshot)
    assert report.failed
    (app,) = report.apps
    (finding,) = app.errors
    line = bad.splitlines().index("      wieght: 50") + 1
    assert (finding.file, finding.line) == ("apps/routing/virtual-service.yaml", line)
    assert finding.object == "VirtualService default/reviews"
    assert "wieght" in finding.message
    # the store would refuse the sync: proxies keep the base routes
    assert report.proxies == () and report.unchanged_proxies == 5
    md = render_markdown(report)
    assert md.index("[!CAUTION]") < md.index("| App |")
    assert f"`apps/routing/virtual-service.yaml:{line}`" in md


def test_unrelated_change_affects_no_app(env: tuple[Path, Path, StoreSnapshot]) -> None:
    tmp, repo_path, snapshot = env
    from tests.gitops_fixtures import GitRepo

    branch(GitRepo(repo_path), "docs", {"README.md": "more docs\n"})
    report = _preview(tmp, repo_path, "docs", snapshot)
    assert report.apps == () and report.proxies == () and not report.failed
    assert "No application reads the 1 changed file(s)." in render_markdown(report)


def test_two_apps_of_one_change_are_synced_together_and_a_broken_app_fails(
    tmp_path: Path,
) -> None:
    from tests.gitops_fixtures import make_repo

    repo = make_repo(
        tmp_path / "repo",
        {
            "apps/routing/vs.yaml": virtual_service(80, 20),
            "apps/policies/dr.yaml": DESTINATION_RULE,
            "apps/extra/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
        },
    )
    apps = [application(repo.path, n, f"apps/{n}") for n in ("routing", "policies", "extra")]
    store = live_store(tmp_path / "store", WORKLOADS, *apps)
    canary = virtual_service(80, 10).replace(
        "      weight: 10\n",
        "      weight: 10\n    - destination: {host: reviews, subset: v3}\n      weight: 10\n",
    )
    branch(
        repo,
        "canary",
        {"apps/routing/vs.yaml": canary, "apps/policies/dr.yaml": DESTINATION_RULE + SUBSET_V3},
    )
    repo.git("checkout", "-q", "canary")
    repo.git("rm", "-q", "-r", "apps/extra")
    repo.commit(message="drop extra")
    repo.git("checkout", "-q", "main")
    report = _preview(tmp_path, repo.path, "canary", store.snapshot())

    assert [a.app for a in report.apps] == ["argocd/extra", "argocd/policies", "argocd/routing"]
    extra, policies, routing = report.apps
    assert "does not exist" in extra.error and report.failed
    assert [r.key for r in policies.resources] == [
        "networking.istio.io/DestinationRule/default/reviews"
    ]
    assert [r.key for r in routing.resources] == [
        "networking.istio.io/VirtualService/default/reviews"
    ]
    sidecar = next(p for p in report.proxies if p.proxies[0] == "productpage-v1-a.default")
    lines = [d for c in sidecar.changes for d in c.details]
    shift = f"{'reviews.default.svc.cluster.local:9080'} weights v2 20→10, v3 0→10 (route split)"
    assert shift in lines  # the route to v3 and the v3 subset arrive together
    assert any(c.name.startswith("outbound|9080|v3|") for c in sidecar.changes)
    assert "render failed" in render_markdown(report)


def test_analyzer_error_at_head_fails_the_preview(env: tuple[Path, Path, StoreSnapshot]) -> None:
    tmp, repo_path, snapshot = env
    from tests.gitops_fixtures import GitRepo

    missing = virtual_service(50, 50).replace("subset: v2", "subset: v9")
    branch(GitRepo(repo_path), "missing", {"apps/routing/virtual-service.yaml": missing})
    report = _preview(tmp, repo_path, "missing", snapshot)
    (app,) = report.apps
    assert report.failed, app.findings
    (finding,) = app.errors
    line = missing.splitlines().index("    - destination: {host: reviews, subset: v9}") + 1
    assert (finding.file, finding.line) == ("apps/routing/virtual-service.yaml", line)
    assert "v9" in finding.message
