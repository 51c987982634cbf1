"""The controller's auto-sync hands its comparison to the sync it starts: used while the
store is still at the version it read, never after another write."""

from __future__ import annotations

from pathlib import Path

from meshpilot.gitops.diff import key_of
from meshpilot.gitops.diff.tracking import with_tracking
from meshpilot.gitops.refresh import refresh_app
from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import SyncParams
from tests.unit.gitops.ops.env import make_world, vs


def _weights(live: dict[str, object] | None) -> list[int]:
    assert live is not None
    spec = live["spec"]
    assert isinstance(spec, dict)
    return [int(d["weight"]) for d in spec["http"][0]["route"]]


def test_the_compared_revision_is_synced_while_the_store_is_unchanged(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert execute_sync(world.app(), world.deps).succeeded
    world.repo.commit({"mesh/vs.yaml": vs(30, 70)}, "shift")
    compared = refresh_app(world.app(), world.deps)
    world.repo.commit({"mesh/vs.yaml": vs(10, 90)}, "a later push, not yet compared")
    outcome = execute_sync(world.app(), world.deps, compared=compared)
    assert outcome.succeeded, outcome.message
    # as Argo CD's auto-sync: the operation syncs the revision its comparison saw
    assert outcome.revision == compared.revision
    assert _weights(world.live("VirtualService", "reviews")) == [30, 70]


def test_a_write_after_the_comparison_makes_the_sync_compare_again(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert execute_sync(world.app(), world.deps).succeeded
    world.repo.commit({"mesh/vs.yaml": vs(30, 70)}, "shift")
    compared = refresh_app(world.app(), world.deps)
    # after the comparison, another writer adds an object carrying the app's tracking id:
    # only a fresh comparison knows it, and prunes it
    stray = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "stray", "namespace": "shop"},
        "data": {"a": "b"},
    }
    world.put(with_tracking(stray, compared.tracking, key_of(stray, "shop")))
    assert world.live("ConfigMap", "stray") is not None
    outcome = execute_sync(world.app(), world.deps, SyncParams(prune=True), compared=compared)
    assert outcome.succeeded, outcome.message
    assert world.live("ConfigMap", "stray") is None
    assert _weights(world.live("VirtualService", "reviews")) == [30, 70]


def test_an_explicit_revision_is_never_served_from_the_comparison(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    first = world.repo.commit({"mesh/vs.yaml": vs(60, 40)}, "base")
    assert execute_sync(world.app(), world.deps).succeeded
    world.repo.commit({"mesh/vs.yaml": vs(30, 70)}, "shift")
    compared = refresh_app(world.app(), world.deps)
    params = SyncParams(revisions=(first,))
    outcome = execute_sync(world.app(), world.deps, params, compared=compared)
    assert outcome.succeeded, outcome.message
    assert outcome.revision == first
    assert _weights(world.live("VirtualService", "reviews")) == [60, 40]
