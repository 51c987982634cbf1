"""ExternalName Services as aliases (Istio ENABLE_EXTERNAL_NAME_ALIAS, on by default since
1.21): their names join the target's virtual host; no cluster, listener or virtual host of
their own; unknown targets and loops add nothing."""

from __future__ import annotations

import pytest
from rds_helpers import pod, proxy_of, push_of, route_config, sidecar_routes, vhost

from meshpilot.xds.generate import generate_proxy_config

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client")
REVIEWS = """
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.12
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
"""


def external_name(name: str, target: str, namespace: str = "default", port: int = 9080) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  type: ExternalName
  externalName: {target}
  ports: [{{name: http, port: {port}}}]
"""


def all_domains(config: dict[str, object]) -> list[str]:
    vhosts = config["virtual_hosts"]
    assert isinstance(vhosts, list)
    return [d for v in vhosts for d in v["domains"]]


def test_alias_names_join_the_target_virtual_host():
    push = push_of(REVIEWS, external_name("rv", "reviews.default.svc.cluster.local"), CLIENT)
    config = route_config(push, 9080)
    assert [v["name"] for v in config["virtual_hosts"]] == [
        "reviews.default.svc.cluster.local:9080",
        "allow_any",
    ]
    assert vhost(config, "reviews.default.svc.cluster.local:9080")["domains"] == [
        "reviews.default.svc.cluster.local",
        "reviews",
        "reviews.default.svc",
        "reviews.default",
        "rv.default.svc.cluster.local",
        "rv",
        "rv.default.svc",
        "rv.default",
        "10.96.0.12",
    ]


def test_alias_has_no_cluster_and_no_listener():
    push = push_of(REVIEWS, external_name("rv", "reviews.default.svc.cluster.local"), CLIENT)
    out = generate_proxy_config(push, proxy_of(push, "client")).to_dict()
    text = str(out["clusters"]) + str(out["listeners"])
    assert "rv.default" not in text
    assert "outbound|9080||reviews.default.svc.cluster.local" in text


def test_alias_on_a_port_the_target_lacks_still_joins_every_port_of_the_target():
    # Kubernetes ignores ExternalName ports; Istio's alias does too.
    push = push_of(
        REVIEWS, external_name("rv", "reviews.default.svc.cluster.local", port=7777), CLIENT
    )
    assert sorted(sidecar_routes(push)) == ["9080"]
    assert "rv" in all_domains(route_config(push, 9080))


def test_chain_resolves_to_the_concrete_service_and_loops_add_nothing():
    push = push_of(
        REVIEWS,
        external_name("hop2", "hop1.other.svc.cluster.local"),
        external_name("hop1", "reviews.default.svc.cluster.local", namespace="other"),
        external_name("loop-a", "loop-b.default.svc.cluster.local"),
        external_name("loop-b", "loop-a.default.svc.cluster.local"),
        CLIENT,
    )
    domains = all_domains(route_config(push, 9080))
    # (namespace, hostname) order: default's hop2 before other's hop1.
    assert domains.index("hop2.default.svc.cluster.local") < domains.index(
        "hop1.other.svc.cluster.local"
    )
    assert not any(d.startswith("loop-") for d in domains)


def test_alias_of_an_unknown_host_goes_to_the_catch_all():
    push = push_of(REVIEWS, external_name("ext", "api.example.com"), CLIENT)
    config = route_config(push, 9080)
    assert not any(d.startswith("ext") for d in all_domains(config))
    assert vhost(config, "allow_any")["domains"] == ["*"]


def test_alias_of_a_service_entry_host():
    entry = """
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: httpbin, namespace: default}
spec:
  hosts: [httpbin.org]
  resolution: DNS
  ports: [{number: 8000, name: http, protocol: HTTP}]
"""
    push = push_of(entry, external_name("httpbin", "httpbin.org", port=8000), CLIENT)
    assert vhost(route_config(push, 8000), "httpbin.org:8000")["domains"] == [
        "httpbin.org",
        "httpbin.default.svc.cluster.local",
        "httpbin",
        "httpbin.default.svc",
        "httpbin.default",
    ]


def test_virtual_service_of_the_alias_host_does_not_apply_the_target_one_does():
    vss = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: alias, namespace: default}
spec:
  hosts: [rv.default.svc.cluster.local]
  http:
  - fault: {abort: {httpStatus: 503, percentage: {value: 100}}}
    route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - timeout: 3s
    route: [{destination: {host: reviews}}]
"""
    push = push_of(REVIEWS, external_name("rv", "reviews.default.svc.cluster.local"), vss, CLIENT)
    config = route_config(push, 9080)
    target = vhost(config, "reviews.default.svc.cluster.local:9080")
    assert "rv" in target["domains"]
    assert [r["route"]["timeout"] for r in target["routes"]] == ["3s"]
    assert "typed_per_filter_config" not in str(config)  # the fault never shows


def test_sidecar_imports_trim_aliases():
    sidecar = """
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress:
  - hosts: ["./*"]
"""
    push = push_of(
        REVIEWS,
        external_name("near", "reviews.default.svc.cluster.local"),
        external_name("far", "reviews.default.svc.cluster.local", namespace="other"),
        sidecar,
        CLIENT,
    )
    domains = all_domains(route_config(push, 9080))
    assert "near" in domains
    assert not any(d.startswith("far.") for d in domains)


def test_route_to_an_alias_destination_uses_the_target_cluster():
    vs = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: rv}}]
"""
    push = push_of(REVIEWS, external_name("rv", "reviews.default.svc.cluster.local"), vs, CLIENT)
    target = vhost(route_config(push, 9080), "reviews.default.svc.cluster.local:9080")
    assert [r["route"]["cluster"] for r in target["routes"]] == [
        "outbound|9080||reviews.default.svc.cluster.local"
    ]


def test_port_egress_entry_gives_an_alias_no_listener():
    sidecar = """
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress:
  - port: {number: 9080, protocol: HTTP, name: http}
    hosts: ["./*"]
"""
    push = push_of(
        REVIEWS, external_name("rv", "reviews.default.svc.cluster.local"), sidecar, CLIENT
    )
    out = generate_proxy_config(push, proxy_of(push, "client")).to_dict()
    assert "rv.default" not in str(out["listeners"]) + str(out["clusters"])
    assert "rv" in all_domains(route_config(push, 9080))
