"""A real `GitopsServer` (API + UI) in-process over a real git repo and directory store, and a
plain HTTP client that follows no redirect and keeps the session cookie by hand: the pages
as the wire shows them."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from meshpilot.gitops.auth.passwords import hash_password
from meshpilot.gitops.controller import CachingRepoService, Controller, ControllerSettings
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.store.directory import DirectoryStore
from tests.gitops_fixtures import make_repo
from tests.unit.gitops.controller.env import SERVICE, World, vs

ADMIN_PASSWORD = "admin-password-1"
VIEWER_PASSWORD = "viewer-password-1"


def accounts(extra_secret: dict[str, str] | None = None) -> list[dict[str, Any]]:
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
                        "accounts.viewer.password": hash_password(VIEWER_PASSWORD),
                        **(extra_secret or {})}},
    ]  # fmt: skip


def make_ui_world(tmp: Path, files: dict[str, str] | None = None, **renderer: Any) -> World:
    """tests.unit.gitops.controller.env's world, with renderer options (SOPS identities)."""
    register_gitops_kinds()
    repo = make_repo(tmp / "repo", files or {"mesh/svc.yaml": SERVICE, "mesh/vs.yaml": vs(100, 0)})
    store = DirectoryStore(tmp / "store", poll_interval=0.02)
    other = DirectoryStore(tmp / "store")
    renderer_config = RendererConfig(temp_dir=tmp, **renderer)
    renderer_ = Renderer(CachingRepoService(tmp / "cache"), renderer_config)
    settings = ControllerSettings(app_resync=1.0, self_heal_timeout=0.0)
    world = World(tmp, repo, store, other, Controller(store, renderer_, settings))
    world.put(*accounts())
    return world


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str


@dataclass
class Browser:
    """Requests to the server with (or without) the session cookie, redirects not followed."""

    base: str
    cookie: str = ""
    seen: list[str] = field(default_factory=list)  # every body received

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        read: int = -1,
    ) -> Reply:
        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
        sent = dict(headers or {})
        if self.cookie:
            sent["Cookie"] = self.cookie
        body = None
        if form is not None:
            body = urlencode(form, doseq=True)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body, sent)
            response = connection.getresponse()
            try:
                data = response.read() if read < 0 else response.read1(read)
            except TimeoutError:
                data = b""
            text = data.decode(errors="replace")
            self.seen.append(text)
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, text)
        finally:
            connection.close()

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    def login(self, username: str, password: str) -> Reply:
        reply = self.request("POST", "/login", {"username": username, "password": password})
        cookie = reply.headers.get("set-cookie", "")
        if reply.status == 303 and cookie:
            self.cookie = cookie.split(";")[0]
        return reply
