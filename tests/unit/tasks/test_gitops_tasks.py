"""`gitops serve` keeps following the store past an object file it cannot read: the file
is reported and its last good version kept, /healthz stays ok, and later writes reach the
controller; a background task that fails makes /healthz 503 (naming it) until restarted."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from meshpilot.gitops.server import GitopsServer
from tests.conftest import REPO
from tests.unit.gitops.controller.env import app_manifest, make_world
from tests.unit.security.procs import MESHPILOT


def _get(url: str, token: str = "") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10
        ) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _journal_put(store: Path, kind: str, namespace: str, name: str) -> None:
    """What another writer of the store appends for an object it wrote (store/journal.py)."""
    journal = store / ".journal"
    version = int(journal.read_text().splitlines()[-1].split("\t")[0]) + 1
    with journal.open("a") as out:
        out.write(f"{version}\tput\t{kind}\t{namespace}\t{name}\n")


def _login(base: str, initial_password_line: str) -> str:
    """A session of `admin`, with the initial password `gitops serve` generated."""
    found = re.search(r"initial password of 'admin' in (\S+) \(0600\)", initial_password_line)
    assert found, initial_password_line
    body = {"username": "admin", "password": Path(found.group(1)).read_text().strip()}
    request = urllib.request.Request(
        base + "/api/v1/session", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(json.loads(resp.read())["token"])


def _apps(base: str, token: str) -> list[str]:
    listed: dict[str, Any] = json.loads(_get(base + "/api/v1/applications", token)[1])
    return [item["metadata"]["name"] for item in listed["items"]]


def test_gitops_serve_keeps_following_the_store_past_an_unreadable_file(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    store = tmp_path / "store"
    subprocess.run([MESHPILOT, "apply", "-f", str(REPO / "examples" / "bookinfo"),
                    "--store", str(store)], check=True, capture_output=True)  # fmt: skip
    proc = subprocess.Popen(
        [MESHPILOT, "gitops", "serve", "--store", str(store), "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"API (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        base = match.group(1)
        token = _login(base, proc.stderr.readline())
        assert _get(base + "/healthz") == (200, "ok\n")

        stored = store / "VirtualService" / "default" / "reviews.yaml"
        good = stored.read_bytes()
        stored.write_bytes(good.replace(b"reviews", b"r\xffviews", 1))  # not UTF-8
        _journal_put(store, "VirtualService", "default", "reviews")
        time.sleep(1.0)  # the watch reads it (inotify), reports it and goes on
        assert _get(base + "/healthz") == (200, "ok\n")
        stored.write_bytes(good)  # repaired; a later write must still be seen
        _journal_put(store, "VirtualService", "default", "reviews")

        (tmp_path / "app.yaml").write_text(yaml.safe_dump(app_manifest(str(world.repo.path))))
        subprocess.run([MESHPILOT, "apply", "-f", str(tmp_path / "app.yaml"),
                        "--store", str(store)], check=True, capture_output=True)  # fmt: skip
        deadline = time.monotonic() + 10
        while _apps(base, token) != ["shop"]:
            assert time.monotonic() < deadline, "the controller never saw the new Application"
            time.sleep(0.05)
        tasks = json.loads(_get(base + "/debug/tasks", token)[1])
        watch = next(t for t in tasks["tasks"] if t["name"] == "store-watch")
        assert tasks["ready"] and (watch["state"], watch["failures"]) == ("running", 0)
        assert 'meshpilot_task_failures_total{task="store-watch"} 0' in _get(base + "/metrics")[1]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (
        "VirtualService/default/reviews: invalid stored object, the last good version is kept: "
        f"{stored}:1: error: not UTF-8 text (invalid start byte)"
    ) in err


def test_a_failed_controller_task_makes_healthz_503_until_it_is_restarted(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path)
    controller = world.controller
    controller.tasks.backoff_initial = 0.5
    controller.tasks.healthy_after = 0.3
    store = world.store
    watches = 0
    real_watch = store.watch

    async def watch_fails_once() -> None:  # what any unexpected exception in it would do
        nonlocal watches
        watches += 1
        if watches == 1:
            raise RuntimeError("journal vanished")
        await real_watch()

    store.watch = watch_fails_once  # type: ignore[method-assign]
    server = GitopsServer(controller)

    async def scenario() -> None:
        task = asyncio.create_task(controller.run())
        port = await server.start("127.0.0.1", 0)
        base = f"http://127.0.0.1:{port}"
        try:
            await asyncio.sleep(0.2)
            assert await asyncio.to_thread(_get, base + "/healthz") == (
                503, "not ready\ntask store-watch restarting: RuntimeError: journal vanished\n"
            )  # fmt: skip
            metrics = (await asyncio.to_thread(_get, base + "/metrics"))[1]
            assert 'meshpilot_task_failures_total{task="store-watch"} 1\n' in metrics
            await asyncio.sleep(0.5 + 0.3 + 0.2)
            assert await asyncio.to_thread(_get, base + "/healthz") == (200, "ok\n")
            world.put(app_manifest(str(world.repo.path)))  # the restarted watch sees it
            await world.until(lambda: bool(controller.apps), what="the app seen")
        finally:
            await server.stop()
            controller.stop()
            await task

    asyncio.run(scenario())
    assert watches == 2
