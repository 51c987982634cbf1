"""The HTTP side: a signed push webhook refreshes (and auto-syncs) the matching app at once;
the JSON API (as the admin, logged in) and /metrics; `gitops serve` as a real subprocess that
stops on SIGTERM."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from meshpilot.gitops.controller import ControllerSettings
from meshpilot.gitops.notify import NotificationConfig, Notifier, SlackService
from meshpilot.gitops.server import GitopsServer, WebhookSecrets
from tests.unit.gitops.controller.env import Receiver, app_manifest, make_world, vs

SECRET = "webhook-shared-secret"


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get(url: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def _login(base: str, password_file: str) -> str:
    """The admin's session token (the password generated on the server's first start)."""
    password = Path(password_file).read_text().strip()
    body = json.dumps({"username": "admin", "password": password}).encode()
    status, answer = _post(base + "/api/v1/session", body, {})
    assert status == 200, answer
    return str(answer["token"])


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _push(repo: str, sha: str) -> bytes:
    return json.dumps(
        {
            "ref": "refs/heads/main",
            "after": sha,
            "repository": {"clone_url": repo, "default_branch": "main"},
            "head_commit": {"message": "Merge pull request #7 from acme/weights"},
        }
    ).encode()


def _signed(body: bytes) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "push", "X-Hub-Signature-256": f"sha256={digest}"}


def test_signed_webhook_refreshes_and_syncs_the_app_at_once(tmp_path: Path) -> None:
    receiver = Receiver()
    notifier = Notifier(NotificationConfig(slack=SlackService(receiver.url + "/hook")))
    world = make_world(tmp_path, settings=ControllerSettings(app_resync=60.0), notifier=notifier)
    server = GitopsServer(world.controller, WebhookSecrets(github=SECRET))
    policy = {"automated": {"prune": True}}

    async def scenario() -> None:
        notifier.start()
        task = asyncio.create_task(world.controller.run())
        port = await server.start("127.0.0.1", 0)
        base = f"http://127.0.0.1:{port}"
        try:
            world.put(app_manifest(str(world.repo.path), policy=policy))
            await world.until(lambda: world.status().get("sync", {}).get("status") == "Synced")
            sha = world.repo.commit({"mesh/vs.yaml": vs(20, 80)}, "shift weights")
            body = _push(str(world.repo.path), sha)
            bad = await asyncio.to_thread(
                _post, base + "/api/webhook", body, {"X-GitHub-Event": "push"}
            )
            assert bad[0] == 401 and "HMAC" in bad[1]["message"]
            status, answer = await asyncio.to_thread(
                _post, base + "/api/webhook", body, _signed(body)
            )
            assert (status, answer) == (200, {"refreshed": ["argocd/shop"]})
            took = await world.until(
                lambda: (
                    world.status()["sync"].get("revision") == sha
                    and world.status()["sync"]["status"] == "Synced"
                ),
                what="webhook sync",
            )
            assert took < 5  # far sooner than the 60 s resync
            live = world.live("VirtualService", "reviews") or {}
            assert [r["weight"] for r in live["spec"]["http"][0]["route"]] == [20, 80]
            synced_twice = r'argocd_app_sync_total\{name="shop".*phase="Succeeded"\} 2'
            metrics = ""
            for _ in range(100):  # the reconcile's bookkeeping ends just after its write
                metrics = await asyncio.to_thread(_get, base + "/metrics")
                if re.search(synced_twice, metrics):
                    break
                await asyncio.sleep(0.02)
            assert re.search(synced_twice, metrics), metrics
            assert 'argocd_app_info{name="shop",namespace="argocd"' in metrics
            assert "argocd_app_reconcile_count" in metrics
            password_file = server.auth.ensure_admin_password()
            assert password_file is not None
            token = await asyncio.to_thread(_login, base, password_file)
            listed = json.loads(await asyncio.to_thread(_get, base + "/api/v1/applications", token))
            assert [i["metadata"]["name"] for i in listed["items"]] == ["shop"]
            await asyncio.sleep(0.3)  # let the notifier deliver
        finally:
            await server.stop()
            world.controller.stop()
            await task
            await notifier.stop()
            receiver.close()

    asyncio.run(scenario())
    texts = [b["text"] for b in receiver.bodies("/hook")]
    assert any("Sync succeeded: application shop" in t for t in texts), texts
    assert any("has started syncing" in t for t in texts), texts


def test_gitops_serve_subprocess_api_and_sigterm(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    store_dir = tmp_path / "store"
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(app_manifest(str(world.repo.path))))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cli = [str(Path(sys.executable).parent / "meshpilot")]
    subprocess.run([*cli, "apply", "-f", str(tmp_path / "app.yaml"), "--store", str(store_dir)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    proc = subprocess.Popen(
        [*cli, "gitops", "serve", "--store", str(store_dir), "--listen", "127.0.0.1:0",
         "--app-resync", "1s"],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"API (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        base = match.group(1)
        notice = proc.stderr.readline()  # the first start generates the admin's password
        found = re.search(r"initial password of 'admin' in (\S+) \(0600\)", notice)
        assert found, notice
        token = _login(base, found.group(1))
        app_url = base + "/api/v1/applications/argocd/shop"
        deadline = time.monotonic() + 10
        while (
            json.loads(_get(app_url, token)).get("status", {}).get("sync", {}).get("status")
            != "OutOfSync"
        ):
            assert time.monotonic() < deadline, "no comparison"
            time.sleep(0.05)
        assert _post(app_url + "/sync", b'{"prune": true}', {})[0] == 401  # no token
        status, outcome = _post(app_url + "/sync", b'{"prune": true}', _bearer(token))
        assert status == 200 and outcome["phase"] == "Succeeded", outcome
        app = json.loads(_get(app_url + "?refresh=normal", token))
        assert app["status"]["sync"]["status"] == "Synced"
        history = json.loads(_get(app_url + "/history", token))["history"]
        assert [h["id"] for h in history] == [0]
        assert history[0]["initiatedBy"]["username"] == "admin"
        diff = json.loads(_get(app_url + "/diff", token))
        assert diff["outOfSync"] is False
        code, err = _post(base + "/api/v1/applications/argocd/nope/sync", b"{}", _bearer(token))
        assert code == 404 and "not found" in err["message"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
