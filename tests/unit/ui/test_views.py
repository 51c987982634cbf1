"""The pages' reading of API answers: the side-by-side diff pairs a changed line's old and new
text on one row, the list's filters and pages, and the resource tree."""

from __future__ import annotations

from meshpilot.gitops.diff.text import unified_diff
from meshpilot.gitops.model import Application
from meshpilot.ui.diffview import side_by_side
from meshpilot.ui.views import PAGE_SIZE, AppRow, Filters, Page, tree
from tests.unit.gitops.controller.env import app_manifest


def test_side_by_side_pairs_changed_lines_and_keeps_context() -> None:
    live = {"kind": "VirtualService", "spec": {"weight": 100, "host": "reviews"}}
    desired = {"kind": "VirtualService", "spec": {"weight": 80, "host": "reviews", "new": 1}}
    text = "===== networking.istio.io/VirtualService shop/reviews ======\n"
    text += unified_diff(live, desired, "reviews")
    text += "===== /Service shop/gone ======\n" + unified_diff({"kind": "Service"}, None, "gone")
    first, second = side_by_side(text)
    assert first.title == "networking.istio.io/VirtualService shop/reviews"
    rows = [(r.left, r.right, r.change) for r in first.rows]
    assert ("  weight: 100", "  weight: 80", "changed") in rows
    assert ("", "  new: 1", "added") in rows
    assert ("  host: reviews", "  host: reviews", "same") in rows
    assert second.title == "/Service shop/gone"
    assert [(r.left, r.change) for r in second.rows if r.change != "hunk"] == [
        ("kind: Service", "removed")
    ]
    assert side_by_side("") == []


def _row(name: str, **kw: str) -> AppRow:
    base = dict(namespace="argocd", name=name, project="default", repo="https://r", path="p",
                revision="main", destination="shop", sync="Synced", health="Healthy",
                operation="")  # fmt: skip
    return AppRow(**{**base, **kw})


def test_filters_and_pages() -> None:
    rows = [_row(f"app-{i:03d}", sync="OutOfSync" if i % 3 == 0 else "Synced") for i in range(120)]
    rows.append(_row("other", project="infra", destination="infra", repo="https://q"))
    everything = Page.of(rows, Filters(), 1)
    assert everything.total == 121 and everything.pages == 3 and len(everything.rows) == PAGE_SIZE
    assert everything.choices["project"] == ["default", "infra"]
    assert Page.of(rows, Filters(), 99).number == 3  # past the end: the last page
    out = Page.of(rows, Filters.of({"sync": ["OutOfSync"], "project": ["default"]}), 1)
    assert out.total == 40 and all(r.sync == "OutOfSync" for r in out.rows)
    found = Page.of(rows, Filters.of({"namespace": ["infra"], "repo": ["https://q"]}), 1)
    assert [r.name for r in found.rows] == ["other"]
    assert Page.of(rows, Filters.of({"q": ["APP-01"]}), 1).total == 10
    assert Filters(sync="OutOfSync").query(2) == "sync=OutOfSync&page=2"


def test_row_from_the_model_equals_the_row_from_the_manifest() -> None:
    manifest = app_manifest("https://git.example/shop.git")
    manifest["status"] = {"sync": {"status": "OutOfSync"}, "health": {"status": "Degraded"},
                          "operationState": {"phase": "Failed"}}  # fmt: skip
    app = Application.model_validate(manifest)
    assert AppRow.of_model("argocd", app) == AppRow.of(manifest)


def test_tree_groups_resources_by_kind_with_owners() -> None:
    manifest = {"status": {"resources": [
        {"kind": "VirtualService", "group": "networking.istio.io", "namespace": "shop",
         "name": "b", "status": "Synced", "health": {"status": "Healthy"}},
        {"kind": "Pod", "namespace": "shop", "name": "p", "status": "OutOfSync",
         "requiresPruning": True},
        {"kind": "VirtualService", "group": "networking.istio.io", "namespace": "shop",
         "name": "a", "status": "OutOfSync"},
    ]}}  # fmt: skip
    groups = tree(manifest, {("Pod", "shop", "p"): ["ReplicaSet/r", "Deployment/d"]})
    assert [g.kind for g in groups] == ["Pod", "VirtualService"]
    pod = groups[0].nodes[0]
    assert pod.owners == ["ReplicaSet/r", "Deployment/d"] and pod.prune
    assert [n.ref for n in groups[1].nodes] == [
        "networking.istio.io/VirtualService/shop/b",
        "networking.istio.io/VirtualService/shop/a",
    ]
