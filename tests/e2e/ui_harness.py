"""The web UI's test world: a real `meshpilot gitops serve` subprocess over a real git repo
and directory store (one Application `shop`, accounts admin and the read-only viewer), and
Debian's Chromium driven by Playwright (headless, a fresh profile, no network but loopback).
Each is stopped by its context manager."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.gitops_fixtures import GitRepo, make_repo
from tests.unit.gitops.controller.env import SERVICE, app_manifest, vs

from meshpilot.gitops.auth.passwords import hash_password

CLI = [str(Path(sys.executable).parent / "meshpilot")]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ADMIN_PASSWORD = "admin-password-1"
VIEWER_PASSWORD = "viewer-password-1"
SCREENSHOTS = Path(os.environ.get("MESHPILOT_UI_SCREENSHOTS", "/tmp/meshpilot-ui-screenshots"))


def accounts() -> list[dict[str, Any]]:
    """admin (role:admin) and viewer (role:readonly), with known passwords."""
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "argocd-cm", "namespace": "argocd"},
         "data": {"accounts.viewer": "login"}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "argocd-rbac-cm", "namespace": "argocd"},
         "data": {"policy.csv": "g, viewer, role:readonly\n"}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "argocd-secret", "namespace": "argocd"},
         "stringData": {"admin.password": hash_password(ADMIN_PASSWORD),
                        "accounts.viewer.password": hash_password(VIEWER_PASSWORD)}},
    ]  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=120)


@dataclass
class Served:
    url: str
    store: Path
    repo: GitRepo


@contextmanager
def gitops_serve(tmp: Path, extra: tuple[str, ...] = ()) -> Iterator[Served]:
    """`gitops serve` on 127.0.0.1 (a free port) with the app `shop` (a Service and a
    VirtualService from Git, not yet synced)."""
    repo = make_repo(tmp / "repo", {"mesh/svc.yaml": SERVICE, "mesh/vs.yaml": vs(100, 0)})
    store = tmp / "store"
    (tmp / "app.yaml").write_text(yaml.safe_dump_all([app_manifest(str(repo.path)), *accounts()]))
    done = cli("apply", "-f", str(tmp / "app.yaml"), "--store", str(store))
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(
        [*CLI, "gitops", "serve", "--store", str(store), "--listen", "127.0.0.1:0",
         "--app-resync", "60s", *extra],
        stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"API (http://127\.0\.0\.1:\d+)", line)
        assert found, line
        yield Served(found.group(1), store, repo)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def chromium(tmp: Path) -> Iterator[Any]:
    """A headless Chromium (Debian's), its profile in a fresh directory."""
    if not shutil.which(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (.ci/run installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    profile = tmp / "chromium-profile"
    with sync_playwright() as playwright:
        context_args = {"executable_path": CHROMIUM, "args": CHROMIUM_ARGS, "headless": True}
        browser = playwright.chromium.launch(**context_args, env={**ENV, "HOME": str(profile)})
        try:
            yield browser
        finally:
            browser.close()


def login(page: Any, url: str, username: str, password: str) -> None:
    page.goto(url + "/applications")
    assert page.url.startswith(url + "/login"), page.url  # no session: the login form
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(url + "/applications")


def shot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
