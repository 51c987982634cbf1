"""The web UI's pages with 1000 Applications (each with a recorded status of 3 resources):
the server's time to answer the list (page 1 of 20, a filtered page, the last page) and one
application's page, over loopback HTTP to a real in-process `GitopsServer`. Target: <= 300 ms.

    python bench/ui.py [--apps 1000] [--repeat 5]

Reports each page's median over --repeat requests (the client's wall time for the whole
answer, so an upper bound of the server time).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.auth.passwords import hash_password
from meshpilot.gitops.controller import CachingRepoService, Controller, ControllerSettings
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.server import GitopsServer
from meshpilot.store.directory import DirectoryStore

PASSWORD = "bench-password-1"
TARGET_S = 0.300


def application(i: int) -> dict[str, Any]:
    resources = [
        {"group": g, "version": "v1", "kind": k, "namespace": f"team-{i % 40}", "name": f"app-{i}",
         "status": "Synced" if i % 7 else "OutOfSync", "health": {"status": "Healthy"}}
        for g, k in (("", "Service"), ("networking.istio.io", "VirtualService"),
                     ("networking.istio.io", "DestinationRule"))
    ]  # fmt: skip
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": f"app-{i:04d}", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": f"https://git.example/team-{i % 40}.git",
                "path": "mesh",
                "targetRevision": "main",
            },
            "destination": {
                "server": "https://kubernetes.default.svc",
                "namespace": f"team-{i % 40}",
            },
        },
        "status": {
            "sync": {"status": "Synced" if i % 7 else "OutOfSync", "revision": "a" * 40},
            "health": {"status": "Healthy"},
            "resources": resources,
        },
    }


def accounts() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "argocd-secret", "namespace": "argocd"},
            "stringData": {"admin.password": hash_password(PASSWORD)}}  # fmt: skip


def get(port: int, path: str, cookie: str) -> tuple[float, int]:
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path, headers={"Cookie": cookie})
    reply = connection.getresponse()
    reply.read()
    connection.close()
    return time.perf_counter() - start, reply.status


def login(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = urlencode({"username": "admin", "password": PASSWORD})
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    connection.request("POST", "/login", body, headers)
    reply = connection.getresponse()
    reply.read()
    return (reply.getheader("Set-Cookie") or "").split(";")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    register_gitops_kinds()
    with tempfile.TemporaryDirectory(prefix="meshpilot-bench-ui-") as tmp:
        store = DirectoryStore(Path(tmp) / "store")
        docs = [application(i) for i in range(args.apps)] + [accounts()]
        store.apply([RawDocument("<bench>", 1, d, {}) for d in docs])
        renderer = Renderer(CachingRepoService(Path(tmp) / "cache"), RendererConfig())
        controller = Controller(store, renderer, ControllerSettings())  # not run: no git
        server = GitopsServer(controller)
        loop = asyncio.new_event_loop()
        port = loop.run_until_complete(server.start("127.0.0.1", 0))
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            cookie = login(port)
            pages = {
                "list, page 1": "/applications",
                "list, filtered": "/applications?sync=OutOfSync&namespace=team-3",
                "list, last page": f"/applications?page={args.apps // 50}",
                "one application": "/applications/argocd/app-0500",
            }
            print(f"{args.apps} applications, median of {args.repeat} requests each")
            for name, path in pages.items():
                runs = [get(port, path, cookie) for _ in range(args.repeat)]
                assert all(status == 200 for _, status in runs), (path, runs)
                median = statistics.median(s for s, _ in runs)
                verdict = "ok" if median <= TARGET_S else "MISSED"
                print(f"{name:16} {median * 1000:7.1f} ms  (target <= 300 ms: {verdict})")
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)


if __name__ == "__main__":
    main()
