"""The registry: services, endpoints from Endpoints/EndpointSlices/Pods, ServiceEntries."""

from __future__ import annotations

from meshpilot.registry.model import Protocol, Resolution, protocol_from_name
from tests.conftest import push_from_text

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.0.0.1
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: web-port}
  - {name: tcp-admin, port: 9000}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7c9d8f6b5-x1y2z
  namespace: shop
  labels: {app: web, pod-template-hash: 7c9d8f6b5, security.istio.io/tlsMode: istio,
           topology.kubernetes.io/region: r1, topology.kubernetes.io/zone: z1}
spec:
  serviceAccountName: web-sa
  containers: [{name: web, ports: [{name: web-port, containerPort: 8080}]}]
status: {podIP: 10.1.0.5}
---
apiVersion: v1
kind: Pod
metadata: {name: web-down, namespace: shop, labels: {app: web}}
status:
  podIP: 10.1.0.6
  conditions: [{type: Ready, status: "False"}]
"""


def test_protocol_from_port_name_and_app_protocol() -> None:
    assert protocol_from_name("http") is Protocol.HTTP
    assert protocol_from_name("http2-api") is Protocol.HTTP2
    assert protocol_from_name("grpc-web-x") is Protocol.GRPC_WEB
    assert protocol_from_name("tcp-db") is Protocol.TCP
    assert protocol_from_name("web") is Protocol.AUTO
    assert protocol_from_name("httpx") is Protocol.AUTO
    assert protocol_from_name("web", "kubernetes.io/h2c") is Protocol.HTTP2


def test_endpoints_from_selected_pods_resolve_named_target_ports() -> None:
    _, push = push_from_text(SERVICE)
    [svc] = push.registry.services
    assert svc.hostname == "web.shop.svc.cluster.local" and svc.addresses == ("10.0.0.1",)
    http = push.registry.endpoints_of(svc, 80)
    # web-down's container declares no `web-port`, so its named target port cannot resolve.
    assert [(e.address, e.port, e.healthy) for e in http] == [("10.1.0.5", 8080, True)]
    ready = [e for e in http if e.healthy]
    assert [(e.address, e.port) for e in ready] == [("10.1.0.5", 8080)]
    assert ready[0].workload_name == "web" and ready[0].tls_mode == "istio"
    assert str(ready[0].locality) == "r1/z1"
    # Every workload behind the service counts, ready or not (SAN verification must not flap).
    assert svc.service_accounts == (
        "spiffe://cluster.local/ns/shop/sa/default",
        "spiffe://cluster.local/ns/shop/sa/web-sa",
    )
    assert [(e.address, e.port) for e in push.registry.endpoints_of(svc, 9000)] == [
        ("10.1.0.6", 9000),
        ("10.1.0.5", 9000),
    ]  # no locality sorts first


def test_explicit_endpoints_object_wins_over_selector() -> None:
    text = (
        SERVICE
        + """\
---
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: shop}
subsets:
- addresses: [{ip: 10.9.9.9}]
  ports: [{name: http, port: 8081}, {name: tcp-admin, port: 9001}]
"""
    )
    _, push = push_from_text(text)
    [svc] = push.registry.services
    assert [(e.address, e.port) for e in push.registry.endpoints_of(svc, 80)] == [
        ("10.9.9.9", 8081)
    ]


def test_endpoint_slices() -> None:
    text = (
        SERVICE
        + """\
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8082}]
endpoints:
- addresses: [10.1.0.5]
  conditions: {ready: true}
- addresses: [10.1.0.7]
  conditions: {ready: false}
"""
    )
    _, push = push_from_text(text)
    [svc] = push.registry.services
    eps = push.registry.endpoints_of(svc, 80)
    # Sorted by locality, then address: 10.1.0.7 has no pod, hence no locality.
    assert [(e.address, e.port, e.healthy) for e in eps] == [
        ("10.1.0.7", 8082, False),
        ("10.1.0.5", 8082, True),
    ]
    assert eps[1].service_account == "web-sa"  # the pod found by IP
    assert push.registry.endpoints_of(svc, 9000) == ()


def test_headless_service_is_passthrough() -> None:
    _, push = push_from_text(SERVICE.replace("clusterIP: 10.0.0.1", "clusterIP: None"))
    [svc] = push.registry.services
    assert svc.resolution is Resolution.PASSTHROUGH and svc.addresses == ()


def test_service_entry_hosts_and_workload_entries() -> None:
    text = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: apps}
spec:
  hosts: [a.vm, b.vm]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  location: MESH_INTERNAL
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: apps}
spec: {address: 172.16.0.9, labels: {app: vm}, ports: {http: 9090}, serviceAccount: vm}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: other, namespace: apps}
spec: {address: 172.16.0.10, labels: {app: other}}
"""
    _, push = push_from_text(text)
    assert [s.hostname for s in push.registry.services] == ["a.vm", "b.vm"]
    svc = push.registry.services[0]
    assert not svc.mesh_external and svc.resolution is Resolution.CLIENT_SIDE_LB
    [ep] = push.registry.endpoints_of(svc, 80)
    assert (ep.address, ep.port, ep.workload_name) == ("172.16.0.9", 9090, "vm-1")
    assert svc.service_accounts == ("spiffe://cluster.local/ns/apps/sa/vm",)


def test_sidecar_without_egress_keeps_the_default_egress() -> None:
    """Istio: no egress listeners means `*/*`; only the outbound policy changes here."""
    text = (
        SERVICE
        + """\
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"""
    )
    from meshpilot.model.proxy import ProxyType, proxy_from_pod

    _, push = push_from_text(text)
    pod = push.pod("shop", "web-down")
    assert pod is not None
    scope = push.sidecar_scope(proxy_from_pod(pod, ProxyType.SIDECAR))
    assert [s.hostname for s in scope.services] == ["web.shop.svc.cluster.local"]
    assert scope.outbound_policy == "REGISTRY_ONLY"
