"""Sidecar outbound route configurations: one per HTTP port, virtual hosts, domains, default
routes and the catch-all virtual host (Istio's buildSidecarOutboundHTTPRouteConfig)."""

from __future__ import annotations

import pytest
from rds_helpers import (
    SERVICES,
    as_dict,
    pod,
    proxy_of,
    push_of,
    route_config,
    sidecar_routes,
    vhost,
)

from meshpilot.xds.generate.routes import generate_sidecar_routes

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client", labels="{app: productpage, version: v1}")

REVIEWS_VS = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}
"""


def test_one_route_config_per_http_port_and_none_for_tcp():
    configs = sidecar_routes(push_of(SERVICES, CLIENT))
    assert sorted(configs) == ["9080", "9090"]  # mongodb's 27017 is TCP


def test_route_config_settings_follow_current_istio():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    assert config["ignore_port_in_host_matching"] is True
    assert config["validate_clusters"] is False
    assert config["max_direct_response_body_size_bytes"] == 1048576


def test_default_route_is_istios():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    host = vhost(config, "ratings.default.svc.cluster.local:9080")
    assert host["include_request_attempt_count"] is True
    assert host["routes"] == [
        {
            "name": "default",
            "match": {"prefix": "/"},
            "decorator": {"operation": "ratings.default.svc.cluster.local:9080/*"},
            "route": {
                "cluster": "outbound|9080||ratings.default.svc.cluster.local",
                "timeout": "0s",
                "max_grpc_timeout": "0s",
                "retry_policy": {
                    "retry_on": "connect-failure,refused-stream,unavailable,cancelled,"
                    "retriable-status-codes",
                    "num_retries": 2,
                    "retry_host_predicate": [
                        {
                            "name": "envoy.retry_host_predicates.previous_hosts",
                            "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.retry.host."
                                "previous_hosts.v3.PreviousHostsPredicate"
                            },
                        }
                    ],
                    "host_selection_retry_max_attempts": "5",
                },
            },
        }
    ]


def test_domains_same_namespace_without_port_variants():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    assert vhost(config, "ratings.default.svc.cluster.local:9080")["domains"] == [
        "ratings.default.svc.cluster.local",
        "ratings",
        "ratings.default.svc",
        "ratings.default",
        "10.96.0.13",
    ]


def test_domains_other_namespace_have_no_bare_name():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    assert vhost(config, "details.other.svc.cluster.local:9080")["domains"] == [
        "details.other.svc.cluster.local",
        "details.other",
        "details.other.svc",
        "10.96.0.20",
    ]


def test_service_entry_domains_are_host_and_addresses():
    se = """
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: default}
spec:
  hosts: [api.example.com]
  addresses: [240.0.0.5]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: DNS
"""
    config = route_config(push_of(SERVICES, CLIENT, se), 8080)
    assert vhost(config, "api.example.com:8080")["domains"] == ["api.example.com", "240.0.0.5"]


def test_headless_service_also_matches_pod_names():
    headless = """
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: http, port: 7000}]
"""
    config = route_config(push_of(CLIENT, headless), 7000)
    assert vhost(config, "db.default.svc.cluster.local:7000")["domains"] == [
        "db.default.svc.cluster.local",
        "db",
        "db.default.svc",
        "db.default",
        "*.db.default.svc.cluster.local",
        "*.db",
        "*.db.default.svc",
        "*.db.default",
    ]


def test_vhosts_sorted_by_name_and_catch_all_last():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    names = [v["name"] for v in config["virtual_hosts"]]
    assert names == [
        "details.other.svc.cluster.local:9080",
        "ratings.default.svc.cluster.local:9080",
        "reviews.default.svc.cluster.local:9080",
        "allow_any",
    ]


def test_allow_any_catch_all_goes_to_passthrough():
    config = route_config(push_of(SERVICES, CLIENT), 9080)
    assert config["virtual_hosts"][-1] == {
        "name": "allow_any",
        "domains": ["*"],
        "include_request_attempt_count": True,
        "routes": [
            {
                "name": "allow_any",
                "match": {"prefix": "/"},
                "route": {
                    "cluster": "PassthroughCluster",
                    "timeout": "0s",
                    "max_grpc_timeout": "0s",
                },
            }
        ],
    }


def test_registry_only_catch_all_answers_502():
    sidecar = """
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"""
    config = route_config(push_of(SERVICES, CLIENT, sidecar), 9080)
    assert config["virtual_hosts"][-1] == {
        "name": "block_all",
        "domains": ["*"],
        "include_request_attempt_count": True,
        "routes": [
            {"name": "block_all", "match": {"prefix": "/"}, "direct_response": {"status": 502}}
        ],
    }


def test_requested_names_only_and_unbuildable_names_skipped():
    push = push_of(SERVICES, CLIENT)
    configs = generate_sidecar_routes(push, proxy_of(push, "client"), ["9090", "bogus", "x:y"])
    assert [c.name for c in configs] == ["9090"]
    assert [v.name for v in configs[0].virtual_hosts] == [
        "details.other.svc.cluster.local:9090",
        "allow_any",
    ]


def test_port_without_services_still_has_the_catch_all():
    config = route_config(push_of(SERVICES, CLIENT), 7777)
    assert [v["name"] for v in config["virtual_hosts"]] == ["allow_any"]


def test_sniffed_route_name_carries_only_that_services_vhost_for_any_host():
    auto = """
apiVersion: v1
kind: Service
metadata: {name: legacy, namespace: default}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: web, port: 9080}]
"""
    push = push_of(SERVICES, CLIENT, auto)
    name = "legacy.default.svc.cluster.local:9080"
    config = sidecar_routes(push, names=[name])[name]
    assert [(v["name"], v["domains"]) for v in config["virtual_hosts"]] == [
        ("legacy.default.svc.cluster.local:9080", ["*"])
    ]


def test_auto_protocol_ports_get_routes():
    auto = """
apiVersion: v1
kind: Service
metadata: {name: legacy, namespace: default}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: web, port: 8000}]
"""
    config = route_config(push_of(CLIENT, auto), 8000)
    route = vhost(config, "legacy.default.svc.cluster.local:8000")["routes"][0]
    assert route["route"]["cluster"] == "outbound|8000||legacy.default.svc.cluster.local"


def test_virtual_service_replaces_default_route():
    config = route_config(push_of(SERVICES, CLIENT, REVIEWS_VS), 9080)
    routes = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
    assert [r["route"]["cluster"] for r in routes] == [
        "outbound|9080|v2|reviews.default.svc.cluster.local"
    ]
    assert routes[0]["metadata"]["filter_metadata"]["istio"] == {
        "config": "/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews"
    }
    # Other services keep their default route.
    assert vhost(config, "ratings.default.svc.cluster.local:9080")["routes"][0]["name"] == "default"


def test_virtual_service_in_proxy_namespace_wins_over_other_namespaces():
    other = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-from-other, namespace: other, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  hosts: [reviews.default.svc.cluster.local]
  http:
  - route:
    - destination: {host: reviews.default.svc.cluster.local, subset: v3}
"""
    config = route_config(push_of(SERVICES, CLIENT, REVIEWS_VS, other), 9080)
    routes = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
    assert routes[0]["route"]["cluster"] == "outbound|9080|v2|reviews.default.svc.cluster.local"
    # A proxy in `other` sees the opposite precedence.
    other_push = push_of(SERVICES, pod("client", "other"), REVIEWS_VS, other)
    config = sidecar_routes(other_push, "client", "other", ["9080"])["9080"]
    routes = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
    assert routes[0]["route"]["cluster"] == "outbound|9080|v3|reviews.default.svc.cluster.local"


def test_wildcard_virtual_service_applies_to_matching_services_without_exact_one():
    wildcard = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: all-default, namespace: default}
spec:
  hosts: ["*.default.svc.cluster.local"]
  http:
  - timeout: 3s
    route:
    - destination: {host: ratings}
"""
    config = route_config(push_of(SERVICES, CLIENT, REVIEWS_VS, wildcard), 9080)
    ratings = vhost(config, "ratings.default.svc.cluster.local:9080")["routes"][0]["route"]
    assert ratings["timeout"] == "3s"
    # reviews has an exact-host VirtualService, which wins over the wildcard one.
    reviews = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"][0]["route"]
    assert reviews["cluster"] == "outbound|9080|v2|reviews.default.svc.cluster.local"
    # Services outside the wildcard keep their defaults.
    details = vhost(config, "details.other.svc.cluster.local:9080")["routes"][0]
    assert details["name"] == "default"


def test_virtual_service_for_another_port_leaves_default_route():
    vs = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: other}
spec:
  hosts: [details]
  http:
  - match: [{port: 9090}]
    route:
    - destination: {host: details, subset: admin}
"""
    configs = sidecar_routes(push_of(SERVICES, CLIENT, vs))
    admin = vhost(configs["9090"], "details.other.svc.cluster.local:9090")["routes"][0]
    assert admin["route"]["cluster"] == "outbound|9090|admin|details.other.svc.cluster.local"
    web = vhost(configs["9080"], "details.other.svc.cluster.local:9080")["routes"][0]
    assert web["name"] == "default"


def test_port_80_gives_virtual_service_hosts_that_are_no_service_a_vhost():
    vs = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: site, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  http:
  - route:
    - destination: {host: reviews, port: {number: 9080}}
"""
    push = push_of(SERVICES, CLIENT, vs)
    host = vhost(route_config(push, 80), "bookinfo.example.com:80")
    assert host["domains"] == ["bookinfo.example.com"]
    assert (
        host["routes"][0]["route"]["cluster"] == "outbound|9080||reviews.default.svc.cluster.local"
    )
    # On other ports such a VirtualService selects nothing.
    assert "bookinfo.example.com:9080" not in [
        v["name"] for v in route_config(push, 9080)["virtual_hosts"]
    ]


def test_sidecar_egress_hosts_limit_services_and_virtual_services():
    sidecar = """
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress:
  - hosts: ["./ratings.default.svc.cluster.local"]
"""
    config = route_config(push_of(SERVICES, CLIENT, REVIEWS_VS, sidecar), 9080)
    assert [v["name"] for v in config["virtual_hosts"]] == [
        "ratings.default.svc.cluster.local:9080",
        "allow_any",
    ]


def test_consistent_hash_gives_default_route_a_hash_policy():
    dr = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: default}
spec:
  host: ratings
  trafficPolicy:
    loadBalancer:
      consistentHash: {httpHeaderName: x-user}
"""
    config = route_config(push_of(SERVICES, CLIENT, dr), 9080)
    route = vhost(config, "ratings.default.svc.cluster.local:9080")["routes"][0]["route"]
    assert route["hash_policy"] == [{"header": {"header_name": "x-user"}}]
    # Default routes keep previous_hosts even with hashing (Istio's ConvertPolicy(_, false)).
    assert route["retry_policy"]["retry_host_predicate"]


def test_duplicate_domains_keep_the_first_virtual_host():
    # A ServiceEntry host equal to the short name of a kube service may not take it over.
    se = """
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: short, namespace: default}
spec:
  hosts: [ratings.default]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: DNS
"""
    config = route_config(push_of(SERVICES, CLIENT, se), 9080)
    # The expanded `ratings.default` of the kube service yields to the real FQDN.
    assert vhost(config, "ratings.default:9080")["domains"] == ["ratings.default"]
    assert (
        "ratings.default" not in vhost(config, "ratings.default.svc.cluster.local:9080")["domains"]
    )


def test_generation_is_deterministic():
    push = push_of(SERVICES, CLIENT, REVIEWS_VS)
    proxy = proxy_of(push, "client")
    first = [as_dict(c) for c in generate_sidecar_routes(push, proxy, None)]
    second = [as_dict(c) for c in generate_sidecar_routes(push, proxy, None)]
    assert first == second


def test_proxies_told_apart_by_source_labels_do_not_share_cached_routes():
    vs = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{sourceLabels: {version: v2}, uri: {prefix: /}}]
    route: [{destination: {host: reviews, subset: for-v2}}]
  - route: [{destination: {host: reviews, subset: rest}}]
"""
    push = push_of(SERVICES, CLIENT, pod("client-v2", labels="{app: productpage, version: v2}"), vs)
    clusters = {}
    for name in ("client", "client-v2"):
        config = sidecar_routes(push, name, names=["9080"])["9080"]
        routes = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
        clusters[name] = [r["route"]["cluster"].split("|")[2] for r in routes]
    assert clusters == {"client": ["rest"], "client-v2": ["for-v2"]}


def test_proxies_of_one_class_share_route_configs():
    push = push_of(SERVICES, CLIENT, pod("client-2", labels="{app: other}"), REVIEWS_VS)
    first = generate_sidecar_routes(push, proxy_of(push, "client"), ["9080"])
    second = generate_sidecar_routes(push, proxy_of(push, "client-2"), ["9080"])
    assert first[0] is second[0]
