"""A sync writes only what would change: objects stored exactly as rendered keep their
resourceVersion, the changed one is written, and every task is still reported."""

from __future__ import annotations

from pathlib import Path

from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import SyncParams
from tests.unit.gitops.ops.env import World, make_world, vs


def _versions(world: World) -> dict[str, str]:
    out = {}
    for kind in ("Service", "DestinationRule", "VirtualService"):
        live = world.live(kind, "reviews")
        assert live is not None
        out[kind] = live["metadata"]["resourceVersion"]
    return out


def test_only_the_changed_object_is_written(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert execute_sync(world.app(), world.deps).succeeded
    before = _versions(world)
    version = world.store.journal.last_version()
    world.repo.commit({"mesh/vs.yaml": vs(30, 70)}, "shift")
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.succeeded, outcome.message
    after = _versions(world)
    assert after["Service"] == before["Service"]
    assert after["DestinationRule"] == before["DestinationRule"]
    assert after["VirtualService"] != before["VirtualService"]
    # one write for the VirtualService, one for the Application's status
    assert world.store.journal.last_version() == version + 2
    rows = {r["kind"]: r for r in outcome.resources}
    assert {k: r["status"] for k, r in rows.items()} == {
        "Service": "Synced",
        "DestinationRule": "Synced",
        "VirtualService": "Synced",
    }
    assert world.status()["sync"]["status"] == "Synced"


def test_dry_run_still_checks_in_sync_objects(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert execute_sync(world.app(), world.deps).succeeded
    version = world.store.journal.last_version()
    outcome = execute_sync(world.app(), world.deps, SyncParams(dry_run=True))
    assert outcome.succeeded and outcome.dry_run
    assert len(outcome.resources) == 3
    assert world.store.journal.last_version() == version
