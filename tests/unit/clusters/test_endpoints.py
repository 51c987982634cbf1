"""Endpoints: locality groups, subset filtering, Istio's endpoint metadata, the shared cache."""

from __future__ import annotations

from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import message_to_dict
from tests.conftest import proxy_for, push_from_text

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: prod}
spec:
  clusterIP: 10.96.0.2
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: prod}
spec:
  host: web
  subsets: [{name: v2, labels: {version: v2}}]
"""


def pod(name: str, ip: str, version: str, zone: str, extra: str = "") -> str:
    return f"""\
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: prod
  labels: {{app: web, version: {version}, pod-template-hash: 7d9f8c6b5,
           security.istio.io/tlsMode: istio, topology.kubernetes.io/region: eu,
           topology.kubernetes.io/zone: {zone}}}
spec: {{serviceAccountName: web}}
status: {{podIP: {ip}{extra}}}
"""


TEXT = (
    MESH
    + pod("web-7d9f8c6b5-aaaaa", "10.0.0.1", "v1", "a")
    + pod("web-7d9f8c6b5-bbbbb", "10.0.0.2", "v2", "b")
    + pod("web-7d9f8c6b5-ccccc", "10.0.0.3", "v2", "b")
    + pod(
        "web-7d9f8c6b5-ddddd",
        "10.0.0.4",
        "v2",
        "b",
        ", conditions: [{type: Ready, status: 'False'}]",
    )
)


def assignments(text: str, proxy: str) -> dict[str, dict[str, object]]:
    _, push = push_from_text(text)
    config = generate_proxy_config(push, proxy_for(push, proxy))
    return {e.cluster_name: message_to_dict(e) for e in config.endpoints}


def test_grouped_by_locality_without_unready_pods() -> None:
    cla = assignments(TEXT, "web-7d9f8c6b5-aaaaa.prod")["outbound|80||web.prod.svc.cluster.local"]
    groups = cla["endpoints"]
    assert [g["locality"] for g in groups] == [
        {"region": "eu", "zone": "a"},
        {"region": "eu", "zone": "b"},
    ]
    addresses = [
        [e["endpoint"]["address"]["socket_address"]["address"] for e in g["lb_endpoints"]]
        for g in groups
    ]
    assert addresses == [["10.0.0.1"], ["10.0.0.2", "10.0.0.3"]]  # 10.0.0.4 is not ready
    assert groups[1]["load_balancing_weight"] == 2
    lb = groups[0]["lb_endpoints"][0]
    assert lb["health_status"] == "HEALTHY" and lb["load_balancing_weight"] == 1
    assert lb["metadata"]["filter_metadata"] == {
        "istio": {"workload": "web;prod;web;v1;Kubernetes"},
        "envoy.transport_socket_match": {"tlsMode": "istio"},
    }
    assert lb["endpoint"]["address"]["socket_address"]["port_value"] == 8080


def test_subset_assignment_keeps_only_matching_endpoints() -> None:
    cla = assignments(TEXT, "web-7d9f8c6b5-aaaaa.prod")["outbound|80|v2|web.prod.svc.cluster.local"]
    [group] = cla["endpoints"]
    assert [
        e["endpoint"]["address"]["socket_address"]["address"] for e in group["lb_endpoints"]
    ] == ["10.0.0.2", "10.0.0.3"]


def test_proxies_of_one_class_share_the_cache_and_warm_equals_cold() -> None:
    _, push = push_from_text(TEXT)
    cache = cache_for(push)
    cache.assert_unchanged = True  # every hit is rebuilt and compared
    first = generate_proxy_config(push, proxy_for(push, "web-7d9f8c6b5-aaaaa.prod"))
    misses = cache.misses
    second = generate_proxy_config(push, proxy_for(push, "web-7d9f8c6b5-bbbbb.prod"))
    assert cache.misses == misses and cache.hits > 0
    assert [c.name for c in first.clusters if "outbound" in c.name] == [
        c.name for c in second.clusters if "outbound" in c.name
    ]
    assert second.endpoints == first.endpoints
