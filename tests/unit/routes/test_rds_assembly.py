"""Sidecar route configs assembled from serialized routes (routes/assembly.py, encoded.py):
the same configuration as building every message, one translation per route for all
ports, and short destination hosts resolved where the route was written."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from rds_helpers import SERVICES, pod, proxy_of, push_of, route_config, vhost

import meshpilot.xds.generate.routes.encoded as encoded
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY
from meshpilot.xds.generate.routes import generate_sidecar_routes
from meshpilot.xds.generate.routes.assembly import (
    VirtualHostParts,
    encode_route,
    route_configuration,
    route_entry,
    virtual_host_bytes,
)
from meshpilot.xds.generate.routes.context import RouteContext, mesh_service_ports
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.encoded import RouteMemo, encoded_virtual_service
from meshpilot.xds.generate.routes.http_route import translate_virtual_service
from meshpilot.xds.protos import boolean, u32

pytestmark = pytest.mark.envoy  # route configs built through rds_helpers go through Envoy

CLIENT = pod("client")
DETAILS = "details.other.svc.cluster.local"

# details serves 9080 and 9090: a weighted route (decorator names the listener port), a
# single-cluster one with an explicit port (decorator names the cluster's port) and a
# port-less one (the cluster follows the listener port).
DETAILS_VS = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: other}
spec:
  hosts: [details]
  http:
  - match: [{headers: {x-canary: {exact: "yes"}}}]
    route: [{destination: {host: details, port: {number: 9080}, subset: v2}}]
  - match: [{uri: {prefix: /any}}]
    route: [{destination: {host: details, subset: v1}}]
    mirror: {host: ratings.default.svc.cluster.local}
  - headers: {request: {set: {x-team: a}}}
    fault: {abort: {httpStatus: 503, percentage: {value: 1}}}
    route:
    - {destination: {host: details, port: {number: 9080}, subset: v1}, weight: 80}
    - {destination: {host: details, port: {number: 9080}, subset: v2}, weight: 20}
"""


def _parse_entries(entries: bytes) -> list[rc.Route]:
    return list(rc.VirtualHost.FromString(entries).routes)


def test_encoded_routes_equal_translated_routes_on_every_port() -> None:
    push = push_of(SERVICES, CLIENT, DETAILS_VS)
    proxy = proxy_of(push, "client")
    scope = push.proxy_scope(proxy)
    vs = next(v for v in push.virtual_services.all if v.name == "details")
    memo = RouteMemo()
    mesh = frozenset({MESH_GATEWAY})
    for port in (9080, 9090):
        ports = mesh_service_ports(scope, port)
        ctx = RouteContext(push, proxy, scope, vs, port, mesh, False, ports)
        routes = http_routes(push, vs)
        assert _parse_entries(encoded_virtual_service(ctx, routes, memo)) == (
            translate_virtual_service(ctx, routes)
        )


def test_each_route_is_translated_once_for_all_ports_unless_the_port_changes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def counting(real: Any) -> Any:  # plain routes are encoded without route_body
        def count(ctx: RouteContext, *args: Any) -> Any:
            calls.append(ctx.port)
            return real(ctx, *args)

        return count

    for name in ("route_body", "encode_plain_route"):
        monkeypatch.setattr(encoded, name, counting(getattr(encoded, name)))
    push = push_of(SERVICES, CLIENT, DETAILS_VS)
    generate_sidecar_routes(push, proxy_of(push, "client"), ["9080", "9090"])
    # Three routes on 9080; on 9090 only the one without destination port is redone.
    assert sorted(calls) == [9080, 9080, 9080, 9090]


def test_decorators_name_the_listener_port_only_for_weighted_routes() -> None:
    push = push_of(SERVICES, CLIENT, DETAILS_VS)
    for port in (9080, 9090):
        routes = vhost(route_config(push, port), f"{DETAILS}:{port}")["routes"]
        assert [r["decorator"]["operation"] for r in routes] == [
            f"{DETAILS}:9080/*",
            f"{DETAILS}:{port}/any*",
            f"details:{port}/*",
        ]
        assert routes[1]["route"]["cluster"] == f"outbound|{port}|v1|{DETAILS}"


def test_assembled_route_configuration_equals_the_built_message() -> None:
    route = rc.Route(name="r", match=rc.RouteMatch(prefix="/"))
    route.route.cluster = "outbound|80||a.b.svc.cluster.local"
    encoded_route = encode_route(route, "vs", catch_all=True, extra=b"")
    vh = VirtualHostParts("a:80", ("a", "a.b"), encoded_route.entry(80) + route_entry(b""))
    tail = route_pb2.RouteConfiguration(
        validate_clusters=boolean(False),
        max_direct_response_body_size_bytes=u32(1024),
        ignore_port_in_host_matching=True,
    )
    built = route_configuration("80", [virtual_host_bytes(vh)], tail)
    expected_route = rc.Route()
    expected_route.CopyFrom(route)
    expected_route.decorator.operation = "a.b.svc.cluster.local:80/*"
    assert built == route_pb2.RouteConfiguration(
        name="80",
        virtual_hosts=[
            rc.VirtualHost(
                name="a:80",
                domains=["a", "a.b"],
                routes=[expected_route, rc.Route()],
                include_request_attempt_count=True,
            )
        ],
        validate_clusters=boolean(False),
        max_direct_response_body_size_bytes=u32(1024),
        ignore_port_in_host_matching=True,
    )


ROOT_WITH_MIRROR = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: default}
spec:
  hosts: [reviews]
  http:
  - mirror: {host: ratings}
    delegate: {name: team-a, namespace: other}
"""

DELEGATE = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: team-a, namespace: other}
spec:
  http:
  - route: [{destination: {host: details}}]
"""


def test_short_hosts_resolve_in_the_namespace_that_wrote_them() -> None:
    config = route_config(push_of(SERVICES, CLIENT, ROOT_WITH_MIRROR, DELEGATE), 9080)
    (route,) = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
    # The delegate's destination is resolved in its namespace, the mirror it inherits
    # from the root in the root's.
    assert route["route"]["cluster"] == f"outbound|9080||{DETAILS}"
    (mirror,) = route["route"]["request_mirror_policies"]
    assert mirror["cluster"] == "outbound|9080||ratings.default.svc.cluster.local"
