"""Bad commits, project refusals, sync windows and the one-operation lock: the sync fails
(or is refused) with a clear message and the store is left as it was."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import OperationPhase
from meshpilot.gitops.render import PluginCommand, PluginSpec
from meshpilot.gitops.sync.execute import execute_sync, lock_dir_of
from meshpilot.gitops.sync.operation import OperationInProgress, SyncParams, operation_lock
from meshpilot.gitops.windows import SyncWindowBlocked
from tests.gitops_fixtures import new_age_key, sops_encrypt
from tests.unit.gitops.ops.env import DR, SERVICE, World, app_yaml, make_world, vs

BAD_VS = vs(100, 0).replace("weight: 100", "weight: -5")


def _synced_world(tmp_path: Path, **renderer: Any) -> World:
    world = make_world(tmp_path, **renderer)
    assert execute_sync(world.app(), world.deps).succeeded
    return world


def _store_files(world: World) -> dict[str, str]:
    root = world.store.root
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*.yaml"))
        if "Application" not in p.parts
    }


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"mesh/vs.yaml": "kind: [unclosed\n"}, "mesh/vs.yaml:2: invalid YAML"),
        (
            {"mesh/vs.yaml": BAD_VS, "mesh/dr.yaml": DR.replace("v2", "v3")},
            ("mesh/vs.yaml:10: error: VirtualService shop/reviews: spec.http[0].route[0].weight"),
        ),
    ],
    ids=["invalid-yaml", "invalid-virtualservice"],
)
def test_bad_commit_fails_and_leaves_the_store_untouched(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    world = _synced_world(tmp_path)
    before = _store_files(world)
    world.repo.commit(files, "bad")
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.FAILED
    assert expected in outcome.message
    assert _store_files(world) == before
    status = world.status()
    assert status["operationState"]["phase"] == "Failed"
    assert expected in status["operationState"]["message"]
    assert len(status["history"]) == 1


def test_invalid_object_in_a_later_wave_writes_no_earlier_wave(tmp_path: Path) -> None:
    world = make_world(
        tmp_path,
        {"mesh/svc.yaml": SERVICE, "mesh/dr.yaml": DR, "mesh/vs.yaml": vs(100, 0, wave=5)},
    )
    world.repo.commit(
        {
            "mesh/vs.yaml": BAD_VS.replace(
                "metadata:\n",
                'metadata:\n  annotations:\n    argocd.argoproj.io/sync-wave: "5"\n',
                1,
            )
        },
        "bad",
    )
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.FAILED
    assert "VirtualService" in outcome.message and "weight" in outcome.message
    assert world.live("Service", "reviews") is None
    assert world.live("DestinationRule", "reviews") is None


def test_failing_plugin_fails_the_sync(tmp_path: Path) -> None:
    plugin = PluginSpec("broken", PluginCommand(("sh", "-c", "echo boom >&2; exit 3")))
    world = make_world(tmp_path, plugins={"broken": plugin})
    app = app_yaml(repo=str(world.repo.path))
    app["spec"]["source"]["plugin"] = {"name": "broken"}
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.FAILED
    assert "Failed to load target state" in outcome.message and "broken" in outcome.message
    assert world.live("Service", "reviews") is None


def test_wrong_sops_key_fails_without_leaking(tmp_path: Path) -> None:
    right, wrong = new_age_key(), new_age_key()
    from meshpilot.gitops.render.sops.age import parse_identities

    world = make_world(tmp_path, age_identities=parse_identities(wrong.identity, "test"))
    chart = "apiVersion: v2\nname: shop\nversion: 0.1.0\n"
    template = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Values.name }}\n"
        "spec:\n  ports:\n  - port: 80\n"
    )
    secret = sops_encrypt({"name": "top-secret-value"}, [right.recipient])
    world.repo.commit(
        {
            "namespaces/shop/Chart.yaml": chart,
            "namespaces/shop/templates/svc.yaml": template,
            "namespaces/shop/common-values-shop.secret.yaml": secret,
        }
    )
    app = app_yaml(repo=str(world.repo.path), path=".")
    app["spec"]["source"]["plugin"] = {"name": "meshpilot-layered"}
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.FAILED
    assert "common-values-shop.secret.yaml" in outcome.message
    assert "top-secret-value" not in str(world.status())


def test_project_errors_surface_on_sync(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.put(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "infra", "namespace": "argocd"},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [
                    {"server": "https://kubernetes.default.svc", "namespace": "infra"}
                ],
                "namespaceResourceWhitelist": [{"group": "networking.istio.io", "kind": "*"}],
            },
        },
    )
    app = app_yaml(repo=str(world.repo.path), project="infra")
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert outcome.phase is OperationPhase.FAILED
    assert (
        "application destination {https://kubernetes.default.svc shop} "
        "is not permitted in project 'infra'" in outcome.message
    )
    app["spec"]["destination"]["namespace"] = "infra"
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert "resource :Service is not permitted in project infra" in outcome.message
    assert world.live("DestinationRule", "reviews", "infra") is None
    app["spec"]["project"] = "nope"
    world.put(app)
    outcome = execute_sync(world.app(), world.deps)
    assert "Application referencing project nope which does not exist" in outcome.message


def _with_windows(world: World, windows: list[dict[str, Any]]) -> None:
    world.put(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "default", "namespace": "argocd"},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [{"server": "*", "namespace": "*"}],
                "syncWindows": windows,
            },
        }
    )


def test_deny_window_blocks_sync_and_manual_sync_flag_lets_manual_through(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    deny = {"kind": "deny", "schedule": "* * * * *", "duration": "1h", "applications": ["shop"]}
    _with_windows(world, [deny])
    with pytest.raises(SyncWindowBlocked, match="Blocked by sync window"):
        execute_sync(world.app(), world.deps)
    assert world.live("Service", "reviews") is None
    _with_windows(world, [{**deny, "manualSync": True}])
    with pytest.raises(SyncWindowBlocked):
        execute_sync(world.app(), world.deps, SyncParams(automated=True))
    assert execute_sync(world.app(), world.deps).succeeded


def test_inactive_allow_window_blocks_active_allow_permits(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    hour = (datetime.now(UTC).hour + 12) % 24
    allow = {
        "kind": "allow",
        "schedule": f"0 {hour} * * *",
        "duration": "1h",
        "namespaces": ["sh*"],
    }
    _with_windows(world, [allow])
    with pytest.raises(SyncWindowBlocked):
        execute_sync(world.app(), world.deps)
    _with_windows(world, [allow, {**allow, "schedule": "* * * * *"}])
    assert execute_sync(world.app(), world.deps).succeeded


def test_one_operation_at_a_time(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with operation_lock(lock_dir_of(world.deps), world.app()):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(OperationInProgress, match="another operation is already in progress"):
            execute_sync(world.app(), world.deps)
    finally:
        release.set()
        thread.join()
    assert execute_sync(world.app(), world.deps).succeeded


def test_retries_with_backoff_then_fails(tmp_path: Path) -> None:
    world = _synced_world(tmp_path)
    world.repo.commit({"mesh/vs.yaml": BAD_VS}, "bad")
    app = app_yaml(repo=str(world.repo.path))
    app["spec"]["syncPolicy"] = {
        "retry": {"limit": 3, "backoff": {"duration": "1s", "factor": 2, "maxDuration": "3s"}}
    }
    world.put(app)
    slept: list[float] = []
    outcome = execute_sync(world.app(), world.deps, sleep=slept.append)
    assert slept == [1.0, 2.0, 3.0]
    assert outcome.phase is OperationPhase.FAILED and outcome.retry_count == 3
    assert outcome.message.endswith("(retried 3 times).")


def test_rollback_refused_with_auto_sync(tmp_path: Path) -> None:
    from meshpilot.gitops.history import rollback

    world = _synced_world(tmp_path)
    app = app_yaml(repo=str(world.repo.path), sync_policy={"automated": {}})
    world.put(app)
    with pytest.raises(GitopsError, match="rollback cannot be initiated when auto-sync is enabled"):
        rollback(world.app(), 0, world.deps)
