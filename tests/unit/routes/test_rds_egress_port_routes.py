"""Route configs of Sidecar egress entries with a port (Istio's GetEgressListenerForRDS):
`<port>` is built from the first entry with that port, else from the catch-all entry, each
with its own hosts only; the name stays `<port>` whatever the entry's bind."""

from __future__ import annotations

import pytest
from rds_helpers import as_dict, pod, proxy_of, push_of, sidecar_routes

from meshpilot.xds.generate import generate_proxy_config

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client", labels="{app: client}")


def service(name: str, namespace: str, ip: str, ports: str) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  clusterIP: {ip}
  selector: {{app: {name}}}
  ports: {ports}
"""


SERVICES = "\n---\n".join(
    [
        service("ratings", "default", "10.96.1.1", "[{name: http, port: 9080}]"),
        service("details", "default", "10.96.1.2", "[{name: http, port: 9080}]"),
        service(
            "metrics", "ops", "10.96.1.3", "[{name: http, port: 9090}, {name: http-a, port: 8081}]"
        ),
        service("admin", "default", "10.96.1.4", "[{name: http, port: 8081}]"),
    ]
)


def sidecar(*entries: str) -> str:
    body = "\n".join(entries)
    return f"""
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: client, namespace: default}}
spec:
  workloadSelector: {{labels: {{app: client}}}}
  egress:
{body}
"""


PORT_9080 = """  - port: {number: 9080, protocol: HTTP, name: http}
    bind: 127.0.0.20
    hosts: ["./ratings.default.svc.cluster.local"]"""
PORT_9090 = """  - port: {number: 9090, protocol: HTTP, name: http-metrics}
    hosts: ["ops/metrics.ops.svc.cluster.local"]"""
CATCH_ALL = """  - hosts: ["./*"]"""


def vhost_names(config: dict[str, object]) -> list[str]:
    vhosts = config["virtual_hosts"]
    assert isinstance(vhosts, list)
    return [v["name"] for v in vhosts]


def test_port_entry_route_carries_its_own_hosts_only():
    push = push_of(SERVICES, sidecar(PORT_9080, PORT_9090, CATCH_ALL), CLIENT)
    configs = sidecar_routes(push, names=["9080", "9090", "8081"])
    assert vhost_names(configs["9080"]) == ["ratings.default.svc.cluster.local:9080", "allow_any"]
    assert vhost_names(configs["9090"]) == ["metrics.ops.svc.cluster.local:9090", "allow_any"]
    # 8081 comes from the catch-all (./*): ops' metrics, imported for 9090 only, stays out.
    assert vhost_names(configs["8081"]) == ["admin.default.svc.cluster.local:8081", "allow_any"]


def test_bound_port_entry_keeps_the_route_name_port():
    push = push_of(SERVICES, sidecar(PORT_9080, CATCH_ALL), CLIENT)
    out = generate_proxy_config(push, proxy_of(push, "client"))
    names = {
        as_dict(lis)["name"]: str(as_dict(lis)).count("'route_config_name': '9080'")
        for lis in out.listeners
    }
    assert names["127.0.0.20_9080"] == 1
    assert "9080" in {r.name for r in out.routes}
    assert not any(":" in r.name for r in out.routes)


def test_virtual_service_outside_the_entry_hosts_does_not_apply():
    vs = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - timeout: 4s
    route: [{destination: {host: ratings}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: only-details, namespace: default}
spec:
  hosts: [details]
  http:
  - timeout: 9s
    route: [{destination: {host: details}}]
"""
    push = push_of(SERVICES, vs, sidecar(PORT_9080, CATCH_ALL), CLIENT)
    config = sidecar_routes(push, names=["9080"])["9080"]
    assert vhost_names(config) == ["ratings.default.svc.cluster.local:9080", "allow_any"]
    assert "9s" not in str(config)
    assert "4s" in str(config)


def test_no_catch_all_and_no_entry_for_the_port_routes_nothing():
    push = push_of(SERVICES, sidecar(PORT_9080), CLIENT)
    config = sidecar_routes(push, names=["8081"])["8081"]
    assert vhost_names(config) == ["allow_any"]


def test_without_sidecar_every_visible_service_shares_the_port():
    push = push_of(SERVICES, CLIENT)
    config = sidecar_routes(push, names=["9080"])["9080"]
    assert vhost_names(config) == [
        "details.default.svc.cluster.local:9080",
        "ratings.default.svc.cluster.local:9080",
        "allow_any",
    ]
