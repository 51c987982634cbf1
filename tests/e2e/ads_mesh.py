"""A small mesh for traffic tests: Python HTTP backends on 127.0.0.x, its config files, and
a client sidecar Envoy (interceptionMode NONE) served by a `meshpilot discovery` process."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.e2e.ads_harness import (
    SHORT_TYPES,
    DiscoveryProcess,
    EnvoyProcess,
    http_get,
    istio_metadata,
    wait_for,
)

from meshpilot.runtime.ports import free_port

DiscoveryFactory = Callable[..., DiscoveryProcess]
EnvoyFactory = Callable[..., EnvoyProcess]

APP = """\
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  clusterIP: 10.96.100.1
  selector: {{app: web}}
  ports: [{{name: http, port: {port}, targetPort: {port}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: client, namespace: default, labels: {{app: client}}}}
status: {{podIP: 127.0.0.1}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web-v1, namespace: default, labels: {{app: web, version: v1}}}}
status: {{podIP: 127.0.0.2}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web-v2, namespace: default, labels: {{app: web, version: v2}}}}
status: {{podIP: 127.0.0.3}}
"""
NEW_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web-v2-b, namespace: default, labels: {app: web, version: v2}}
status: {podIP: 127.0.0.4}
"""
ROUTING = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: default}}
spec:
  host: web.default.svc.cluster.local
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: default}}
spec:
  hosts: [web.default.svc.cluster.local]
  http:
  - route:
    - destination: {{host: web.default.svc.cluster.local, subset: {subset}}}
"""


def write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Backend(ThreadingHTTPServer):
    daemon_threads = True


def _handler(body: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _backends() -> tuple[int, list[Backend]]:
    """A port free on 127.0.0.1 (the sidecar's listener) with the backends bound to it."""
    for _ in range(10):
        port, servers = free_port(), []
        try:
            for ip, name in (("127.0.0.2", b"v1"), ("127.0.0.3", b"v2"), ("127.0.0.4", b"v2-b")):
                servers.append(Backend((ip, port), _handler(name)))
            return port, servers
        except OSError:
            for server in servers:
                server.server_close()
    raise AssertionError("no port free on 127.0.0.1-4")


class Mesh:
    """Backends web-v1 (127.0.0.2), web-v2 (127.0.0.3) and web-v2-b (127.0.0.4) on one port,
    a control plane over the files, and a client sidecar (interceptionMode NONE) whose
    outbound listener is 127.0.0.1:<port>."""

    def __init__(self, tmp: Path, start_discovery: DiscoveryFactory, start_envoy: EnvoyFactory):
        self.port, self.backends = _backends()
        for server in self.backends:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        self.dir = tmp / "config"
        self.dir.mkdir()
        write(self.dir / "app.yaml", APP.format(port=self.port))
        write(self.dir / "routing.yaml", ROUTING.format(subset="v1"))
        self.tmp = tmp
        self.start_discovery = start_discovery
        self.start_envoy = start_envoy

    def start(self, delta: bool) -> None:
        self.discovery = self.start_discovery([self.dir])
        node = "sidecar~127.0.0.1~client.default~default.svc.cluster.local"
        metadata = istio_metadata("default", {"app": "client"}, interception="NONE")
        self.envoy = self.start_envoy(
            "client", node, metadata, discovery=self.discovery, delta=delta
        )
        self.envoy.wait_live()

    def call(self) -> tuple[int, str]:
        host = f"web.default.svc.cluster.local:{self.port}"
        return http_get(f"http://127.0.0.1:{self.port}/", {"Host": host}, timeout=2)

    def wait_answer(self, body: str, timeout: float = 10) -> float:
        started = time.monotonic()
        wait_for(lambda: self.call() == (200, body), f"routed to {body}", timeout)
        return time.monotonic() - started

    def pushes(self) -> dict[str, float]:
        """Responses sent so far, per xDS type (pilot_xds_pushes)."""
        return {t: self.discovery.pushes(t) for t in SHORT_TYPES}

    def config_pushes(self) -> float:
        """Pushes made for config changes (pilot_push_triggers counts one per push)."""
        return self.discovery.metrics().get('pilot_push_triggers{type="config"}', 0)

    def stop(self) -> None:
        for server in self.backends:
            server.shutdown()
            server.server_close()
