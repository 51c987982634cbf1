"""A controller world for tests: a real git repo of mesh manifests, a real DirectoryStore,
the controller running in-process on an asyncio loop, and a second store handle that plays
`meshpilot apply` from another process (its writes reach the controller through the
store's journal, as a real out-of-band edit does)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.controller import (
    CachingRepoService,
    Controller,
    ControllerSettings,
    ReconcileResult,
)
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.notify import Notifier
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.store.directory import DirectoryStore
from tests.gitops_fixtures import GitRepo, make_repo

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: reviews
spec:
  ports:
  - {port: 9080, name: http}
"""


def vs(v1: int, v2: int) -> str:
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {{host: reviews}}
      weight: {v1}
    - destination: {{host: reviews.other.svc.cluster.local}}
      weight: {v2}
"""


def app_manifest(
    repo: str, name: str = "shop", policy: dict[str, Any] | None = None, path: str = "mesh"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "project": "default",
        "source": {"repoURL": repo, "path": path, "targetRevision": "main"},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
    }
    if policy is not None:
        spec["syncPolicy"] = policy
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": spec,
    }


AUTO_HEAL = {"automated": {"prune": True, "selfHeal": True}}


@dataclass
class World:
    tmp: Path
    repo: GitRepo
    store: DirectoryStore  # the controller's
    other: DirectoryStore  # another process's view of the same directory
    controller: Controller
    results: list[ReconcileResult] = field(default_factory=list)

    def put(self, *objects: dict[str, Any]) -> None:
        self.other.apply([RawDocument("<test>", 1, o, {}) for o in objects])

    def status(self, name: str = "shop") -> dict[str, Any]:
        self.other.refresh()
        manifest = self.other.manifest(ConfigKey(Kind.APPLICATION, "argocd", name))
        assert manifest is not None
        return dict(manifest.get("status") or {})

    def live(self, kind: str, name: str, namespace: str = "shop") -> dict[str, Any] | None:
        self.other.refresh()
        return self.other.manifest(ConfigKey(Kind(kind), namespace, name))

    async def until(
        self, check: Callable[[], bool], timeout: float = 10.0, what: str = "condition"
    ) -> float:
        """Poll `check` (cheaply) until true; returns the seconds it took."""
        start = time.monotonic()
        while not check():
            if time.monotonic() - start > timeout:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)
        return time.monotonic() - start


def make_world(
    tmp: Path,
    files: dict[str, str] | None = None,
    settings: ControllerSettings | None = None,
    notifier: Notifier | None = None,
) -> World:
    register_gitops_kinds()
    repo = make_repo(tmp / "repo", files or {"mesh/svc.yaml": SERVICE, "mesh/vs.yaml": vs(100, 0)})
    store = DirectoryStore(tmp / "store", poll_interval=0.02)
    other = DirectoryStore(tmp / "store")
    repos = CachingRepoService(tmp / "cache")
    renderer = Renderer(repos, RendererConfig(temp_dir=tmp))
    settings = settings or ControllerSettings(app_resync=1.0, self_heal_timeout=0.0)
    controller = Controller(store, renderer, settings, notifier=notifier)
    world = World(tmp, repo, store, other, controller)
    controller.on_result(world.results.append)
    return world


class Receiver:
    """A real local HTTP server that records every POST (Slack and GitHub stand-in)."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        received: list[tuple[str, dict[str, str], Any]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                received.append((self.path, dict(self.headers), body))
                self.send_response(201 if "/comments" in self.path else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, path_part: str) -> list[Any]:
        return [body for path, _, body in self.received if path_part in path]
