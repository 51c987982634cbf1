"""HTTPMatchRequest translation and the per-match filters (port, source, gateways)."""

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
    validate_route_list,
    vhost,
)

from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import HTTPMatchRequest
from meshpilot.xds.generate.routes import build_http_routes
from meshpilot.xds.generate.routes.match import route_match

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client", labels="{app: productpage, version: v1}")
REVIEWS = "reviews.default.svc.cluster.local:9080"


def vs(http: str, hosts: str = "[reviews]", extra: str = "") -> str:
    return f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: reviews, namespace: default}}
spec:
  hosts: {hosts}
{extra}  http:
{http}"""


def routes_of(http: str, *docs: str, port: int = 9080) -> list[dict]:
    config = route_config(push_of(SERVICES, CLIENT, vs(http), *docs), port)
    return vhost(config, f"reviews.default.svc.cluster.local:{port}")["routes"]


def test_uri_exact_prefix_regex():
    routes = routes_of("""
  - match:
    - uri: {exact: /login}
    - uri: {prefix: /api}
    - uri: {regex: "/v[0-9]+/.*"}
    route: [{destination: {host: reviews}}]
""")
    assert [r["match"] for r in routes] == [
        {"path": "/login", "case_sensitive": True},
        {"prefix": "/api", "case_sensitive": True},
        {"safe_regex": {"regex": "/v[0-9]+/.*"}, "case_sensitive": True},
    ]
    assert [r["decorator"]["operation"] for r in routes] == [
        "reviews.default.svc.cluster.local:9080/login",
        "reviews.default.svc.cluster.local:9080/api*",
        "reviews.default.svc.cluster.local:9080/v[0-9]+/.*",
    ]


def test_ignore_uri_case():
    routes = routes_of("""
  - match: [{uri: {prefix: /API}, ignoreUriCase: true}]
    route: [{destination: {host: reviews}}]
""")
    assert routes[0]["match"] == {"prefix": "/API", "case_sensitive": False}


def test_headers_sorted_then_method_authority_scheme():
    routes = routes_of("""
  - match:
    - headers:
        x-b: {prefix: beta}
        x-a: {regex: "^a.*"}
        x-present: {}
      method: {exact: GET}
      authority: {prefix: shop.}
      scheme: {exact: https}
    route: [{destination: {host: reviews}}]
""")
    assert routes[0]["match"]["headers"] == [
        {"name": "x-a", "string_match": {"safe_regex": {"regex": "^a.*"}}},
        {"name": "x-b", "string_match": {"prefix": "beta"}},
        {"name": "x-present", "present_match": True},
        {"name": ":method", "string_match": {"exact": "GET"}},
        {"name": ":authority", "string_match": {"prefix": "shop."}},
        {"name": ":scheme", "string_match": {"exact": "https"}},
    ]


def test_regex_star_is_a_presence_match():
    # Validation refuses `*` as RE2; the translation still treats it as Istio does.
    match = HTTPMatchRequest(headers={"x-any": StringMatch(regex="*")})
    assert as_dict(route_match(match))["headers"] == [{"name": "x-any", "present_match": True}]


def test_without_headers_inverts():
    routes = routes_of("""
  - match:
    - withoutHeaders:
        x-debug: {exact: "1"}
        x-canary: {}
    route: [{destination: {host: reviews}}]
""")
    assert routes[0]["match"]["headers"] == [
        {"name": "x-canary", "present_match": True, "invert_match": True},
        {
            "name": "x-debug",
            "string_match": {"exact": "1"},
            "invert_match": True,
            "treat_missing_header_as_empty": True,
        },
    ]


def test_query_params():
    routes = routes_of("""
  - match:
    - queryParams:
        version: {exact: "2"}
        debug: {}
    route: [{destination: {host: reviews}}]
""")
    assert routes[0]["match"]["query_parameters"] == [
        {"name": "debug", "present_match": True},
        {"name": "version", "string_match": {"exact": "2"}},
    ]


def test_jwt_claim_headers_become_metadata_matches():
    # Claim routing is for gateways (validation refuses it on mesh VirtualServices).
    http = """
  - match: [{headers: {"@request.auth.claims[group]": {exact: admin}}}]
    route: [{destination: {host: reviews}}]
"""
    push = push_of(SERVICES, CLIENT, vs(http, extra="  gateways: [my-gw]\n"))
    bound = push.virtual_services.for_gateway("default/my-gw", "default")[0]
    routes = build_http_routes(
        push, proxy_of(push, "client"), bound, 80, frozenset({"default/my-gw"})
    )
    validate_route_list(routes)
    match = as_dict(routes[0])["match"]
    assert "headers" not in match
    value = {"string_match": {"exact": "admin"}}
    assert match["dynamic_metadata"] == [
        {
            "filter": "envoy.filters.http.jwt_authn",
            "path": [{"key": "payload"}, {"key": "group"}],
            "value": {"or_match": {"value_matchers": [{"list_match": {"one_of": value}}, value]}},
        }
    ]


def test_each_match_is_one_route_with_the_same_action_and_joined_names():
    routes = routes_of("""
  - name: api
    match:
    - name: v1
      uri: {prefix: /v1}
    - uri: {prefix: /v2}
    route: [{destination: {host: reviews, subset: new}}]
  - route: [{destination: {host: reviews, subset: old}}]
""")
    assert [(r.get("name"), r["route"]["cluster"]) for r in routes] == [
        ("api.v1", "outbound|9080|new|reviews.default.svc.cluster.local"),
        ("api", "outbound|9080|new|reviews.default.svc.cluster.local"),
        (None, "outbound|9080|old|reviews.default.svc.cluster.local"),
    ]
    assert routes[-1]["match"] == {"prefix": "/"}  # no match: `/`, no case_sensitive


def test_nothing_after_a_catch_all():
    routes = routes_of("""
  - match:
    - uri: {prefix: /}
    - uri: {prefix: /never}
    route: [{destination: {host: reviews, subset: a}}]
  - route: [{destination: {host: reviews, subset: b}}]
""")
    assert [r["match"] for r in routes] == [{"prefix": "/", "case_sensitive": True}]


def test_match_port_filters_by_listener_port():
    http = """
  - match: [{port: 9080, uri: {prefix: /a}}]
    route: [{destination: {host: details.other.svc.cluster.local, subset: a}}]
  - match: [{port: 9090}]
    route: [{destination: {host: details.other.svc.cluster.local, subset: admin}}]
"""
    push = push_of(SERVICES, CLIENT, vs(http, hosts="[details.other.svc.cluster.local]"))
    configs = sidecar_routes(push)
    web = vhost(configs["9080"], "details.other.svc.cluster.local:9080")["routes"]
    admin = vhost(configs["9090"], "details.other.svc.cluster.local:9090")["routes"]
    assert [r["route"]["cluster"] for r in web] == [
        "outbound|9080|a|details.other.svc.cluster.local"
    ]
    assert [r["route"]["cluster"] for r in admin] == [
        "outbound|9090|admin|details.other.svc.cluster.local"
    ]


def test_source_labels_and_namespace_select_clients():
    http = """
  - match: [{sourceLabels: {version: v1}, sourceNamespace: default, uri: {prefix: /a}}]
    route: [{destination: {host: reviews, subset: for-v1}}]
  - match: [{sourceLabels: {version: v2}, uri: {prefix: /b}}]
    route: [{destination: {host: reviews, subset: for-v2}}]
  - match: [{sourceNamespace: other, uri: {prefix: /c}}]
    route: [{destination: {host: reviews, subset: for-other}}]
  - route: [{destination: {host: reviews, subset: rest}}]
"""
    routes = routes_of(http)
    assert [r["route"]["cluster"].split("|")[2] for r in routes] == ["for-v1", "rest"]
    # A match with only source conditions is `/` for the clients it selects: a catch-all.
    only_source = routes_of("""
  - match: [{sourceLabels: {app: productpage}}]
    route: [{destination: {host: reviews, subset: mine}}]
  - route: [{destination: {host: reviews, subset: unreachable}}]
""")
    assert [r["route"]["cluster"].split("|")[2] for r in only_source] == ["mine"]
    push = push_of(SERVICES, pod("client", "other", "{version: v2}"), vs(http))
    config = sidecar_routes(push, "client", "other", ["9080"])["9080"]
    routes = vhost(config, REVIEWS)["routes"]
    assert [r["route"]["cluster"].split("|")[2] for r in routes] == ["for-v2", "for-other", "rest"]


def test_match_gateways_decide_between_mesh_and_gateways():
    http = """
  - match: [{gateways: [my-gateway], uri: {prefix: /gw}}]
    route: [{destination: {host: reviews, subset: gw}}]
  - match: [{gateways: [mesh], uri: {prefix: /mesh}}]
    route: [{destination: {host: reviews, subset: mesh}}]
  - match: [{uri: {prefix: /both}}]
    route: [{destination: {host: reviews, subset: both}}]
"""
    extra = "  gateways: [mesh, my-gateway]\n"
    push = push_of(SERVICES, CLIENT, vs(http, extra=extra))
    routes = vhost(route_config(push, 9080), REVIEWS)["routes"]
    assert [r["match"]["prefix"] for r in routes] == ["/mesh", "/both"]


def test_stat_prefix_is_carried():
    routes = routes_of("""
  - match: [{uri: {prefix: /a}, statPrefix: reviews-a}]
    route: [{destination: {host: reviews}}]
""")
    assert routes[0]["stat_prefix"] == "reviews-a"
