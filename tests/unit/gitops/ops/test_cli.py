"""The gitops verbs as a user runs them: diff, sync, history, rollback, get --refresh."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli
from tests.unit.gitops.ops.env import make_world, vs


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_diff_sync_history_rollback(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    store = ["--store", str(world.store.root)]
    code, out = _run("gitops", "diff", "shop", *store)
    assert code == 1 and "networking.istio.io/VirtualService shop/reviews" in out
    code, out = _run("gitops", "sync", "shop", "--dry-run", *store)
    assert code == 0 and "(dry run)" in out
    assert world.live("VirtualService", "reviews") is None
    code, out = _run("gitops", "sync", "shop", *store)
    assert code == 0, out
    assert "successfully synced (all tasks run)" in out
    first = world.repo.git("rev-parse", "HEAD")
    code, out = _run("gitops", "diff", "shop", *store)
    assert (code, out) == (0, "")

    second = world.repo.commit({"mesh/vs.yaml": vs(20, 80)}, "shift")
    code, _ = _run("gitops", "sync", "shop", *store)
    assert code == 0
    code, out = _run("gitops", "history", "shop", *store)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "DATE", "REVISION", "SOURCE"]
    assert f"main ({first[:7]})" in lines[1] and f"main ({second[:7]})" in lines[2]

    code, out = _run("gitops", "rollback", "shop", "0", *store)
    assert code == 0, out
    live = world.live("VirtualService", "reviews")
    assert live is not None
    assert [r["weight"] for r in live["spec"]["http"][0]["route"]] == [100, 0]
    code, out = _run("gitops", "get", "shop", "--refresh", "-o", "json", *store)
    assert code == 0
    app = json.loads(out)
    # as in Argo CD, after a rollback the app is OutOfSync with its targetRevision
    assert app["status"]["sync"]["status"] == "OutOfSync"
    assert app["status"]["sync"]["revision"] == second
    assert [h["revision"] for h in app["status"]["history"]] == [first, second, first]
    code, out = _run("gitops", "rollback", "shop", "7", *store)
    assert code == 1 and "does not have history id 7" in out


def test_sync_failure_exits_non_zero(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.repo.commit({"mesh/vs.yaml": "kind: [broken\n"}, "bad")
    code, out = _run("gitops", "sync", "shop", "--store", str(world.store.root))
    assert code == 1
    assert "Phase:              Failed" in out
    assert "mesh/vs.yaml:2: invalid YAML" in out


def test_selective_sync_and_revision(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    first = world.repo.git("rev-parse", "HEAD")
    world.repo.commit({"mesh/vs.yaml": vs(50, 50)}, "half")
    store = ["--store", str(world.store.root)]
    code, out = _run("gitops", "sync", "shop", "--resource", ":Service:reviews", *store)
    assert code == 0, out
    assert world.live("Service", "reviews") is not None
    assert world.live("VirtualService", "reviews") is None
    code, out = _run("gitops", "sync", "shop", "--revision", first, *store)
    assert code == 0, out
    live = world.live("VirtualService", "reviews")
    assert live is not None
    assert [r["weight"] for r in live["spec"]["http"][0]["route"]] == [100, 0]


def test_rbac_denies_sync(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    policy = tmp_path / "policy.csv"
    policy.write_text("p, role:viewer, applications, get, */*, allow\ng, dev, role:viewer\n")
    code, out = _run(
        "gitops", "sync", "shop", "--store", str(world.store.root),
        "--as", "alice", "--groups", "dev", "--rbac", str(policy),
    )  # fmt: skip
    assert code == 1 and "permission denied: applications, sync" in out
    assert world.live("Service", "reviews") is None
