"""Reference chains of B6 built without meshpilot: the cost of the hops themselves.

Two Envoys with the smallest hand-written static config that makes the same trip as the
mesh path (client pod 127.0.0.1:80 -> server pod -> app), so the difference between these
rows and the mesh rows is what our resources add, and what is left is the box:
  plain:      client Envoy --HTTP/1.1--> server Envoy on PLAIN_PORT (not captured) -> app;
  plain-mtls: the same with mutual TLS between the two Envoys (our workload certificates
              and root, inline; no SAN check, no ALPN), on PLAIN_TLS_PORT.
Both Envoys route with one catch-all route, no stats tags, no metadata exchange, no
original_dst; the upstreams keep Envoy's default HTTP/1.1 connection pool.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from bench.mtls.netns import DIRECT_PORT, PodPair
from bench.mtls.proxies import SERVICE_PORT
from meshpilot.agent.certs.workload import WorkloadCert

PLAIN_PORT = 8082
PLAIN_TLS_PORT = 8084
_EXT = "type.googleapis.com/envoy.extensions."


def _hcm(prefix: str, cluster: str) -> dict[str, Any]:
    route = {"match": {"prefix": "/"}, "route": {"cluster": cluster}}
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": _EXT + "filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": prefix,
            "route_config": {
                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [route]}]
            },
            "http_filters": [
                {
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": _EXT + "filters.http.router.v3.Router"},
                }
            ],
        },
    }


def _tls_params(cert: WorkloadCert) -> dict[str, Any]:
    return {
        "tls_certificates": [
            {
                "certificate_chain": {"inline_bytes": _b64(cert.chain_pem)},
                "private_key": {"inline_bytes": _b64(cert.key.pem())},
            }
        ],
        "validation_context": {"trusted_ca": {"inline_bytes": _b64(cert.roots_pem)}},
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _cluster(name: str, ip: str, port: int, tls: WorkloadCert | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {"socket_address": {"address": ip, "port_value": port}}
                            }
                        }
                    ]
                }
            ],
        },
    }
    if tls is not None:
        out["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": _EXT + "transport_sockets.tls.v3.UpstreamTlsContext",
                "common_tls_context": _tls_params(tls),
            },
        }
    return out


def _listener(
    name: str, ip: str, port: int, hcm: dict[str, Any], tls: WorkloadCert | None
) -> dict[str, Any]:
    chain: dict[str, Any] = {"filters": [hcm]}
    if tls is not None:
        chain["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": _EXT + "transport_sockets.tls.v3.DownstreamTlsContext",
                "require_client_certificate": True,
                "common_tls_context": _tls_params(tls),
            },
        }
    return {
        "name": name,
        "address": {"socket_address": {"address": ip, "port_value": port}},
        "filter_chains": [chain],
    }


def plain_bootstraps(
    pods: PodPair, admin: dict[str, Path], certs: dict[str, WorkloadCert] | None
) -> dict[str, dict[str, Any]]:
    """{"client": ..., "server": ...} bootstraps; mutual TLS between them when `certs`."""
    port = PLAIN_TLS_PORT if certs else PLAIN_PORT
    client_tls = certs["client"] if certs else None
    server_tls = certs["server"] if certs else None
    client = {
        "node": {"id": "plain-client", "cluster": "plain"},
        "admin": {"address": {"pipe": {"path": str(admin["client"])}}},
        "static_resources": {
            "listeners": [_listener("out", "127.0.0.1", SERVICE_PORT, _hcm("out", "server"), None)],
            "clusters": [_cluster("server", pods.server.ip, port, client_tls)],
        },
    }
    server = {
        "node": {"id": "plain-server", "cluster": "plain"},
        "admin": {"address": {"pipe": {"path": str(admin["server"])}}},
        "static_resources": {
            "listeners": [_listener("in", "0.0.0.0", port, _hcm("in", "app"), server_tls)],
            "clusters": [_cluster("app", "127.0.0.1", DIRECT_PORT, None)],
        },
    }
    return {"client": client, "server": server}
