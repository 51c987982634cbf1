"""Two real Envoys speaking Istio mTLS with exactly what meshpilot generates.

The server Envoy serves the inbound filter chains of one port of the server sidecar's
`virtualInbound` (on a local port of its own, in front of a small HTTP app); the client
Envoy routes to the client sidecar's outbound cluster for that service (its endpoint
pointed at the server Envoy, with the endpoint metadata EDS would give). Workload
certificates come from a CA made per test with `cryptography`; they are given to Envoy as
static secrets named `default` and `ROOTCA`, the names the generated contexts use (the
agent would serve the same over `sds-grpc`, so only that source is replaced).
"""

from __future__ import annotations

import datetime
import http.server
import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from meshpilot.config.loader import load_text
from meshpilot.envoy.binary import envoy_binary
from meshpilot.model.push_context import build_push_context
from meshpilot.runtime.ports import free_port
from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import proxy_for

__all__ = ["Ca", "EnvoyPair"]

_EXT = "type.googleapis.com/envoy.extensions."


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class Ca:
    """A mesh root; `issue(spiffe)` gives a workload certificate and key in PEM."""

    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def __post_init__(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cluster.local")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def root_pem(self) -> str:
        return _pem(self.cert)

    def issue(self, spiffe: str) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(spiffe)]),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return _pem(leaf), key_pem


def _secrets(cert: tuple[str, str], root: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "default",
            "tls_certificate": {
                "certificate_chain": {"inline_string": cert[0]},
                "private_key": {"inline_string": cert[1]},
            },
        },
        {"name": "ROOTCA", "validation_context": {"trusted_ca": {"inline_string": root}}},
    ]


def _static_secrets(node: Any) -> Any:
    """Point every SDS secret config at the bootstrap's static secrets (drop `sds_config`)."""
    if isinstance(node, dict):
        if "sds_config" in node and node.get("name") in ("default", "ROOTCA"):
            node = {k: v for k, v in node.items() if k != "sds_config"}
        return {k: _static_secrets(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_static_secrets(v) for v in node]
    return node


class _App(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"xfcc": self.headers.get("x-forwarded-client-cert", "")}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _static_cluster(name: str, port: int) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": _address(port)}},
                    ]
                }
            ],
        },
    }


def _address(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


@dataclass
class EnvoyPair:
    """Build with the mesh YAML, the two pods and the service; `start()`, then `call()`."""

    mesh_yaml: str
    server_pod: str
    client_pod: str
    cluster: str  # the client's outbound cluster, e.g. outbound|80||api.shop.svc.cluster.local
    target_port: int  # the server's inbound port whose chains are served
    workdir: Path
    ca: Ca
    server_cert: tuple[str, str]
    client_cert: tuple[str, str]
    client_root: str = ""  # default: the CA's root
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.app_port, self.server_port, self.client_port = free_port(), free_port(), free_port()

    def _config(self, pod: str) -> dict[str, Any]:
        loaded = load_text(self.mesh_yaml, "mesh.yaml")
        assert not loaded.errors, [str(d) for d in loaded.errors]
        push = build_push_context(loaded.objects, loaded.mesh)
        return generate_proxy_config(push, proxy_for(push, pod)).to_dict()

    def _server_bootstrap(self) -> dict[str, Any]:
        inbound = next(
            lst
            for lst in self._config(self.server_pod)["listeners"]
            if lst["name"] == "virtualInbound"
        )
        chains = []
        for chain in inbound["filter_chains"]:
            match = chain.get("filter_chain_match", {})
            if match.get("destination_port") == self.target_port:
                match = {**match, "destination_port": self.server_port}
                chains.append({**chain, "filter_chain_match": match})
        assert chains, f"no inbound chains for port {self.target_port}"
        listener = {
            "name": "inbound",
            "address": _address(self.server_port),
            "listener_filters": [
                {
                    "name": "envoy.filters.listener.tls_inspector",
                    "typed_config": {
                        "@type": _EXT + "filters.listener.tls_inspector.v3.TlsInspector"
                    },
                },
                {
                    "name": "envoy.filters.listener.http_inspector",
                    "typed_config": {
                        "@type": _EXT + "filters.listener.http_inspector.v3.HttpInspector"
                    },
                },
            ],
            "filter_chains": chains,
        }
        cluster = _static_cluster(f"inbound|{self.target_port}||", self.app_port)
        return self._bootstrap("server", [listener], [cluster], self.server_cert, self.ca.root_pem)

    def _client_bootstrap(self) -> dict[str, Any]:
        clusters = {c["name"]: c for c in self._config(self.client_pod)["clusters"]}
        cluster = dict(clusters[self.cluster])
        cluster["type"] = "STATIC"
        cluster.pop("eds_cluster_config", None)
        endpoint: dict[str, Any] = {"endpoint": {"address": _address(self.server_port)}}
        # What EDS gives for this endpoint (its tlsMode picks the transport socket).
        assignment = next(
            a
            for a in self._config(self.client_pod)["endpoints"]
            if a["cluster_name"] == self.cluster
        )
        metadata = assignment["endpoints"][0]["lb_endpoints"][0].get("metadata")
        if metadata:
            endpoint["metadata"] = metadata
        cluster["load_assignment"] = {
            "cluster_name": self.cluster,
            "endpoints": [{"lb_endpoints": [endpoint]}],
        }
        hcm = {
            "@type": _EXT + "filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "client",
            "route_config": {
                "virtual_hosts": [
                    {
                        "name": "all",
                        "domains": ["*"],
                        "routes": [{"match": {"prefix": "/"}, "route": {"cluster": self.cluster}}],
                    }
                ]
            },
            "http_filters": [
                {
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": _EXT + "filters.http.router.v3.Router"},
                }
            ],
        }
        listener = {
            "name": "outbound",
            "address": _address(self.client_port),
            "filter_chains": [
                {
                    "filters": [
                        {
                            "name": "envoy.filters.network.http_connection_manager",
                            "typed_config": hcm,
                        }
                    ]
                }
            ],
        }
        root = self.client_root or self.ca.root_pem
        return self._bootstrap("client", [listener], [cluster], self.client_cert, root)

    def _bootstrap(
        self,
        name: str,
        listeners: list[dict[str, Any]],
        clusters: list[dict[str, Any]],
        cert: tuple[str, str],
        root: str,
    ) -> dict[str, Any]:
        return _static_secrets(
            {
                "node": {"id": name, "cluster": name},
                "admin": {"address": {"pipe": {"path": str(self.workdir / f"{name}-admin.sock")}}},
                "static_resources": {
                    "listeners": listeners,
                    "clusters": clusters,
                    "secrets": _secrets(cert, root),
                },
            }
        )

    def start(self) -> EnvoyPair:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.app_port), _App)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._app = server
        for name, boot in (
            ("server", self._server_bootstrap()),
            ("client", self._client_bootstrap()),
        ):
            path = self.workdir / f"{name}.json"
            path.write_text(json.dumps(boot))
            args = [str(envoy_binary()), "-c", str(path), "--disable-hot-restart"]
            args += ["--concurrency", "1", "-l", "warning", "--base-id", str(free_port())]
            args += ["--log-path", str(self.workdir / f"{name}.log")]
            self.procs.append(
                subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        for port in (self.server_port, self.client_port):
            self._wait_listening(port)
        return self

    def _wait_listening(self, port: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    logs = "\n".join(p.read_text() for p in self.workdir.glob("*.log"))
                    raise AssertionError(f"Envoy exited {proc.returncode}:\n{logs}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError(f"nothing listens on {port}")

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._app.shutdown()
        self._app.server_close()

    def call(self, direct: bool = False) -> tuple[int, dict[str, Any]]:
        """GET / through the client Envoy, or `direct`ly to the server Envoy in plaintext.
        (status, JSON body); status 0 when the connection was refused or reset."""
        port = self.server_port if direct else self.client_port
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, {}
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, {}

    def stats(self, name: str, prefix: str) -> dict[str, int]:
        """Counters of one Envoy whose names contain `prefix` (from its admin socket)."""
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(5)
        sock.connect(str(self.workdir / f"{name}-admin.sock"))
        with sock:
            request = f"GET /stats?filter={prefix} HTTP/1.1\r\nhost: admin\r\n"
            sock.sendall(f"{request}connection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        out = {}
        for line in data.decode().split("\r\n\r\n", 1)[1].splitlines():
            stat, _, value = line.partition(": ")
            if value.strip().isdigit():
                out[stat] = int(value)
        return out

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text()


def running(pair: EnvoyPair) -> Iterator[EnvoyPair]:
    pair.start()
    try:
        yield pair
    finally:
        pair.stop()
