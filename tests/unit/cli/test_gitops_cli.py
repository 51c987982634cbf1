"""`meshpilot gitops` output a new user reads: aligned resource tables (core kinds have an
empty GROUP) and a preview that says why no application was affected and what to do."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli
from tests.gitops_fixtures import make_repo
from tests.unit.gitops.ops.env import DR, SERVICE, make_world, vs
from tests.unit.gitops.preview.mesh_fixtures import (
    WORKLOADS,
    application,
    branch,
    live_store,
    routing_repo,
)

CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: reviews-settings}
data: {color: blue}
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"MESHPILOT_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _cells(table: list[str]) -> list[list[str]]:
    """Each row cut at the columns where the header's words start: aligned rows cut into
    their own cells, a shifted row does not."""
    starts = [m.start() for m in re.finditer(r"\S+", table[0])]
    rows = []
    for line in table[1:]:
        ends = [*starts[1:], len(line)]
        rows.append([line[s:e].strip() for s, e in zip(starts, ends, strict=True)])
        assert all(line[s - 1] == " " for s in starts[1:] if s < len(line)), (line, table)
    return rows


def test_gitops_get_aligns_rows_whose_group_is_empty(tmp_path: Path) -> None:
    files = {"mesh/svc.yaml": SERVICE, "mesh/cm.yaml": CONFIG_MAP, "mesh/dr.yaml": DR,
             "mesh/vs.yaml": vs(100, 0)}  # fmt: skip
    world = make_world(tmp_path, files)
    store = ["--store", str(world.store.root)]
    code, out, _ = run("gitops", "sync", "shop", *store)
    assert code == 0, out
    synced = out[out.index("GROUP") :].splitlines()
    assert [row[:5] for row in _cells(synced)] == [
        ["", "ConfigMap", "shop", "reviews-settings", "Synced"],
        ["", "Service", "shop", "reviews", "Synced"],
        ["networking.istio.io", "DestinationRule", "shop", "reviews", "Synced"],
        ["networking.istio.io", "VirtualService", "shop", "reviews", "Synced"],
    ]
    code, out, _ = run("gitops", "get", "shop", *store)
    assert code == 0, out
    table = out[out.index("GROUP") :].splitlines()
    assert table[0].split() == ["GROUP", "KIND", "NAMESPACE", "NAME", "STATUS", "HEALTH"]
    assert _cells(table) == [
        ["", "ConfigMap", "shop", "reviews-settings", "Synced", "Healthy"],
        ["", "Service", "shop", "reviews", "Synced", "Healthy"],
        ["networking.istio.io", "DestinationRule", "shop", "reviews", "Synced", "Healthy"],
        ["networking.istio.io", "VirtualService", "shop", "reviews", "Synced", "Healthy"],
    ]


def test_preview_without_store_says_why_no_app_is_affected(tmp_path: Path) -> None:
    repo = routing_repo(tmp_path / "repo")
    branch(repo, "shift", {"apps/routing/virtual-service.yaml": "# moved\n"})
    args = ["gitops", "preview", "--repo", str(repo.path), "--base", "main", "--head", "shift",
            "--repo-cache", str(tmp_path / "cache")]  # fmt: skip
    code, out, _ = run(*args)
    assert code == 0
    assert "No application reads the 1 changed file(s). No store was given (`--store DIR`" in out
    assert "give `--store DIR` to look at the live store's Applications" in out
    assert "or `--app NAME` to preview an app" in out
    code, out, _ = run(*args, "-o", "text")
    assert "no application reads the changed files. No store was given" in out

    empty = live_store(tmp_path / "empty", WORKLOADS)
    code, out, _ = run(*args, "--store", str(empty.root), "-o", "text")
    assert "The store holds no Application" in out

    stored = live_store(tmp_path / "store", WORKLOADS, application(repo.path, path="elsewhere"))
    code, out, _ = run(*args, "--store", str(stored.root), "-o", "text")
    assert "None of the 1 Applications in the store, nor any defined in the repository" in out
    assert "use `--app NAME` to preview an app anyway" in out


def test_preview_with_a_missing_store_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    missing = tmp_path / "no-store"
    code, _, err = run("gitops", "preview", "--repo", str(repo.path), "--base", "main",
                       "--head", "main", "--store", str(missing))  # fmt: skip
    assert code == 1
    assert err == f"Error: no store at {missing}: nothing has been applied there yet\n"
    assert not missing.exists()
