"""The gitops verbs with `--server URL` against a real `gitops serve` subprocess: the same
output and exit codes as the direct mode on the same store, `--as/--groups` enforced by the
server, and clear errors for an unknown app or an unreachable server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.unit.gitops.controller.env import app_manifest, make_world

CLI = [str(Path(sys.executable).parent / "meshpilot")]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _run(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(API URL, store directory) of a running `gitops serve` with one app `shop`."""
    world = make_world(tmp_path)
    store_dir = str(tmp_path / "store")
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(app_manifest(str(world.repo.path))))
    assert _run("apply", "-f", str(tmp_path / "app.yaml"), "--store", store_dir)[0] == 0
    proc = subprocess.Popen(
        [*CLI, "gitops", "serve", "--store", store_dir, "--listen", "127.0.0.1:0",
         "--app-resync", "60s"],
        stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        match = re.search(r"API (http://127\.0\.0\.1:\d+)", proc.stderr.readline())
        assert match
        yield match.group(1), store_dir
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _both(url: str, store: str, *args: str) -> tuple[int, str, str]:
    """Run a verb through the server and directly; they must agree. Returns the first."""
    remote = _run(*args, "--server", url)
    direct = _run(*args, "--store", store)
    assert remote == direct, (args, remote, direct)
    return remote


def test_verbs_through_the_server_match_the_direct_mode(served: tuple[str, str]) -> None:
    url, store = served
    deadline = time.monotonic() + 20
    while True:  # the controller's first comparison
        code, out, _ = _run("gitops", "get", "shop", "-o", "json", "--server", url)
        if code == 0 and json.loads(out)["status"].get("sync", {}).get("status") == "OutOfSync":
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.1)

    code, out, _ = _both(url, store, "gitops", "list")
    assert code == 0 and "argocd/shop" in out and "OutOfSync" in out
    assert _both(url, store, "gitops", "list", "-o", "name")[1] == "argocd/shop\n"
    code, out, _ = _both(url, store, "gitops", "get", "argocd/shop")
    assert code == 0 and "Sync Status:        OutOfSync" in out
    code, out, _ = _both(url, store, "gitops", "diff", "shop")
    assert code == 1 and "VirtualService" in out  # out of sync: exit 1, as argocd app diff
    code, out, _ = _both(url, store, "gitops", "sync", "shop", "--dry-run")
    assert code == 0 and "(dry run)" in out

    # RBAC: the server judges --as/--groups by the store's policy, as the CLI does locally
    code, _, err = _both(url, store, "gitops", "sync", "shop", "--as", "bob", "--groups", "dev")
    assert code == 1 and "permission denied: applications, get, default/shop, sub: bob" in err
    code, _, err = _both(url, store, "gitops", "get", "nope")
    assert code == 1 and 'applications.argoproj.io "nope" not found' in err

    code, out, _ = _run("gitops", "sync", "shop", "--prune", "--server", url)
    assert code == 0 and "Phase:              Succeeded" in out, out
    code, out, _ = _both(url, store, "gitops", "history", "shop")
    assert code == 0 and out.startswith("ID") and "\n0 " in out
    assert _both(url, store, "gitops", "diff", "shop")[0] == 0
    code, out, _ = _run("gitops", "rollback", "shop", "0", "--server", url)
    assert code == 0 and "Phase:              Succeeded" in out, out


def test_unreachable_server_is_one_clear_error(tmp_path: Path) -> None:
    code, out, err = _run("gitops", "list", "--server", "http://127.0.0.1:9")
    assert (code, out) == (1, "")
    assert err.startswith("Error: cannot reach the gitops server at http://127.0.0.1:9")
    assert "Traceback" not in err
