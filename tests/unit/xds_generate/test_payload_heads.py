"""Nested fields written as a header by payload length, then the payload (payload_heads.py),
equal the bytes the nested encoders or upb write: the trace decorator and `istio` metadata
of routes, and the `istio` Struct of a one-service cluster, at lengths on both sides of
every varint boundary."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.route.v3 import route_components_pb2 as rc
from google.protobuf import struct_pb2

from meshpilot.config.loader import load_text
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import build_push_context
from meshpilot.registry.model import Protocol, Resolution, Service, ServicePort
from meshpilot.xds.generate.clusters.common import istio_metadata, istio_metadata_struct
from meshpilot.xds.generate.payload_heads import PayloadHeads
from meshpilot.xds.generate.routes.context import RouteContext, mesh_service_ports
from meshpilot.xds.generate.routes.delegate import http_routes
from meshpilot.xds.generate.routes.http_route import (
    build_http_routes,
    metadata_field,
    route_matches,
)
from meshpilot.xds.generate.routes.plain_route import PlainParts, encode_plain_route
from meshpilot.xds.wire import length_delimited

LENGTHS = [0, 1, 100, 125, 126, 127, 128, 129, 200, 16250, 16383, 16384, 16385, 70000]


def _nested(payload: bytes) -> bytes:
    return length_delimited(1, length_delimited(2, b"key" + length_delimited(3, payload)))


@pytest.mark.parametrize("n", LENGTHS)
def test_heads_by_length_equal_the_nested_encoding(n: int) -> None:
    heads = PayloadHeads(_nested)
    first, second = bytes(range(256)) * (n // 256) + b"a" * (n % 256), b"z" * n
    assert heads(first) == _nested(first)
    assert heads(second) == _nested(second)  # the header worked out for `first`, reused


@pytest.mark.parametrize(
    "wrap",
    [
        lambda p: length_delimited(1, p) + b"tail",  # the payload is not last
        lambda p: length_delimited(1, p[:1] + p),  # the header depends on the content
    ],
)
def test_wraps_that_do_not_end_with_the_payload_are_refused(wrap: Callable[[bytes], bytes]) -> None:
    heads = PayloadHeads(wrap)
    with pytest.raises(ValueError):
        heads(b"payload")


# VirtualService names whose config path (`/apis/.../virtual-service/<name>`) and trace
# operation (`<name>:<port>/*`) fall on both sides of the one-byte length limit.
VS_NAMES = ["a", "r" * 40, "s" * 60, "t" * 61, "u" * 62, "v" * 63, "w" * 120, "x" * 200]


def _mesh() -> str:
    docs = [
        """
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: default}
spec:
  clusterIP: 10.96.0.10
  selector: {app: shop}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
status: {podIP: 10.1.0.5}
"""
    ]
    for name in VS_NAMES:
        docs.append(
            f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: default}}
spec:
  hosts: [shop]
  http:
  - match: [{{uri: {{prefix: /{name}}}}}]
    route: [{{destination: {{host: shop, port: {{number: 8080}}}}}}]
  - route:
    - {{destination: {{host: shop}}, weight: 60}}
    - {{destination: {{host: shop, port: {{number: 8080}}}}, weight: 40}}
"""
        )
    return "---".join(docs)


def test_route_decorators_and_metadata_equal_the_routes_built_through_upb() -> None:
    loaded = load_text(_mesh(), "mesh.yaml")
    assert not loaded.errors, loaded.errors
    push = build_push_context(loaded.objects, loaded.mesh)
    pod = push.pod("default", "client")
    assert pod is not None
    proxy = proxy_from_pod(pod, ProxyType.SIDECAR)
    scope = push.proxy_scope(proxy)
    gateways = frozenset({MESH_GATEWAY})
    parts = PlainParts()
    checked = 0
    for vs in push.virtual_services.all:
        for port in (8080, 80, 15001):  # operations of several lengths per name
            ports = mesh_service_ports(scope, port)
            ctx = RouteContext(push, proxy, scope, vs, port, gateways, False, ports)
            expected = build_http_routes(push, proxy, vs, port, gateways)
            extra = metadata_field(push, vs)
            assert rc.Route.FromString(extra).metadata == expected[0].metadata
            for i, (_, route, _, match) in enumerate(route_matches(http_routes(push, vs))):
                encoded = encode_plain_route(ctx, route, match, extra, parts)
                assert encoded is not None
                entry = rc.VirtualHost.FromString(encoded.entry(port)).routes[0]
                assert entry == expected[i]
                checked += 1
    assert checked == len(VS_NAMES) * 3 * 2


def _service(name: str, namespace: str, kube_name: str) -> Service:
    return Service(
        hostname=f"{name}.{namespace}.svc.cluster.local",
        namespace=namespace,
        ports=(ServicePort("http", 80, Protocol.HTTP),),
        resolution=Resolution.CLIENT_SIDE_LB,
        kube_name=kube_name,
    )


@pytest.mark.parametrize("name", ["a", "b" * 30, "c" * 33, "d" * 34, "e" * 80, "f" * 200])
@pytest.mark.parametrize("rule", [None, ("shop", "r"), ("shop", "g" * 150)])
@pytest.mark.parametrize("external", [False, True])
def test_one_service_metadata_struct_matches_the_message_builder(
    name: str, rule: tuple[str, str] | None, external: bool
) -> None:
    services = [_service(name, "shop", name if len(name) % 2 else "")]
    holder = cluster_pb2.Cluster()
    istio_metadata(holder, services, rule, external=external)
    encoded = istio_metadata_struct(services, rule, external=external)
    assert struct_pb2.Struct.FromString(encoded) == holder.metadata.filter_metadata["istio"]
    # Field for field what the several-service path writes (the same encoders, no table).
    two = istio_metadata_struct([*services, _service("x", "y", "")], rule, external=external)
    parsed = struct_pb2.Struct.FromString(two)
    assert (
        parsed.fields["services"].list_value.values[0]
        == (holder.metadata.filter_metadata["istio"].fields["services"].list_value.values[0])
    )
