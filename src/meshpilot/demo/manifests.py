"""The demo mesh as Kubernetes and Istio objects, rendered once the pods have addresses.

Services select their pods by label; Pods carry their real addresses (`status.podIP`), so
endpoints are the namespaces' IPs on the bridge. The external server is in no Service: only
ServiceEntries name it (STATIC, at its address), as an API outside the cluster would be.
`ConfigDir` writes them one file per concern, atomically (the control plane polls the
files), the TLS Secret 0600.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from meshpilot.demo.certs import GatewayCertificate, write_private
from meshpilot.demo.routing import ratings_rules, reviews_rules
from meshpilot.demo.topology import (
    API_HOST,
    EGRESS_HOST,
    GATEWAY_NAMESPACE,
    INGRESS_HOST,
    NAMESPACE,
    Role,
    Topology,
    Workload,
)

__all__ = [
    "CREDENTIAL",
    "ConfigDir",
    "dump",
    "mesh_files",
    "pod_objects",
]

NETWORKING = "networking.istio.io/v1"
CREDENTIAL = "bookinfo-credential"
SECRET_FILE = "ingress-credential.yaml"
EGRESS_SUBSET = "external"  # the egress gateway's subset for egress.external.test


def dump(docs: Iterable[Mapping[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(dict(doc), sort_keys=False) for doc in docs)


def _obj(api: str, kind: str, name: str, namespace: str | None, **body: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def _namespaces() -> list[dict[str, Any]]:
    return [_obj("v1", "Namespace", ns, None) for ns in (NAMESPACE, GATEWAY_NAMESPACE)]


def _services(topology: Topology) -> list[dict[str, Any]]:
    out = []
    for svc in topology.services:
        ports = [{"name": n, "port": p, "targetPort": t} for n, p, t in svc.ports]
        spec = {"clusterIP": svc.cluster_ip, "selector": dict(svc.selector), "ports": ports}
        out.append(_obj("v1", "Service", svc.name, svc.namespace, spec=spec))
    return out


def pod_objects(pods: Iterable[tuple[Workload, str]]) -> list[dict[str, Any]]:
    """Pod objects for workloads at their addresses."""
    out = []
    for work, ip in pods:
        container: dict[str, Any] = {"name": work.app, "image": f"meshpilot-demo/{work.role}"}
        if work.role is Role.ROUTER:
            container["name"] = "istio-proxy"
        elif work.port:
            container["ports"] = [{"containerPort": work.port}]
        pod = _obj(
            "v1",
            "Pod",
            work.name,
            work.namespace,
            spec={"serviceAccountName": work.app, "containers": [container]},
            status={"phase": "Running", "podIP": ip},
        )
        pod["metadata"]["labels"] = work.labels
        out.append(pod)
    return out


def _ingress(topology: Topology) -> list[dict[str, Any]]:
    ports = topology.ports
    server = {
        "port": {"number": ports.ingress_service, "name": "https", "protocol": "HTTPS"},
        "hosts": [INGRESS_HOST],
        "tls": {"mode": "SIMPLE", "credentialName": CREDENTIAL},
    }
    gateway_spec = {"selector": {"istio": "ingressgateway"}, "servers": [server]}
    route = {"destination": {"host": "productpage", "port": {"number": ports.http}}}
    vs_spec = {
        "hosts": [INGRESS_HOST],
        "gateways": [f"{GATEWAY_NAMESPACE}/bookinfo-gateway"],
        "http": [{"route": [route]}],
    }
    return [
        _obj(NETWORKING, "Gateway", "bookinfo-gateway", GATEWAY_NAMESPACE, spec=gateway_spec),
        _obj(NETWORKING, "VirtualService", "bookinfo", NAMESPACE, spec=vs_spec),
    ]


def _service_entry(name: str, host: str, address: str, port: int) -> dict[str, Any]:
    spec = {
        "hosts": [host],
        "ports": [{"number": port, "name": "http", "protocol": "HTTP"}],
        "resolution": "STATIC",
        "location": "MESH_EXTERNAL",
        "endpoints": [{"address": address}],
    }
    return _obj(NETWORKING, "ServiceEntry", name, NAMESPACE, spec=spec)


def _egress(topology: Topology, external_ip: str) -> list[dict[str, Any]]:
    """api.external.test: registered, sidecars call it directly. egress.external.test:
    sidecars send it to the egress gateway over mTLS, which calls the external server, as
    in Istio's egress gateway example: the Gateway server is ISTIO_MUTUAL, and a
    DestinationRule gives the gateway's subset ISTIO_MUTUAL with the external host as SNI
    (the gateway's filter chain matches its server's hosts by SNI)."""
    port, egress_port = topology.ports.external, topology.ports.egress_service
    gateway = f"{GATEWAY_NAMESPACE}/egress-gateway"
    server = {
        "port": {"number": egress_port, "name": "https", "protocol": "HTTPS"},
        "hosts": [EGRESS_HOST],
        "tls": {"mode": "ISTIO_MUTUAL"},
    }
    egress_svc = f"istio-egressgateway.{GATEWAY_NAMESPACE}.svc.cluster.local"
    to_gateway = {"host": egress_svc, "subset": EGRESS_SUBSET, "port": {"number": egress_port}}
    vs_spec = {
        "hosts": [EGRESS_HOST],
        "gateways": ["mesh", gateway],
        "http": [
            {
                "match": [{"gateways": ["mesh"], "port": port}],
                "route": [{"destination": to_gateway}],
            },
            {
                "match": [{"gateways": [gateway], "port": egress_port}],
                "route": [{"destination": {"host": EGRESS_HOST, "port": {"number": port}}}],
            },
        ],
    }
    mtls = {"mode": "ISTIO_MUTUAL", "sni": EGRESS_HOST}
    subset_policy = {"portLevelSettings": [{"port": {"number": egress_port}, "tls": mtls}]}
    dr_spec = {
        "host": egress_svc,
        "subsets": [{"name": EGRESS_SUBSET, "trafficPolicy": subset_policy}],
    }
    return [
        _service_entry("api-external", API_HOST, external_ip, port),
        _service_entry("egress-external", EGRESS_HOST, external_ip, port),
        _obj(
            NETWORKING,
            "Gateway",
            "egress-gateway",
            GATEWAY_NAMESPACE,
            spec={"selector": {"istio": "egressgateway"}, "servers": [server]},
        ),
        _obj(NETWORKING, "DestinationRule", "egressgateway-for-external", NAMESPACE, spec=dr_spec),
        _obj(NETWORKING, "VirtualService", "egress-external", NAMESPACE, spec=vs_spec),
    ]


def _sidecars(topology: Topology) -> list[dict[str, Any]]:
    if not any(w.name == "client-locked" for w in topology.workloads):
        return []
    spec = {
        "workloadSelector": {"labels": {"app": "client-locked"}},
        # Istio's default when `egress` is left out; written out because meshpilot's
        # sidecar scope treats a missing egress as "no hosts" (reported, model/sidecar_scope.py).
        "egress": [{"hosts": ["*/*"]}],
        "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"},
    }
    return [_obj(NETWORKING, "Sidecar", "client-locked", NAMESPACE, spec=spec)]


def _secret(cert: GatewayCertificate) -> dict[str, Any]:
    return _obj(
        "v1", "Secret", CREDENTIAL, GATEWAY_NAMESPACE,
        type="kubernetes.io/tls", data=cert.secret_data(),
    )  # fmt: skip


def mesh_files(
    topology: Topology, pods: Iterable[tuple[Workload, str]], external_ip: str
) -> dict[str, str]:
    """File name → YAML text, everything but the Secret."""
    files = {
        "namespaces.yaml": dump(_namespaces()),
        "services.yaml": dump(_services(topology)),
        "pods.yaml": dump(pod_objects(pods)),
        "ingress.yaml": dump(_ingress(topology)),
        "egress.yaml": dump(_egress(topology, external_ip)),
        "reviews.yaml": dump(reviews_rules()),
        "ratings.yaml": dump(ratings_rules()),
        "sidecars.yaml": dump(_sidecars(topology)),
    }
    return {name: text for name, text in files.items() if text}


class ConfigDir:
    """The directory `meshpilot discovery -f` watches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(mode=0o700, exist_ok=True)

    def write(self, name: str, text: str) -> Path:
        """Replace a file atomically: the control plane never reads half of it."""
        target = self.path / name
        temporary = self.path / f".{name}.tmp"
        temporary.write_text(text)
        os.replace(temporary, target)
        return target

    def write_secret(self, cert: GatewayCertificate) -> Path:
        target = self.path / SECRET_FILE
        write_private(target, dump([_secret(cert)]))
        return target

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    def remove(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)
