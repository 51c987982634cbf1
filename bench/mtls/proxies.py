"""The B6 mesh, its workload certificates, and the bootstraps of every Envoy in it.

- `MESH_YAML`: Service `api` (port 80 -> targetPort 8080) on pod api-... (the server pod),
  a client pod web-..., both with `security.istio.io/tlsMode: istio`, and a mesh-wide STRICT
  PeerAuthentication, so a request that reaches the app went over mTLS.
- Certificates: our CA (`meshpilot.security.ca`, the directory `meshpilot discovery` also
  opens) signs each pod's CSR (`agent.certs.workload.build_csr`); the chain is checked by
  `accept_chain` and served by the agent's real SDS server (`agent.sds.SdsServer`) on the
  socket our bootstrap points `sds-grpc` at. Only the agent's trip to the CA is skipped.
- ADS bootstraps: `agent.bootstrap.build_bootstrap`, the file the agent writes, with the
  admin moved to a Unix socket (the bench reads stats from outside the namespace).
- Twin bootstraps: the same bootstrap without `dynamic_resources`, holding as static
  resources the resources our server sends that node (`generate_proxy_config`, turned into
  a file twin by bench/envoy_apply.static_twin: EDS folded into STATIC clusters, RDS
  inlined), and the SDS `default`/`ROOTCA` secrets as static secrets with the very bytes the
  SDS server sends (SDS references lose their `sds_config`, so Envoy takes the static ones).
- The upstream: an Envoy `direct_response` of 1 kB on APP_PORT and DIRECT_PORT.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from bench.envoy_apply import static_twin
from bench.mtls.netns import APP_PORT, DIRECT_PORT, PodPair
from meshpilot.agent.bootstrap import bootstrap_dict, build_bootstrap
from meshpilot.agent.certs.store import SecretStore
from meshpilot.agent.certs.workload import WorkloadCert, accept_chain, build_csr, new_key
from meshpilot.agent.options import SDS_SOCKET_PATH, AgentOptions, InterceptionMode
from meshpilot.agent.sds import SdsServer
from meshpilot.config.loader import load_text
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import build_push_context
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.identity import SpiffeId
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.names import SDS_DEFAULT, SDS_ROOTCA
from meshpilot.xds.node import parse_node, proxy_for

NAMESPACE, TRUST_DOMAIN = "shop", "cluster.local"
SERVER_POD, CLIENT_POD = "api-7d9f8c6b5-aaaaa", "web-5b6c7d8e9-bbbbb"
SERVICE_PORT = 80  # the client dials 127.0.0.1:80 (its interceptionMode NONE listener)
BODY = "x" * 1024
_EXT = "type.googleapis.com/envoy.extensions."


def mesh_yaml(pods: PodPair) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: {NAMESPACE}}}
spec:
  clusterIP: 10.96.7.1
  selector: {{app: api}}
  ports:
  - {{name: http, port: {SERVICE_PORT}, targetPort: {APP_PORT}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {SERVER_POD}
  namespace: {NAMESPACE}
  labels: {{app: api, version: v1, security.istio.io/tlsMode: istio}}
spec: {{serviceAccountName: api}}
status: {{podIP: {pods.server.ip}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {CLIENT_POD}
  namespace: {NAMESPACE}
  labels: {{app: web, version: v1, security.istio.io/tlsMode: istio}}
spec: {{serviceAccountName: web}}
status: {{podIP: {pods.client.ip}}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: istio-system}}
spec: {{mtls: {{mode: STRICT}}}}
"""


@dataclass(frozen=True)
class Sidecar:
    """One pod's proxy: what the agent would be told, and the directory Envoy runs in."""

    options: AgentOptions
    workdir: Path

    @property
    def admin_socket(self) -> Path:
        return self.workdir / "admin.sock"


def sidecars(pods: PodPair, root: Path, xds_socket: Path) -> dict[str, Sidecar]:
    """The server captures (REDIRECT: 15006 behind iptables); the client does not (NONE:
    its outbound listener binds 127.0.0.1:80, Istio's sidecar without capture)."""
    out = {}
    for role, pod, sa, app, ip, mode in (
        ("server", SERVER_POD, "api", "api", pods.server.ip, InterceptionMode.REDIRECT),
        ("client", CLIENT_POD, "web", "web", pods.client.ip, InterceptionMode.NONE),
    ):
        labels = {"app": app, "version": "v1", "security.istio.io/tlsMode": "istio"}
        options = AgentOptions(
            proxy_type=ProxyType.SIDECAR,
            pod_name=pod,
            namespace=NAMESPACE,
            ip_addresses=(ip,),
            labels=labels,
            service_account=sa,
            interception_mode=mode,
            discovery_address=f"unix:{xds_socket}",
            concurrency=1,
        )
        workdir = root / role
        workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        out[role] = Sidecar(options, workdir)
    return out


def workload_cert(ca: CertificateAuthority, options: AgentOptions) -> WorkloadCert:
    """What the agent would hold after its CSR: key made here, signed by our CA, checked."""
    key = new_key()
    identity = SpiffeId(TRUST_DOMAIN, options.namespace, options.service_account)
    issued = ca.sign(build_csr(key, identity.uri), identity)
    return accept_chain(list(issued.chain_pem), key, identity.uri, ca.root_pem, "bench CA")


class SdsThread:
    """The agent's SDS server for each sidecar, on an event loop in a thread of its own."""

    def __init__(self, certs: dict[Path, WorkloadCert]) -> None:
        self.certs = certs
        self.stores: dict[Path, SecretStore] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[SdsServer] = []

    def start(self) -> SdsThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        for workdir, cert in self.certs.items():
            store = SecretStore()
            store.update(cert)
            server = SdsServer(store, workdir / SDS_SOCKET_PATH)
            await server.start()
            self.stores[workdir] = store
            self._servers.append(server)

    def stop(self) -> None:
        async def stop_all() -> None:
            for server in self._servers:
                await server.stop()

        asyncio.run_coroutine_threadsafe(stop_all(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def ads_bootstrap(sidecar: Sidecar) -> dict[str, Any]:
    boot = bootstrap_dict(build_bootstrap(sidecar.options))
    boot["admin"]["address"] = {"pipe": {"path": str(sidecar.admin_socket)}}
    return boot


def twin_bootstrap(sidecar: Sidecar, mesh: str, store: SecretStore) -> dict[str, Any]:
    """The ADS bootstrap with our server's resources for this node as static resources."""
    boot = build_bootstrap(sidecar.options)
    loaded = load_text(mesh, "mesh.yaml")
    if loaded.errors:
        raise RuntimeError(f"bench mesh: {[str(d) for d in loaded.errors]}")
    push = build_push_context(loaded.objects, loaded.mesh)
    config = generate_proxy_config(push, proxy_for(push, parse_node(boot.node)))
    clusters, listeners = static_twin(config)
    boot.ClearField("dynamic_resources")
    boot.static_resources.clusters.extend(clusters)
    boot.static_resources.listeners.extend(listeners)
    for name in (SDS_DEFAULT, SDS_ROOTCA):
        served = store.secret(name)
        if served is None:
            raise RuntimeError(f"SDS has no secret {name}")
        boot.static_resources.secrets.append(served.secret)
    out: dict[str, Any] = _static_secrets(bootstrap_dict(boot))
    out["admin"]["address"] = {"pipe": {"path": str(sidecar.admin_socket)}}
    return out


def _static_secrets(node: Any) -> Any:
    """Every SDS secret config named `default`/`ROOTCA` without its `sds_config`: Envoy then
    uses the bootstrap's static secret of that name."""
    if isinstance(node, dict):
        if "sds_config" in node and node.get("name") in (SDS_DEFAULT, SDS_ROOTCA):
            node = {k: v for k, v in node.items() if k != "sds_config"}
        return {k: _static_secrets(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_static_secrets(v) for v in node]
    return node


def upstream_bootstrap(admin_socket: Path) -> dict[str, Any]:
    """The app: 200 with a 1 kB body on APP_PORT (behind the sidecar) and DIRECT_PORT."""

    def listener(port: int) -> dict[str, Any]:
        body = {"inline_string": BODY}
        route = {"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": body}}
        hcm = {
            "@type": _EXT + "filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": f"app_{port}",
            "route_config": {
                "virtual_hosts": [{"name": "app", "domains": ["*"], "routes": [route]}]
            },
            "http_filters": [
                {
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": _EXT + "filters.http.router.v3.Router"},
                }
            ],
        }
        return {
            "name": f"app_{port}",
            "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
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

    return {
        "node": {"id": "upstream", "cluster": "upstream"},
        "admin": {"address": {"pipe": {"path": str(admin_socket)}}},
        "static_resources": {"listeners": [listener(APP_PORT), listener(DIRECT_PORT)]},
    }


def write_bootstrap(path: Path, boot: dict[str, Any]) -> Path:
    """0600: the twin holds the workload's private key inline."""
    path.touch(mode=0o600)
    path.write_text(json.dumps(boot, indent=1))
    return path


def validate(boot: dict[str, Any]) -> None:
    """Parse as a Bootstrap (catches a typo before Envoy does)."""
    from envoy.config.bootstrap.v3 import bootstrap_pb2

    json_format.ParseDict(boot, bootstrap_pb2.Bootstrap())
