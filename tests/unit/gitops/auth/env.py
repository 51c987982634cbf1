"""A real `GitopsServer` on 127.0.0.1 in a background event loop (stopped on exit), over a
real DirectoryStore, and a plain urllib client: the API as a remote caller sees it."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.server import GitopsServer, WebhookSecrets
from tests.unit.gitops.controller.env import World


@dataclass
class Served:
    base: str
    server: GitopsServer

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, Any]:
        """(status, JSON answer) of one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, data, sent, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=20) as reply:
                return reply.status, _decoded(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decoded(exc.read())

    def login(self, username: str, password: str) -> str:
        status, answer = self.call(
            "POST", "/api/v1/session", {"username": username, "password": password}
        )
        assert status == 200, answer
        return str(answer["token"])

    def login_after_reset(self, username: str, password: str) -> str:
        """A login once the failed-login window has passed (reset instead of waiting)."""
        self.server.auth.throttle.succeeded(username)
        return self.login(username, password)

    def admin_token(self) -> str:
        path = self.server.auth.ensure_admin_password() or str(
            self.server.auth.state.initial_password_file
        )
        with open(path, encoding="utf-8") as handle:
            return self.login("admin", handle.read().strip())


def _decoded(payload: bytes) -> Any:
    try:
        return json.loads(payload or b"null")
    except ValueError:
        return payload.decode()


def put(world: World, *objects: dict[str, Any]) -> None:
    """Write through the server's own store handle (no controller loop needed to see it)."""
    world.store.apply([RawDocument("<test>", 1, o, {}) for o in objects])


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "argocd"}, "data": data}  # fmt: skip


@contextmanager
def serving(
    world: World, secrets: WebhookSecrets | None = None, run_controller: bool = False
) -> Iterator[Served]:
    server = GitopsServer(world.controller, secrets)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        box["port"] = await server.start("127.0.0.1", 0)
        if run_controller:
            box["task"] = asyncio.create_task(world.controller.run())
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(main()), loop.run_forever()))
    thread.start()
    assert ready.wait(20), "the server did not start"
    try:
        yield Served(f"http://127.0.0.1:{box['port']}", server)
    finally:

        async def stop() -> None:
            await server.stop()
            if "task" in box:
                world.controller.stop()
                await box["task"]

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
