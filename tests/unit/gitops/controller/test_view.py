"""The controller's store view on a real DirectoryStore: the ownership index follows writes
by other processes, and the mesh findings are computed again only when a mesh object
changes (an Application's status write does not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.controller.view import StoreView
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.store.directory import DirectoryStore
from tests.unit.gitops.controller.env import app_manifest

TRACKING = "argocd.argoproj.io/tracking-id"


def _vs(name: str, owner: str, weight: int = 100) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if owner:
        meta["annotations"] = {TRACKING: f"{owner}:networking.istio.io/VirtualService:shop/{name}"}
    route = [{"destination": {"host": "reviews"}, "weight": weight}]
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": meta,
        "spec": {"hosts": ["reviews"], "http": [{"route": route}]},
    }


def _put(store: DirectoryStore, *objects: dict[str, Any]) -> None:
    store.apply([RawDocument("<test>", n, o, {}) for n, o in enumerate(objects, start=1)])


def test_ownership_index_follows_other_writers(tmp_path: Path) -> None:
    register_gitops_kinds()
    ours, other = DirectoryStore(tmp_path / "s"), DirectoryStore(tmp_path / "s")
    view = StoreView(ours)
    _put(other, _vs("a", "shop"), _vs("b", "web"), _vs("c", ""))
    ours.refresh()
    key = {n: ConfigKey(Kind.VIRTUAL_SERVICE, "shop", n) for n in "abc"}
    assert view.tracked_keys("shop") == {key["a"]}
    assert view.tracked_keys("web") == {key["b"]}
    _put(other, _vs("a", "web"), _vs("c", "shop"))  # ownership moves, by another process
    ours.refresh()
    assert view.tracked_keys("shop") == {key["c"]}
    assert view.tracked_keys("web") == {key["a"], key["b"]}
    other.delete([key["b"]])
    ours.refresh()
    assert view.tracked_keys("web") == {key["a"]}


def test_mesh_findings_ignore_application_status_writes(tmp_path: Path) -> None:
    register_gitops_kinds()
    store = DirectoryStore(tmp_path / "s")
    view = StoreView(store)
    app = app_manifest("/nowhere")
    _put(store, app, _vs("a", "shop"))
    first = view.mesh_findings()
    _put(store, {**app, "status": {"sync": {"status": "OutOfSync"}}})  # a status write
    assert view.mesh_findings() is first
    _put(store, _vs("a", "shop", weight=50))  # a mesh object changed: analyzed again
    assert view.mesh_findings() is not first
