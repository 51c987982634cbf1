"""Shared helpers of the RDS tests: build a push from YAML, pick a proxy, look at routes,
and feed route configurations to the real Envoy (`--mode validate`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from google.protobuf import json_format, message

from meshpilot.config.loader import load_text
from meshpilot.envoy.validate import validate_config
from meshpilot.model.proxy import Proxy, ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate.routes import generate_sidecar_routes
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import boolean

__all__ = [
    "SERVICES",
    "as_dict",
    "pod",
    "proxy_of",
    "push_of",
    "route_config",
    "sidecar_routes",
    "validate_route_list",
    "validate_routes",
    "vhost",
]

SERVICES = """
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.12
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: default}
spec:
  clusterIP: 10.96.0.13
  selector: {app: ratings}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: details, namespace: other}
spec:
  clusterIP: 10.96.0.20
  selector: {app: details}
  ports: [{name: http, port: 9080}, {name: http-admin, port: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: mongodb, namespace: default}
spec:
  clusterIP: 10.96.0.14
  ports: [{name: tcp-mongo, port: 27017}]
"""


def pod(name: str, namespace: str = "default", labels: str = "{app: productpage}") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}
spec: {{containers: [{{name: app}}]}}
status: {{phase: Running, podIP: 10.10.0.9}}
"""


def push_of(*docs: str) -> PushContext:
    result = load_text("\n---\n".join(d.strip() for d in docs))
    assert not result.errors, [str(d) for d in result.errors]
    return build_push_context(result.objects, result.mesh)


def proxy_of(push: PushContext, name: str, namespace: str = "default") -> Proxy:
    obj = push.pod(namespace, name)
    assert obj is not None, f"no pod {namespace}/{name}"
    return proxy_from_pod(obj, ProxyType.SIDECAR)


def as_dict(msg: message.Message) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def sidecar_routes(
    push: PushContext,
    pod_name: str = "client",
    namespace: str = "default",
    names: Collection[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Route configs by name, as dicts; each also goes through Envoy."""
    configs = generate_sidecar_routes(push, proxy_of(push, pod_name, namespace), names)
    validate_routes(configs)
    return {c.name: as_dict(c) for c in configs}


def route_config(push: PushContext, port: int, pod_name: str = "client") -> dict[str, Any]:
    return sidecar_routes(push, pod_name, names=[str(port)])[str(port)]


def vhost(config: dict[str, Any], name: str) -> dict[str, Any]:
    found = [v for v in config["virtual_hosts"] if v["name"] == name]
    assert found, f"no vhost {name} in {[v['name'] for v in config['virtual_hosts']]}"
    return found[0]


def validate_routes(configs: Iterable[route_pb2.RouteConfiguration]) -> None:
    """Envoy must accept every route configuration (raises EnvoyError with its message)."""
    validate_config(ProxyConfig(routes=list(configs)))


def validate_route_list(routes: Iterable[rc.Route]) -> None:
    """Envoy must accept routes built outside a route config (as gateways build them)."""
    config = route_pb2.RouteConfiguration(
        name="check",
        virtual_hosts=[rc.VirtualHost(name="check", domains=["*"], routes=list(routes))],
        validate_clusters=boolean(False),
    )
    validate_routes([config])
