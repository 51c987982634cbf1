"""The gitops verbs with `--server URL` against a real `gitops serve` subprocess: the same
output and exit codes as the direct mode on the same store, the logged-in account (`gitops
login`) enforced by the server as `--as` is locally, the CLI's login file (0600) and API
tokens, and clear errors for an unknown app, a missing login or an unreachable server."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
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


ACCOUNTS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "argocd-cm", "namespace": "argocd"},
    "data": {"accounts.bob": "login", "accounts.ci": "apiKey"},
}


def _run(*args: str, config: Path | None = None) -> tuple[int, str, str]:
    """The CLI; `config`: its login file (MESHPILOT_GITOPS_CONFIG), default none at all."""
    env = {**ENV, "MESHPILOT_GITOPS_CONFIG": str(config or "/nonexistent/gitops.yaml")}
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """(API URL, store directory, admin's login file) of a running `gitops serve` with one
    app `shop` and local accounts bob (login) and ci (apiKey)."""
    world = make_world(tmp_path)
    store_dir = str(tmp_path / "store")
    (tmp_path / "app.yaml").write_text(
        yaml.safe_dump_all([app_manifest(str(world.repo.path)), ACCOUNTS])
    )
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
        notice = proc.stderr.readline()
        found = re.search(r"initial password of 'admin' in (\S+) \(0600\)", notice)
        assert found, notice
        password = Path(found.group(1)).read_text().strip()
        config = tmp_path / "cli" / "gitops.yaml"
        code, out, err = _run("gitops", "login", "--server", match.group(1), "--username",
                              "admin", "--password", password, config=config)  # fmt: skip
        assert code == 0 and out.startswith("'admin' logged in successfully"), err
        yield match.group(1), store_dir, config
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _both(
    url: str, store: str, config: Path, *args: str, direct: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    """Run a verb through the server (as the login of `config`) and directly (with `direct`
    options, e.g. `--as`); they must agree. Returns the first."""
    remote = _run(*args, "--server", url, config=config)
    local = _run(*args, *direct, "--store", store)
    assert remote == local, (args, remote, local)
    return remote


def test_verbs_through_the_server_match_the_direct_mode(
    served: tuple[str, str, Path], tmp_path: Path
) -> None:
    url, store, admin = served
    deadline = time.monotonic() + 20
    while True:  # the controller's first comparison
        code, out, _ = _run("gitops", "get", "shop", "-o", "json", "--server", url, config=admin)
        if code == 0 and json.loads(out)["status"].get("sync", {}).get("status") == "OutOfSync":
            break
        assert time.monotonic() < deadline, out
        time.sleep(0.1)

    code, out, _ = _both(url, store, admin, "gitops", "list")
    assert code == 0 and "argocd/shop" in out and "OutOfSync" in out
    assert _both(url, store, admin, "gitops", "list", "-o", "name")[1] == "argocd/shop\n"
    code, out, _ = _both(url, store, admin, "gitops", "get", "argocd/shop")
    assert code == 0 and "Sync Status:        OutOfSync" in out
    code, out, _ = _both(url, store, admin, "gitops", "diff", "shop")
    assert code == 1 and "VirtualService" in out  # out of sync: exit 1, as argocd app diff
    code, out, _ = _both(url, store, admin, "gitops", "sync", "shop", "--dry-run")
    assert code == 0 and "(dry run)" in out

    # RBAC: the server judges the logged-in bob by the store's policy, as the CLI does
    # locally with --as bob
    bob = tmp_path / "bob.yaml"
    new = ("--new-password", "bob-password-1")
    code, _, err = _run("gitops", "account", "update-password", "--account", "bob",
                        "--current-password", _admin_password(store), *new,
                        "--server", url, config=admin)  # fmt: skip
    assert code == 0, err
    code, _, err = _run("gitops", "login", "--server", url, "--username", "bob",
                        "--password", "bob-password-1", config=bob)  # fmt: skip
    assert code == 0, err
    code, _, err = _both(url, store, bob, "gitops", "sync", "shop",
                         direct=("--as", "bob", "--groups", "dev"))  # fmt: skip
    assert code == 1 and "permission denied: applications, get, default/shop, sub: bob" in err
    code, _, err = _run("gitops", "sync", "shop", "--as", "admin", "--server", url, config=bob)
    assert code == 2 and "--as/--groups apply to the local store" in err  # no self-promotion
    code, _, err = _both(url, store, admin, "gitops", "get", "nope")
    assert code == 1 and 'applications.argoproj.io "nope" not found' in err

    code, out, _ = _run("gitops", "sync", "shop", "--prune", "--server", url, config=admin)
    assert code == 0 and "Phase:              Succeeded" in out, out
    code, out, _ = _both(url, store, admin, "gitops", "history", "shop")
    assert code == 0 and out.startswith("ID") and "\n0 " in out
    assert _both(url, store, admin, "gitops", "diff", "shop")[0] == 0
    code, out, _ = _run("gitops", "rollback", "shop", "0", "--server", url, config=admin)
    assert code == 0 and "Phase:              Succeeded" in out, out


def _admin_password(store: str) -> str:
    """The password `gitops serve` generated on its first start (0600, in its state dir)."""
    return (Path(store) / ".gitops" / "server" / "initial-admin-password").read_text().strip()


def test_login_file_tokens_and_logout(served: tuple[str, str, Path], tmp_path: Path) -> None:
    url, _, admin = served
    assert stat.S_IMODE(admin.stat().st_mode) == 0o600
    assert stat.S_IMODE(admin.parent.stat().st_mode) == 0o700
    saved = yaml.safe_load(admin.read_text())["servers"][url]
    assert saved["username"] == "admin" and saved["token"].count(".") == 2

    code, out, err = _run("gitops", "list", "--server", url)  # no login file
    assert (code, out) == (1, "")
    assert err.startswith("Error: no session information: log in (`meshpilot gitops login`)")
    code, _, err = _run(
        "gitops", "login", "--server", url, "--password", "wrong", config=tmp_path / "x.yaml"
    )
    assert (
        code == 1 and "invalid username or password" in err and not (tmp_path / "x.yaml").exists()
    )

    # an API token for automation: --auth-token, revocable by id
    code, token, err = _run("gitops", "account", "generate-token", "--account", "ci",
                            "--id", "ci-1", "--server", url, config=admin)  # fmt: skip
    assert code == 0 and token.count(".") == 2, err
    code, out, _ = _run(
        "gitops", "list", "-o", "name", "--server", url, "--auth-token", token.strip()
    )
    assert (code, out) == (0, "")  # ci is authenticated; RBAC grants it no app
    code, out, _ = _run(
        "gitops", "account", "get", "--account", "ci", "--server", url, config=admin
    )
    assert code == 0 and "\nci-1 " in out
    code, _, _ = _run("gitops", "account", "delete-token", "ci-1", "--account", "ci",
                      "--server", url, config=admin)  # fmt: skip
    assert code == 0
    code, _, err = _run("gitops", "list", "--server", url, "--auth-token", token.strip())
    assert code == 1 and "Error: invalid session: the token has been revoked" in err

    code, out, _ = _run("gitops", "logout", "--server", url, config=admin)
    assert code == 0 and out.startswith(f"logged out from {url}")
    assert url not in (yaml.safe_load(admin.read_text())["servers"] or {})
    code, _, err = _run("gitops", "list", "--server", url, "--auth-token", saved["token"])
    assert code == 1 and "logged out" in err  # the session itself ended on the server


def test_unreachable_server_is_one_clear_error(tmp_path: Path) -> None:
    code, out, err = _run("gitops", "list", "--server", "http://127.0.0.1:9")
    assert (code, out) == (1, "")
    assert err.startswith("Error: cannot reach the gitops server at http://127.0.0.1:9")
    assert "Traceback" not in err
