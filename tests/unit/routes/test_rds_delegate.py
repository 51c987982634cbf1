"""Delegate VirtualServices (Istio's mergeVirtualServicesIfNeeded) and build_http_routes as
gateways call it."""

from __future__ import annotations

import pytest
from rds_helpers import (
    SERVICES,
    as_dict,
    pod,
    proxy_of,
    push_of,
    route_config,
    validate_route_list,
    vhost,
)

from meshpilot.xds.generate.routes import build_http_routes

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client")
REVIEWS = "reviews.default.svc.cluster.local:9080"

ROOT = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: default}
spec:
  hosts: [reviews]
  http:
  - name: api
    match: [{uri: {prefix: /api}, headers: {x-team: {exact: a}}}]
    timeout: 7s
    delegate: {name: team-a, namespace: other}
  - route: [{destination: {host: reviews, subset: fallback}}]
"""

DELEGATE = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: team-a, namespace: other}
spec:
  http:
  - name: v2
    match: [{uri: {prefix: /api/v2}}]
    route: [{destination: {host: details, subset: v2}}]
  - name: conflicting
    match: [{uri: {prefix: /web}}]
    route: [{destination: {host: details, subset: never}}]
  - timeout: 1s
    route: [{destination: {host: details, subset: v1}}]
"""


def reviews_routes(*docs: str) -> list[dict]:
    return vhost(route_config(push_of(SERVICES, CLIENT, *docs), 9080), REVIEWS)["routes"]


def test_delegate_routes_are_anded_with_the_root_match():
    routes = reviews_routes(ROOT, DELEGATE)
    assert [(r.get("name"), r["route"]["cluster"]) for r in routes] == [
        # Short hosts of the delegate resolve in the delegate's namespace.
        ("api-v2", "outbound|9080|v2|details.other.svc.cluster.local"),
        ("api", "outbound|9080|v1|details.other.svc.cluster.local"),
        (None, "outbound|9080|fallback|reviews.default.svc.cluster.local"),
    ]
    v2, rest = routes[0], routes[1]
    assert v2["match"] == {
        "prefix": "/api/v2",
        "case_sensitive": True,
        "headers": [{"name": "x-team", "string_match": {"exact": "a"}}],
    }
    assert rest["match"]["prefix"] == "/api"  # no delegate match: the root's
    # Root settings are inherited only where the delegate sets none.
    assert v2["route"]["timeout"] == "7s"
    assert rest["route"]["timeout"] == "1s"
    # Provenance stays the root VirtualService.
    assert v2["metadata"]["filter_metadata"]["istio"]["config"].endswith("virtual-service/root")


def test_delegate_not_exported_to_the_root_namespace_is_ignored():
    hidden = DELEGATE.replace("spec:\n", "spec:\n  exportTo: [.]\n", 1)
    routes = reviews_routes(ROOT, hidden)
    assert [r["route"]["cluster"] for r in routes] == [
        "outbound|9080|fallback|reviews.default.svc.cluster.local"
    ]


def test_missing_delegate_drops_only_its_route():
    routes = reviews_routes(ROOT)
    assert len(routes) == 1 and routes[0]["route"]["cluster"].split("|")[2] == "fallback"


def test_delegate_namespace_defaults_to_the_root_namespace():
    root = ROOT.replace("delegate: {name: team-a, namespace: other}", "delegate: {name: team-a}")
    local = DELEGATE.replace("namespace: other", "namespace: default")
    routes = reviews_routes(root, local)
    assert routes[0]["route"]["cluster"] == "outbound|9080|v2|details.default.svc.cluster.local"


def test_conflicting_regex_match_is_dropped():
    root = ROOT.replace(
        "{uri: {prefix: /api}, headers: {x-team: {exact: a}}}", "{uri: {regex: /a.*}}"
    )
    routes = reviews_routes(root, DELEGATE)
    # Every delegate route with a uri conflicts with a regex root; the match-less one fits.
    assert [r["route"]["cluster"].split("|")[2] for r in routes] == ["v1", "fallback"]
    assert routes[0]["match"]["safe_regex"] == {"regex": "/a.*"}


GATEWAY_VS = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: default}
spec:
  hosts: [shop.example.com]
  gateways: [public, mesh]
  http:
  - match: [{uri: {prefix: /internal}, gateways: [mesh]}]
    route: [{destination: {host: ratings}}]
  - match: [{uri: {prefix: /old}}]
    redirect: {uri: /new, derivePort: FROM_REQUEST_PORT}
  - route:
    - destination: {host: details.other.svc.cluster.local}
      weight: 100
"""


def test_build_http_routes_for_a_gateway():
    push = push_of(SERVICES, CLIENT, GATEWAY_VS)
    bound = push.virtual_services.for_gateway("default/public", "default")[0]
    proxy = proxy_of(push, "client")
    built = build_http_routes(push, proxy, bound, 443, frozenset({"default/public"}), is_tls=True)
    validate_route_list(built)
    routes = [as_dict(r) for r in built]
    # The mesh-only match is skipped; match-less routes apply to every gateway of the VS.
    assert [r["match"].get("prefix") for r in routes] == ["/old", "/"]
    # HTTPS on 443 needs no explicit redirect port.
    assert "port_redirect" not in routes[0]["redirect"]
    # Gateways see whole services: a destination without port takes the service's only
    # port when it has one, else the server port (details has two ports).
    # One destination is a plain cluster, whatever its weight.
    assert routes[1]["route"]["cluster"] == "outbound|443||details.other.svc.cluster.local"


def test_build_http_routes_for_a_gateway_takes_a_single_port_service_port():
    vs = GATEWAY_VS.replace("host: details.other.svc.cluster.local", "host: reviews")
    push = push_of(SERVICES, CLIENT, vs)
    bound = push.virtual_services.for_gateway("default/public", "default")[0]
    routes = build_http_routes(
        push, proxy_of(push, "client"), bound, 80, frozenset({"default/public"})
    )
    validate_route_list(routes)
    assert routes[1].route.cluster == "outbound|9080||reviews.default.svc.cluster.local"
    assert routes[0].redirect.port_redirect == 0  # http on 80: implicit
