"""Plain sidecar routes written straight to bytes (routes/plain_route.py, match_bytes.py)
parse to exactly the route route_body builds through upb, decorator and metadata included,
on every listener port: single and weighted destinations, explicit and implicit ports,
subsets, consistent hashing from a DestinationRule, retries (default, custom, off),
timeouts, route and match names, stat prefixes, the match-less catch-all, and simple URI
and header matches (the others are left to route_match)."""

from __future__ import annotations

import pytest
from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.config.istio.virtual_service import HTTPMatchRequest, HTTPRoute
from meshpilot.config.loader import load_text
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate.routes.assembly import EncodedRoute, encode_route, match_path
from meshpilot.xds.generate.routes.context import RouteContext, mesh_service_ports
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.http_route import metadata_field, route_body, route_matches
from meshpilot.xds.generate.routes.match import is_catch_all, matches_everything, route_match
from meshpilot.xds.generate.routes.match_bytes import simple_match
from meshpilot.xds.generate.routes.plain_route import PlainParts, encode_plain_route, is_plain

MESH = """
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: default}
spec:
  clusterIP: 10.96.0.10
  selector: {app: shop}
  ports: [{name: http, port: 8080}, {name: http-admin, port: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: default}
spec:
  clusterIP: 10.96.0.11
  selector: {app: cart}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
status: {podIP: 10.1.0.5}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart, namespace: default}
spec:
  host: cart
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      loadBalancer: {consistentHash: {httpHeaderName: x-user}}
  - name: v2
    labels: {version: v2}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: default}
spec:
  hosts: [shop]
  http:
  - name: canary
    match:
    - {name: by-header, headers: {x-canary: {exact: "yes"}}, statPrefix: canary}
    - {uri: {prefix: /beta}, ignoreUriCase: true}
    route: [{destination: {host: shop, port: {number: 8080}}}]
    timeout: 3s
  - match: [{uri: {exact: /cart}}]
    route:
    - {destination: {host: cart, subset: v1}, weight: 70}
    - {destination: {host: cart, subset: v2}, weight: 30}
    - {destination: {host: shop}, weight: 0}
    retries: {attempts: 0}
  - match: [{uri: {regex: "/h.*"}}]
    route: [{destination: {host: cart, subset: v1}}]
    retries: {attempts: 4, perTryTimeout: 1s, retryOn: "5xx,503"}
  - match: [{port: 9090}]
    route: [{destination: {host: shop}}]
  - route: [{destination: {host: shop}}]
    timeout: 20s
"""


def _push() -> tuple[PushContext, BoundVirtualService]:
    loaded = load_text(MESH, "mesh.yaml")
    assert not loaded.errors, loaded.errors
    push = build_push_context(loaded.objects, loaded.mesh)
    vs = next(v for v in push.virtual_services.all if v.name == "shop")
    return push, vs


def _route(encoded: EncodedRoute | None, port: int) -> rc.Route | None:
    """The route as a VirtualHost.routes entry parses (decorator for `port` included)."""
    return None if encoded is None else rc.VirtualHost.FromString(encoded.entry(port)).routes[0]


@pytest.mark.parametrize("port", [8080, 9090])
def test_plain_routes_equal_the_routes_route_body_builds(port: int) -> None:
    push, vs = _push()
    pod = push.pod("default", "client")
    assert pod is not None
    proxy = proxy_from_pod(pod, ProxyType.SIDECAR)
    scope = push.proxy_scope(proxy)
    ports = mesh_service_ports(scope, port)
    ctx = RouteContext(push, proxy, scope, vs, port, frozenset({MESH_GATEWAY}), False, ports)
    extra = metadata_field(push, vs)
    parts = PlainParts()
    built = []
    for _, route, _, match in route_matches(http_routes(push, vs)):
        assert is_plain(route)
        plain = encode_plain_route(ctx, route, match, extra, parts)
        body = route_body(ctx, route, match)
        reference = None if body is None else encode_route(body, vs.name, is_catch_all(body), extra)
        assert _route(plain, port) == _route(reference, port)
        if plain is not None and reference is not None:
            assert plain.catch_all == reference.catch_all
            built.append(_route(plain, port))
    assert len(built) == (5 if port == 8080 else 6)  # the port-9090 match only on its port
    # The cases are exercised: consistent hashing, retries off, a weighted split.
    assert any(r and r.route.hash_policy for r in built)
    assert any(r and not r.route.HasField("retry_policy") for r in built)
    assert any(r and len(r.route.weighted_clusters.clusters) == 2 for r in built)


def test_routes_with_more_than_destinations_take_the_message_path() -> None:
    base = {"route": [{"destination": {"host": "a"}}]}
    assert is_plain(HTTPRoute.model_validate(base))
    for extra in (
        {"redirect": {"uri": "/x"}},
        {"rewrite": {"uri": "/x"}},
        {"headers": {"request": {"set": {"a": "b"}}}},
        {"mirror": {"host": "b"}},
        {"fault": {"abort": {"httpStatus": 503, "percentage": {"value": 1}}}},
        {"corsPolicy": {"allowOrigins": [{"exact": "https://a"}]}},
        {"route": [{"destination": {"host": "a"}, "headers": {"request": {"set": {"a": "b"}}}}]},
    ):
        assert not is_plain(HTTPRoute.model_validate({**base, **extra})), extra


SIMPLE_MATCHES = [
    {},
    {"uri": {"exact": "/a"}},
    {"uri": {"prefix": "/"}},
    {"uri": {"prefix": "/b"}, "ignoreUriCase": True},
    {"uri": {"regex": ".*"}},
    {"uri": {"regex": "/c/[0-9]+"}, "headers": {"b": {"prefix": "x"}, "a": {"regex": "y.*"}}},
    {"headers": {"x-canary": {"exact": "yes"}, "end-user": {"exact": ""}}},
]
OTHER_MATCHES = [
    {"headers": {"x": {"regex": "*"}}},  # presence test
    {"headers": {"@request.auth.claims.group": {"exact": "admin"}}},
    {"method": {"exact": "GET"}},
    {"authority": {"prefix": "a"}},
    {"scheme": {"exact": "https"}},
    {"queryParams": {"q": {"exact": "1"}}},
    {"withoutHeaders": {"x": {"exact": "1"}}},
]


@pytest.mark.parametrize("spec", SIMPLE_MATCHES)
def test_simple_matches_equal_route_match(spec: dict[str, object]) -> None:
    match = HTTPMatchRequest.model_validate(spec)
    found = simple_match(match)
    assert found is not None
    serialized, path, everything = found
    expected = route_match(match)
    assert rc.RouteMatch.FromString(serialized) == expected
    assert path == match_path(expected)
    assert everything == matches_everything(expected)


@pytest.mark.parametrize("spec", OTHER_MATCHES)
def test_other_matches_are_left_to_route_match(spec: dict[str, object]) -> None:
    assert simple_match(HTTPMatchRequest.model_validate(spec)) is None
