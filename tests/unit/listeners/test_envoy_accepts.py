"""Real Envoy 1.40 (`--mode validate`) accepts every listener we generate."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable

import pytest
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2

from meshpilot.config.kinds import Kind
from meshpilot.envoy.validate import validate_config
from meshpilot.errors import EnvoyError
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.xds.generate.listeners import generate_sidecar_listeners, inbound
from meshpilot.xds.generate.listeners.inbound_tls import MtlsMode, MtlsSettings
from meshpilot.xds.output import ProxyConfig
from tests.conftest import REPO, push_from_paths
from tests.unit.listeners.lds_helpers import build
from tests.unit.listeners.meshes import CLIENT, CLIENT_POD, join, pod, service

pytestmark = pytest.mark.envoy


def validate_listeners(listeners: Iterable[listener_pb2.Listener]) -> None:
    validate_config(ProxyConfig(listeners=list(listeners)))


MIXED = join(
    CLIENT_POD,
    service("web", "[{name: http, port: 8080}, {name: grpc, port: 9090}]", "10.96.0.1"),
    service("echo", "[{name: web, port: 7000}]", "10.96.0.7"),
    service("db", "[{name: tcp, port: 5432}, {name: mongo, port: 27017}]", "10.96.0.5"),
    service("kafka", "[{name: tcp, port: 9092}, {name: sniff, port: 9093}]", "None"),
    pod("kafka-0", "10.1.0.20", "app: kafka"),
    """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy, namespace: demo}
spec:
  hosts: [legacy.example.com]
  ports: [{number: 8080, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tls-ext, namespace: demo}
spec:
  hosts: [api.example.com, cdn.example.com]
  ports: [{number: 443, name: https, protocol: HTTPS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: nets, namespace: demo}
spec:
  hosts: [net-a.internal]
  addresses: [192.168.10.0/24]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: demo}
spec:
  hosts: [db]
  tcp:
  - match: [{destinationSubnets: [10.96.0.5/32], port: 5432}]
    route:
    - {destination: {host: db, port: {number: 5432}}, weight: 60}
    - {destination: {host: web, port: {number: 8080}}, weight: 40}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tls, namespace: demo}
spec:
  hosts: ["*.example.com"]
  tls:
  - match: [{sniHosts: ["*.example.com"]}]
    route: [{destination: {host: api.example.com}}]
""",
)


def test_bookinfo_listeners_are_accepted_for_every_pod() -> None:
    _, push = push_from_paths([REPO / "examples" / "bookinfo"])
    for pod_obj in push.of_kind(Kind.POD):
        proxy = proxy_from_pod(pod_obj, ProxyType.SIDECAR)
        for variant in (proxy, dataclasses.replace(proxy, intercept=False)):
            validate_listeners(generate_sidecar_listeners(push, variant, None))


@pytest.mark.parametrize("intercept", [True, False])
def test_mixed_mesh_is_accepted(intercept: bool) -> None:
    mesh = build(MIXED, CLIENT, intercept=intercept)
    assert len(mesh.listeners) > 5
    validate_listeners(mesh.listeners)


def _example_tls_context() -> tls_pb2.DownstreamTlsContext:
    docs = list(yaml.safe_load_all((REPO / "examples/bookinfo/tls.yaml").read_text()))
    secret = next(d for d in docs if d["metadata"]["name"] == "bookinfo-credential")
    cert = base64.b64decode(secret["data"]["tls.crt"])
    key = base64.b64decode(secret["data"]["tls.key"])
    return tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            tls_certificates=[
                common_pb2.TlsCertificate(
                    certificate_chain=base_pb2.DataSource(inline_bytes=cert),
                    private_key=base_pb2.DataSource(inline_bytes=key),
                )
            ],
            alpn_protocols=["h2", "http/1.1"],
        )
    )


@pytest.mark.parametrize("mode", [MtlsMode.PERMISSIVE, MtlsMode.STRICT])
def test_inbound_with_tls_variants_is_accepted(
    monkeypatch: pytest.MonkeyPatch, mode: MtlsMode
) -> None:
    """The seam's TLS chains (same names, distinct matches) are valid Envoy config."""
    context = _example_tls_context()

    def settings(ctx: object, port: int) -> MtlsSettings:
        return MtlsSettings(port=port, mode=mode, http=context, tcp=context)

    monkeypatch.setattr(inbound, "mtls_for_port", settings)
    server = pod("app-6d5f7c9b8-qwert", "10.1.0.30", "app: app")
    app = service(
        "app",
        "[{name: http, port: 80, targetPort: 8080}, {name: tcp, port: 9000},"
        " {name: misc, port: 7000}]",
        "10.96.0.30",
    )
    mesh = build(join(server, app), "app-6d5f7c9b8-qwert.demo")
    vi = mesh.listener("virtualInbound")
    assert any(c.HasField("transport_socket") for c in vi.filter_chains)
    validate_listeners([vi])


def test_the_check_itself_rejects_duplicate_matches() -> None:
    """Guard against a vacuous validator: Envoy must refuse two identical matches."""
    bad = listener_pb2.Listener(name="bad", address=build(CLIENT_POD, CLIENT).listeners[0].address)
    chain = build(CLIENT_POD, CLIENT).listener("virtualOutbound").filter_chains[0]
    bad.filter_chains.extend([chain, chain])
    bad.filter_chains[1].name = "copy"
    bad.filter_chains.append(lc_pb2.FilterChain(filters=chain.filters))
    with pytest.raises(EnvoyError, match="rejected"):
        validate_listeners([bad])
