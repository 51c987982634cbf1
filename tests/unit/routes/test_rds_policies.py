"""Per-route fault injection and CORS (typed_per_filter_config) and header operations."""

from __future__ import annotations

import pytest
from rds_helpers import SERVICES, pod, push_of, route_config, vhost

from meshpilot.config.istio.virtual_service import HeaderOperations, Headers
from meshpilot.xds.generate.routes.headers import header_operations

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client")
REVIEWS = "reviews.default.svc.cluster.local:9080"
FAULT = "envoy.filters.http.fault"
CORS = "envoy.filters.http.cors"


def first_route(http: str) -> dict:
    vs = f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: reviews, namespace: default}}
spec:
  hosts: [reviews]
  http:
{http}"""
    return vhost(route_config(push_of(SERVICES, CLIENT, vs), 9080), REVIEWS)["routes"][0]


def test_fault_delay_and_http_abort():
    route = first_route("""
  - fault:
      delay: {fixedDelay: 5s, percentage: {value: 0.1}}
      abort: {httpStatus: 503, percentage: {value: 50}}
    route: [{destination: {host: reviews}}]
""")
    assert route["typed_per_filter_config"] == {
        FAULT: {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
            "delay": {
                "fixed_delay": "5s",
                "percentage": {"numerator": 1000, "denominator": "MILLION"},
            },
            "abort": {
                "http_status": 503,
                "percentage": {"numerator": 500000, "denominator": "MILLION"},
            },
        }
    }


def test_fault_grpc_abort_and_legacy_integer_percent():
    route = first_route("""
  - fault:
      delay: {fixedDelay: 1s, percent: 20}
      abort: {grpcStatus: UNAVAILABLE}
    route: [{destination: {host: reviews}}]
""")
    fault = route["typed_per_filter_config"][FAULT]
    assert fault["delay"]["percentage"] == {"numerator": 20}  # HUNDRED is the default
    assert fault["abort"] == {"grpc_status": 14}


def test_cors_policy():
    route = first_route("""
  - corsPolicy:
      allowOrigins: [{exact: "https://a.example.com"}, {regex: "https://.*\\\\.b\\\\.com"}]
      allowMethods: [GET, POST]
      allowHeaders: [x-token, content-type]
      exposeHeaders: [x-trace]
      maxAge: 24h
      allowCredentials: true
    route: [{destination: {host: reviews}}]
""")
    assert route["typed_per_filter_config"] == {
        CORS: {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
            "allow_origin_string_match": [
                {"exact": "https://a.example.com"},
                {"safe_regex": {"regex": "https://.*\\.b\\.com"}},
            ],
            "allow_methods": "GET,POST",
            "allow_headers": "x-token,content-type",
            "expose_headers": "x-trace",
            "max_age": "86400",
            "allow_credentials": True,
            "filter_enabled": {"default_value": {"numerator": 100}},
            "forward_not_matching_preflights": True,
        }
    }


def test_cors_ignore_unmatched_preflights():
    route = first_route("""
  - corsPolicy:
      allowOrigins: [{prefix: "https://"}]
      unmatchedPreflights: IGNORE
    route: [{destination: {host: reviews}}]
""")
    cors = route["typed_per_filter_config"][CORS]
    assert cors["forward_not_matching_preflights"] is False
    assert "allow_credentials" not in cors


def test_route_headers_set_add_remove():
    route = first_route("""
  - headers:
      request:
        set: {x-b: "2", x-a: "1"}
        add: {x-c: "3"}
        remove: [x-internal]
      response:
        add: {x-served-by: mesh}
        remove: [server]
    route: [{destination: {host: reviews}}]
""")
    overwrite, append = "OVERWRITE_IF_EXISTS_OR_ADD", None  # APPEND_IF_EXISTS_OR_ADD is 0
    assert [
        (h["header"]["key"], h["header"]["value"], h.get("append_action"))
        for h in route["request_headers_to_add"]
    ] == [("x-a", "1", overwrite), ("x-b", "2", overwrite), ("x-c", "3", append)]
    assert route["request_headers_to_remove"] == ["x-internal"]
    assert route["response_headers_to_add"] == [{"header": {"key": "x-served-by", "value": "mesh"}}]
    assert route["response_headers_to_remove"] == ["server"]


def test_authority_header_becomes_host_rewrite():
    route = first_route("""
  - headers:
      request:
        set: {host: backend.example.com}
    route: [{destination: {host: reviews}}]
""")
    assert route["route"]["host_rewrite_literal"] == "backend.example.com"
    assert "request_headers_to_add" not in route


def test_destination_headers_single_and_weighted():
    route = first_route("""
  - route:
    - destination: {host: reviews}
      headers:
        request: {set: {x-dest: one}}
        response: {remove: [x-drop]}
""")
    assert route["request_headers_to_add"][0]["header"] == {"key": "x-dest", "value": "one"}
    assert route["response_headers_to_remove"] == ["x-drop"]
    route = first_route("""
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 90
      headers:
        request: {add: {x-canary: "no"}, set: {":authority": v1.internal}}
    - destination: {host: reviews, subset: v2}
      weight: 10
""")
    first = route["route"]["weighted_clusters"]["clusters"][0]
    assert first["request_headers_to_add"] == [{"header": {"key": "x-canary", "value": "no"}}]
    assert first["host_rewrite_literal"] == "v1.internal"
    assert "request_headers_to_add" not in route


def test_rewrite_authority_wins_over_destination_authority():
    route = first_route("""
  - rewrite: {authority: top.internal}
    route:
    - destination: {host: reviews}
      headers:
        request: {set: {host: dest.internal}}
""")
    assert route["route"]["host_rewrite_literal"] == "top.internal"


def test_pseudo_headers_and_host_are_never_mutated():
    # Validation refuses these; the translation drops them as Istio does.
    ops = header_operations(
        Headers(
            request=HeaderOperations(
                set={":authority": "a.internal", "x-a": "1"}, remove=[":path", "Host", "x-b"]
            )
        )
    )
    assert [o.header.key for o in ops.request_add] == ["x-a"]
    assert ops.request_remove == ["x-b"]
    assert ops.authority == "a.internal"
