"""YAML building blocks for gateway tests, and the gateway's config built from them."""

from __future__ import annotations

from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.gateway import generate_gateway_listeners, generate_gateway_routes
from meshpilot.xds.generate.secrets import generate_secrets
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import Filters
from meshpilot.xds.references import rds_names, sds_names
from tests.conftest import proxy_for, push_from_text

GATEWAY_POD = "ingress-7d9f-abcde.istio-system"

# The ingress gateway workload: Service ports 80->8080, 443->8443, 9000->9000 (TCP).
INGRESS = """
apiVersion: v1
kind: Service
metadata: {name: ingress, namespace: istio-system}
spec:
  clusterIP: 10.96.0.50
  selector: {istio: ingressgateway}
  ports:
  - {name: http2, port: 80, targetPort: 8080}
  - {name: https, port: 443, targetPort: 8443}
  - {name: tcp, port: 9000, targetPort: 9000}
---
apiVersion: v1
kind: Pod
metadata:
  name: ingress-7d9f-abcde
  namespace: istio-system
  labels: {istio: ingressgateway, app: ingress}
spec:
  serviceAccountName: ingress-sa
  containers: [{name: istio-proxy}]
status: {phase: Running, podIP: 10.1.0.5}
"""

# Two backends in namespace `shop`: web (HTTP 8000) and db (TCP 5432, with a v1 subset rule).
BACKENDS = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.1.1
  selector: {app: web}
  ports: [{name: http, port: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: 10.96.1.2
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
"""


def gateway(
    name: str, namespace: str, servers: str, selector: str = "istio: ingressgateway"
) -> str:
    return f"""
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  selector: {{{selector}}}
  servers:
{servers}
"""


def virtual_service(name: str, namespace: str, body: str) -> str:
    return f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: {namespace}}}
spec:
{body}
"""


def join(*docs: str) -> str:
    return "\n---\n".join(d.strip("\n") for d in docs)


def load(*docs: str, pod: str = GATEWAY_POD) -> tuple[PushContext, Proxy]:
    loaded, push = push_from_text(join(INGRESS, BACKENDS, *docs))
    assert not loaded.errors, [str(d) for d in loaded.errors]
    return push, proxy_for(push, pod, ProxyType.ROUTER)


def gateway_config(*docs: str, pod: str = GATEWAY_POD) -> ProxyConfig:
    """Listeners, the routes and secrets they name, as Envoy would subscribe to them."""
    push, proxy = load(*docs, pod=pod)
    listeners = generate_gateway_listeners(push, proxy, None)
    routes = generate_gateway_routes(push, proxy, rds_names(listeners))
    secrets = generate_secrets(push, proxy, sds_names(listeners, []))
    return ProxyConfig(listeners=listeners, routes=routes, secrets=secrets)


def listener(config: ProxyConfig, name: str) -> listener_pb2.Listener:
    found = [lis for lis in config.listeners if lis.name == name]
    assert found, f"no listener {name}; have {[lis.name for lis in config.listeners]}"
    return found[0]


def route_config(config: ProxyConfig, name: str) -> route_pb2.RouteConfiguration:
    found = [r for r in config.routes if r.name == name]
    assert found, f"no route config {name}; have {[r.name for r in config.routes]}"
    return found[0]


def hcm(chain: listener_components_pb2.FilterChain) -> hcm_pb2.HttpConnectionManager:
    (f,) = [f for f in chain.filters if f.name == Filters.HCM]
    out = hcm_pb2.HttpConnectionManager()
    f.typed_config.Unpack(out)
    return out


def tcp_proxy(chain: listener_components_pb2.FilterChain) -> tcp_proxy_pb2.TcpProxy:
    (f,) = [f for f in chain.filters if f.name == Filters.TCP_PROXY]
    out = tcp_proxy_pb2.TcpProxy()
    f.typed_config.Unpack(out)
    return out


def tls_context(chain: listener_components_pb2.FilterChain) -> tls_pb2.DownstreamTlsContext:
    assert chain.transport_socket.name == Filters.TLS_TRANSPORT
    out = tls_pb2.DownstreamTlsContext()
    chain.transport_socket.typed_config.Unpack(out)
    return out


def chain_for_sni(lis: listener_pb2.Listener, sni: str) -> listener_components_pb2.FilterChain:
    """The chain Envoy would pick for a TLS client sending `sni` (exact, then wildcard, then
    a chain without SNI match)."""
    chains = list(lis.filter_chains)
    exact = [c for c in chains if sni in c.filter_chain_match.server_names]
    wild = [
        c
        for c in chains
        for n in c.filter_chain_match.server_names
        if n.startswith("*.") and sni.endswith(n[1:])
    ]
    default = [c for c in chains if not c.filter_chain_match.server_names]
    for group in (exact, wild, default):
        if group:
            return group[0]
    raise AssertionError(f"no chain of {lis.name} serves SNI {sni}")
