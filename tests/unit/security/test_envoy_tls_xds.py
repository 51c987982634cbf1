"""Real Envoy fetching its configuration from the TLS port, verifying the control plane's
serving certificate against root-cert.pem and the name istiod.istio-system.svc, as an
istio-proxy's xds-grpc cluster does; with another root it gets nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import json_format

from meshpilot.envoy.binary import envoy_binary
from meshpilot.runtime.ports import free_port
from meshpilot.security.ca import CertificateAuthority
from tests.conftest import REPO
from tests.e2e.ads_harness import unix_get, wait_for
from tests.unit.security.procs import MESHPILOT, children, wait_port

pytestmark = pytest.mark.envoy

# Registers the types the bootstrap's Any fields name.
_ = (http_protocol_options_pb2.HttpProtocolOptions, tls_pb2.UpstreamTlsContext)
NODE = "sidecar~10.10.0.10~productpage-v1-6b746f74dc-9stvs.default~default.svc.cluster.local"
INBOUND = "inbound|9080||"  # productpage's own port: only our ADS can have sent it
_HTTP = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_TLS = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"


def _bootstrap(port: int, root: Path, admin: Path) -> dict[str, Any]:
    source = {"ads": {}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"}
    tls = {
        "@type": f"type.googleapis.com/{_TLS}",
        "sni": "istiod.istio-system.svc",
        "common_tls_context": {
            "alpn_protocols": ["h2"],
            "validation_context": {
                "trusted_ca": {"filename": str(root)},
                "match_typed_subject_alt_names": [
                    {"san_type": "DNS", "matcher": {"exact": "istiod.istio-system.svc"}}
                ],
            },
        },
    }
    address = {"socket_address": {"address": "127.0.0.1", "port_value": port}}
    return {
        "node": {"id": NODE, "cluster": "productpage", "metadata": {"NAMESPACE": "default"}},
        "admin": {"address": {"pipe": {"path": str(admin)}}},
        "dynamic_resources": {
            "lds_config": source,
            "cds_config": source,
            "ads_config": {
                "api_type": "GRPC",
                "set_node_on_first_message_only": True,
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
            },
        },
        "static_resources": {
            "clusters": [
                {
                    "name": "xds-grpc",
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "typed_extension_protocol_options": {
                        _HTTP: {
                            "@type": f"type.googleapis.com/{_HTTP}",
                            "explicit_http_config": {"http2_protocol_options": {}},
                        }
                    },
                    "transport_socket": {
                        "name": "envoy.transport_sockets.tls",
                        "typed_config": tls,
                    },
                    "load_assignment": {
                        "cluster_name": "xds-grpc",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
                    },
                }
            ]
        },
    }


def _envoy(work: Path, name: str, port: int, root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    admin = work / f"{name}-admin.sock"
    boot = json_format.ParseDict(_bootstrap(port, root, admin), bootstrap_pb2.Bootstrap())
    path = work / f"{name}.json"
    path.write_text(json_format.MessageToJson(boot))
    argv = [str(envoy_binary()), "-c", str(path), "--disable-hot-restart", "--concurrency", "1"]
    argv += ["-l", "warning", "--log-path", str(work / f"{name}.log")]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), admin


def _clusters(admin: Path) -> set[str]:
    status, body = unix_get(str(admin), "/config_dump?resource=dynamic_active_clusters")
    if status != 200:
        return set()
    return {c["cluster"]["name"] for c in json.loads(body).get("configs", [])}


def _stat(admin: Path, name: str) -> int:
    status, body = unix_get(str(admin), f"/stats?filter=^{name}$")
    if status != 200 or ": " not in body:
        return 0
    return int(body.split(": ", 1)[1])


def test_envoy_gets_config_over_tls_and_refuses_a_foreign_root(tmp_path: Path) -> None:
    """Through the front Envoy (discovery's default): the proxy's stream reaches the ADS
    server, which knows the proxy's own address, not the front's socket."""
    port, monitoring = free_port(), free_port()
    root = tmp_path / "root-cert.pem"
    argv = [
        MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
        "--xds-port", "0", "--monitoring-port", str(monitoring), "--secure-port", str(port),
        "--ca-dir", str(tmp_path / "ca"), "--root-cert-out", str(root),
    ]  # fmt: skip
    discovery = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    foreign = tmp_path / "foreign-root.pem"
    foreign.write_bytes(CertificateAuthority.open(tmp_path / "other").root_pem)
    envoys: list[subprocess.Popen[bytes]] = []
    try:
        wait_port(port, discovery)
        good, good_admin = _envoy(tmp_path, "good", port, root)
        bad, bad_admin = _envoy(tmp_path, "bad", port, foreign)
        envoys += [good, bad]
        wait_for(lambda: INBOUND in _clusters(good_admin), "clusters over TLS", timeout=30)
        wait_for(
            lambda: _stat(bad_admin, "cluster.xds-grpc.ssl.fail_verify_error") > 0,
            "the foreign-root Envoy refuses the serving certificate",
            timeout=30,
        )
        time.sleep(0.2)
        assert INBOUND not in _clusters(bad_admin)
        with urllib.request.urlopen(f"http://127.0.0.1:{monitoring}/debug/syncz") as answer:
            streams = json.load(answer)
        (peer,) = [s["peer"] for s in streams if s["proxy"].startswith("productpage")]
        assert peer.startswith("ipv4:127.0.0.1:"), peer
    finally:
        for proc in envoys:
            proc.terminate()
            proc.wait(10)
        discovery.terminate()
        discovery.wait(15)


def test_a_restarted_front_envoy_brings_the_proxy_back_and_pushes_reach_it(
    tmp_path: Path,
) -> None:
    """The front Envoy dies (SIGKILL): discovery restarts it, the proxy's stream comes back
    through the new one, and a config change made afterwards reaches the proxy."""
    config = tmp_path / "config"
    shutil.copytree(REPO / "examples" / "bookinfo", config)
    port = free_port()
    root = tmp_path / "root-cert.pem"
    argv = [
        MESHPILOT, "discovery", "-f", str(config), "--xds-port", "0",
        "--monitoring-port", "0", "--secure-port", str(port),
        "--ca-dir", str(tmp_path / "ca"), "--root-cert-out", str(root),
    ]  # fmt: skip
    discovery = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy: subprocess.Popen[bytes] | None = None
    try:
        wait_port(port, discovery)
        proxy, admin = _envoy(tmp_path, "proxy", port, root)
        wait_for(lambda: INBOUND in _clusters(admin), "clusters through the front", timeout=30)
        (front,) = children(discovery.pid)
        os.kill(front, signal.SIGKILL)
        wait_for(
            lambda: children(discovery.pid) not in ([], [front]),
            "discovery restarts its front Envoy",
            timeout=15,
        )
        (config / "extra.yaml").write_text(EXTRA_SERVICE_ENTRY)
        wait_for(
            lambda: "outbound|443||api.extra.example" in _clusters(admin),
            "a change after the restart reaches the proxy",
            timeout=30,
        )
        assert _stat(admin, "cluster.xds-grpc.upstream_cx_total") >= 2  # it reconnected
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        discovery.terminate()
        discovery.wait(15)
    assert discovery.returncode == 0


EXTRA_SERVICE_ENTRY = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: extra
  namespace: default
spec:
  hosts: [api.extra.example]
  ports:
  - {number: 443, name: tls, protocol: TLS}
  resolution: DNS
  location: MESH_EXTERNAL
"""
