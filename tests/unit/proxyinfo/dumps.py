"""Realistic config dumps for the summaries: the control plane's `config_dump` of golden
cases (what `meshpilot translate` prints, in Envoy's admin shape), and the same with what
Envoy's own admin adds (the agent's bootstrap: node, static clusters and listeners, their
inline route configurations), plus `/clusters?format=json` and certificate fixtures."""

from __future__ import annotations

import base64
import copy
import datetime
import functools
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from meshpilot.agent.bootstrap import build_bootstrap
from meshpilot.agent.bootstrap_file import bootstrap_dict
from meshpilot.agent.options import AgentOptions
from meshpilot.model.proxy import ProxyType
from meshpilot.proxyinfo import ConfigDump, ProxyData
from meshpilot.xds import debug
from tests.conftest import proxy_for, push_from_paths
from tests.unit.golden.cases import load_cases

SIDECAR = "bookinfo-productpage"  # productpage-v1-...default, a sidecar
INGRESS = "bookinfo-ingress-gateway"  # istio-ingressgateway-...istio-system, a router
ADMIN = "type.googleapis.com/envoy.admin.v3."


@functools.cache
def _control_plane_dump(case_name: str) -> dict[str, Any]:
    case = next(c for c in load_cases() if c.name == case_name)
    _, push = push_from_paths(list(case.inputs))
    return debug.config_dump(push, proxy_for(push, case.proxy, case.proxy_type))


def control_plane_dump(case_name: str) -> ConfigDump:
    """What `/debug/config_dump?proxyID=` answers for the proxy of that golden case."""
    return ConfigDump(copy.deepcopy(_control_plane_dump(case_name)))


def proxy_ref(case_name: str) -> str:
    return next(c for c in load_cases() if c.name == case_name).proxy


def envoy_dump(case_name: str) -> ConfigDump:
    """The control plane's dump as Envoy's admin shows it: the bootstrap first, and the
    agent's static clusters, listeners and inline route configurations."""
    raw = copy.deepcopy(_control_plane_dump(case_name))
    case = next(c for c in load_cases() if c.name == case_name)
    name, _, namespace = case.proxy.partition(".")
    options = AgentOptions(
        proxy_type=ProxyType(case.proxy_type), pod_name=name, namespace=namespace
    )
    boot = bootstrap_dict(build_bootstrap(options))
    static = boot["static_resources"]
    sections = {c["@type"].rsplit(".", 1)[-1]: c for c in raw["configs"]}
    sections["ClustersConfigDump"]["static_clusters"] = [{"cluster": c} for c in static["clusters"]]
    sections["ListenersConfigDump"]["static_listeners"] = [
        {"listener": lst} for lst in static["listeners"]
    ]
    inline = [
        f["typed_config"]["route_config"]
        for lst in static["listeners"]
        for chain in lst["filter_chains"]
        for f in chain["filters"]
    ]
    sections["RoutesConfigDump"]["static_route_configs"] = [{"route_config": r} for r in inline]
    bootstrap = {"@type": ADMIN + "BootstrapConfigDump", "bootstrap": boot}
    return ConfigDump({"configs": [bootstrap, *raw["configs"]]})


def host(address: str, port: int, status: str = "HEALTHY", outlier: bool = False) -> dict[str, Any]:
    health: dict[str, Any] = {"eds_health_status": status}
    if outlier:
        health["failed_outlier_check"] = True
    return {
        "address": {"socket_address": {"address": address, "port_value": port}},
        "health_status": health,
        "weight": 1,
    }


def cluster_statuses() -> list[dict[str, Any]]:
    """Envoy's /clusters?format=json `cluster_statuses`, as it writes them."""
    reviews = "outbound|9080||reviews.default.svc.cluster.local"
    details = "outbound|9080||details.default.svc.cluster.local"
    xds = {
        "address": {"pipe": {"path": "./etc/istio/proxy/XDS"}},
        "health_status": {"eds_health_status": "HEALTHY"},
    }
    unhealthy, outlier = (
        host("10.10.0.12", 9080, "UNHEALTHY"),
        host("10.10.0.14", 9080, outlier=True),
    )
    return [
        {"name": "xds-grpc", "host_statuses": [xds]},
        {"name": reviews, "host_statuses": [host("10.10.0.13", 9080), unhealthy, outlier]},
        {"name": details, "added_via_api": True, "host_statuses": [host("10.10.0.11", 9080)]},
        {"name": "BlackHoleCluster", "added_via_api": True},
    ]


def admin_data(case_name: str = SIDECAR) -> ProxyData:
    return ProxyData("Source: Envoy admin (test)", envoy_dump(case_name), cluster_statuses())


# ----------------------------------------------------------------------------- certificates

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)


def certificate(
    ca: bool, serial: int, not_before: datetime.datetime, not_after: datetime.datetime
) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM), self-signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cluster.local")])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    cert = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secrets_dump(
    entries: list[dict[str, Any]], warming: list[dict[str, Any]] | None = None
) -> ConfigDump:
    section: dict[str, Any] = {
        "@type": ADMIN + "SecretsConfigDump",
        "dynamic_active_secrets": entries,
    }
    if warming:
        section["dynamic_warming_secrets"] = warming
    return ConfigDump({"configs": [section]})
