"""A small external authorizer for CUSTOM AuthorizationPolicies: an HTTP server in a pod of
its own (namespace `external`, no sidecar), registered by a ServiceEntry, answering Envoy's
ext_authz checks: 403 for paths under /deny, 200 otherwise, with headers saying so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from meshpilot.demo.mesh import DemoMesh
from meshpilot.runtime.cluster import Cluster
from meshpilot.runtime.pod import PodSpec

__all__ = ["ExtAuthorizer"]

_SERVER = """\
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Check(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _check(self):
        allowed = "/deny" not in self.path
        print(self.command, self.path, self.headers.get("x-from-mesh", "-"), flush=True)
        self.send_response(200 if allowed else 403)
        self.send_header("x-ext-authz-check-result", "allowed" if allowed else "denied")
        if allowed:
            self.send_header("x-ext-authz-user", "alice")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _check

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Check).serve_forever()
"""


class ExtAuthorizer:
    PORT = 8000
    HOST = "authz.external.test"

    def __init__(self, mesh: DemoMesh, directory: Path) -> None:
        assert isinstance(mesh.cluster, Cluster)
        script = directory / "authorizer.py"
        script.write_text(_SERVER)
        argv = (sys.executable, str(script), str(self.PORT))
        self.pod = mesh.cluster.add_pod(PodSpec(name="authz", namespace="external", app=argv))
        self.pod.wait_listening(self.PORT, timeout=10)

    def service_entry(self) -> dict[str, Any]:
        spec = {
            "hosts": [self.HOST],
            "ports": [{"number": self.PORT, "name": "http", "protocol": "HTTP"}],
            "resolution": "STATIC",
            "location": "MESH_EXTERNAL",
            "endpoints": [{"address": str(self.pod.ip)}],
        }
        meta = {"name": "ext-authz", "namespace": "default"}
        return {
            "apiVersion": "networking.istio.io/v1",
            "kind": "ServiceEntry",
            "metadata": meta,
            "spec": spec,
        }

    def mesh_config(self, name: str) -> dict[str, Any]:
        provider = {
            "service": self.HOST,
            "port": self.PORT,
            "pathPrefix": "/check",
            "timeout": "5s",
            "includeAdditionalHeadersInCheck": {"x-from-mesh": "meshpilot"},
            "headersToUpstreamOnAllow": ["x-ext-authz-check-result", "x-ext-authz-user"],
            "headersToDownstreamOnDeny": ["x-ext-authz-check-result"],
        }
        spec = {"extensionProviders": [{"name": name, "envoyExtAuthzHttp": provider}]}
        return {"apiVersion": "meshpilot.io/v1alpha1", "kind": "MeshConfig", "spec": spec}

    def checks(self) -> list[str]:
        """One line per check: method, path as the authorizer got it, x-from-mesh."""
        log = (self.pod.workdir / "app.log").read_text(errors="replace")
        return [line for line in log.splitlines() if line.split(" ", 1)[0].isupper()]
