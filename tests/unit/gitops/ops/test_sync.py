"""Sync of an Application from a real git repo into a real DirectoryStore."""

from __future__ import annotations

from pathlib import Path

from meshpilot.gitops.diff import TRACKING_ANNOTATION
from meshpilot.gitops.model import OperationPhase, SyncStatusCode
from meshpilot.gitops.refresh import refresh_app
from meshpilot.gitops.sync.execute import execute_sync
from meshpilot.gitops.sync.operation import SyncParams
from tests.unit.gitops.ops.env import make_world, vs


def test_sync_creates_tracked_objects_and_a_second_sync_changes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    before = refresh_app(world.app(), world.deps)
    assert before.sync_status is SyncStatusCode.OUT_OF_SYNC
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.SUCCEEDED, outcome.message
    assert outcome.message == "successfully synced (all tasks run)"
    vs_live = world.live("VirtualService", "reviews")
    assert vs_live is not None
    annotations = vs_live["metadata"]["annotations"]
    assert (
        annotations[TRACKING_ANNOTATION] == "shop:networking.istio.io/VirtualService:shop/reviews"
    )
    status = world.status()
    assert status["sync"]["status"] == "Synced"
    assert status["sync"]["revision"] == world.repo.git("rev-parse", "HEAD")
    assert status["health"]["status"] == "Healthy"
    assert status["operationState"]["phase"] == "Succeeded"
    assert [h["id"] for h in status["history"]] == [0]
    version = world.store.journal.last_version()
    again = execute_sync(world.app(), world.deps)
    assert again.phase is OperationPhase.SUCCEEDED
    # only the Application's status was written
    assert world.live("VirtualService", "reviews") == vs_live
    assert world.store.journal.last_version() == version + 1
    assert [h["id"] for h in world.status()["history"]] == [0, 1]


def test_removed_object_is_out_of_sync_and_pruned_only_with_prune(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    execute_sync(world.app(), world.deps)
    world.repo.git("rm", "-q", "mesh/dr.yaml")
    world.repo.commit(message="drop dr")
    state = refresh_app(world.app(), world.deps)
    assert state.sync_status is SyncStatusCode.OUT_OF_SYNC
    assert state.comparison is not None
    assert [r.key.kind for r in state.comparison.resources if r.requires_pruning] == [
        "DestinationRule"
    ]
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.succeeded
    assert world.live("DestinationRule", "reviews") is not None
    assert world.status()["sync"]["status"] == "OutOfSync"
    outcome = execute_sync(world.app(), world.deps, SyncParams(prune=True))
    assert outcome.succeeded
    assert world.live("DestinationRule", "reviews") is None
    assert any(r["status"] == "Pruned" for r in outcome.resources)
    assert world.status()["sync"]["status"] == "Synced"


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    version = world.store.journal.last_version()
    outcome = execute_sync(world.app(), world.deps, SyncParams(dry_run=True))
    assert outcome.succeeded and outcome.dry_run
    assert world.store.journal.last_version() == version
    assert world.live("VirtualService", "reviews") is None


def test_weight_change_reaches_the_store(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    execute_sync(world.app(), world.deps)
    world.repo.commit({"mesh/vs.yaml": vs(20, 80)}, "shift")
    assert refresh_app(world.app(), world.deps).sync_status is SyncStatusCode.OUT_OF_SYNC
    assert execute_sync(world.app(), world.deps).succeeded
    live = world.live("VirtualService", "reviews")
    assert live is not None
    assert [r["weight"] for r in live["spec"]["http"][0]["route"]] == [20, 80]


def test_create_namespace_and_prune_last(tmp_path: Path) -> None:
    from tests.unit.gitops.ops.env import app_yaml

    world = make_world(tmp_path)
    app = app_yaml(
        repo=str(world.repo.path),
        sync_policy={"syncOptions": ["CreateNamespace=true", "PruneLast=true"]},
    )
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.succeeded, outcome.message
    assert world.live("Namespace", "shop", namespace="") is not None
    world.repo.git("rm", "-q", "mesh/dr.yaml")
    world.repo.commit({"mesh/vs.yaml": vs(0, 100)}, "drop dr")
    outcome = execute_sync(world.app(), world.deps, SyncParams(prune=True))
    assert outcome.succeeded, outcome.message
    assert [r["status"] for r in outcome.resources][-1] == "Pruned"  # PruneLast: after the rest
    assert world.live("DestinationRule", "reviews") is None
