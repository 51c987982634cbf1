"""The real Envoy accepts every kind of gateway configuration we emit."""

from __future__ import annotations

import pytest

from meshpilot.envoy.validate import validate_config as validate_gateway
from meshpilot.model.proxy import ProxyType
from meshpilot.xds.generate.gateway import generate_gateway_listeners, generate_gateway_routes
from meshpilot.xds.generate.secrets import generate_secrets
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.references import rds_names, sds_names
from tests.conftest import REPO, proxy_for, push_from_paths
from tests.unit.gateway.meshes import gateway, gateway_config, virtual_service

pytestmark = pytest.mark.envoy

EVERY_MODE = """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["a.example.com", "shop/b.example.com"]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https-simple, protocol: HTTPS}
    hosts: ["a.example.com", "*.a.example.com"]
    tls:
      mode: SIMPLE
      credentialName: a-cert
      minProtocolVersion: TLSV1_2
      maxProtocolVersion: TLSV1_3
      cipherSuites: [ECDHE-RSA-AES128-GCM-SHA256, bogus]
  - port: {number: 443, name: https-mutual, protocol: HTTPS}
    hosts: ["m.example.com"]
    tls: {mode: MUTUAL, credentialName: m-cert, subjectAltNames: [client.example.com]}
  - port: {number: 443, name: https-optional, protocol: HTTPS}
    hosts: ["o.example.com"]
    tls: {mode: OPTIONAL_MUTUAL, credentialName: o-cert}
  - port: {number: 443, name: https-istio, protocol: HTTPS}
    hosts: ["i.example.com"]
    tls: {mode: ISTIO_MUTUAL}
  - port: {number: 443, name: https-files, protocol: HTTPS}
    hosts: ["f.example.com"]
    tls:
      mode: MUTUAL
      serverCertificate: /etc/certs/tls.crt
      privateKey: /etc/certs/tls.key
      caCertificates: /etc/certs/ca.crt
  - port: {number: 443, name: tls-passthrough, protocol: TLS}
    hosts: ["p.example.com"]
    tls: {mode: PASSTHROUGH}
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
  - port: {number: 9443, name: tls-terminated, protocol: TLS}
    hosts: ["db.example.com"]
    tls: {mode: ISTIO_MUTUAL}
  - port: {number: 15443, name: auto, protocol: TLS}
    hosts: ["*.svc.cluster.local"]
    tls: {mode: AUTO_PASSTHROUGH}
"""

ROUTES = """
  hosts: ["a.example.com", "x.a.example.com", "m.example.com", "o.example.com",
          "i.example.com", "f.example.com", "p.example.com", "db.example.com"]
  gateways: ["gw"]
  http:
  - match: [{uri: {prefix: /api}}]
    route: [{destination: {host: web, port: {number: 8000}}}]
  - route: [{destination: {host: web}}]
  tls:
  - match: [{sniHosts: ["p.example.com"]}]
    route: [{destination: {host: db}, weight: 50}, {destination: {host: web}, weight: 50}]
  tcp:
  - route: [{destination: {host: db}}]
"""


def test_every_server_kind_together() -> None:
    config = gateway_config(
        gateway("gw", "shop", EVERY_MODE), virtual_service("all", "shop", ROUTES)
    )
    names = {lis.name for lis in config.listeners}
    assert names == {
        "0.0.0.0_8080",
        "0.0.0.0_8443",
        "0.0.0.0_9000",
        "0.0.0.0_9443",
        "0.0.0.0_15443",
    }
    validate_gateway(config)


def test_blackhole_and_collapsed_hosts() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
  - port: {number: 8081, name: http-empty, protocol: HTTP}
    hosts: ["nothing.example.com"]
""",
        ),
        virtual_service(
            "many",
            "shop",
            """
  hosts: ["a.example.com", "b.example.com", "*.c.example.com"]
  gateways: ["gw"]
  http: [{route: [{destination: {host: web}}]}]
""",
        ),
    )
    validate_gateway(config)


@pytest.mark.parametrize(
    "pod", ["istio-ingressgateway-5d8f7b9c4-x2x7p", "istio-egressgateway-7c4f5d8b6-m3n4p"]
)
def test_bookinfo_gateways(pod: str) -> None:
    _, push = push_from_paths([REPO / "examples" / "bookinfo"])
    proxy = proxy_for(push, f"{pod}.istio-system", ProxyType.ROUTER)
    listeners = generate_gateway_listeners(push, proxy, None)
    routes = generate_gateway_routes(push, proxy, rds_names(listeners))
    secrets = generate_secrets(push, proxy, sds_names(listeners, []))
    assert listeners and routes
    validate_gateway(ProxyConfig(listeners=listeners, routes=routes, secrets=secrets))
