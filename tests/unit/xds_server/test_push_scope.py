"""What a push sends, over real gRPC: only the changed services' assignments for an endpoint
change, only the affected types for a config change, and the SotW bytes protobuf would send."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.resources import Resource, sotw_response
from tests.unit.xds_server.test_server import WEB, Harness, Stream, run

API = """---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec:
  clusterIP: 10.96.0.21
  selector: {app: api}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, namespace: default, labels: {app: api}}
status: {podIP: 10.0.0.5}
"""
API_2 = """---
apiVersion: v1
kind: Pod
metadata: {name: api-2, namespace: default, labels: {app: api}}
status: {podIP: 10.0.0.6}
"""
VS = """---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: default}}
spec:
  hosts: [web]
  http:
  - timeout: {timeout}
    route:
    - destination: {{host: web}}
"""
API_CLUSTER = "outbound|8080||api.default.svc.cluster.local"


async def _sync(h: Harness, s: Stream) -> None:
    """Subscribe as Envoy does (CDS, EDS for both services, LDS, RDS) and ACK everything."""
    s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
    eds_names = [WEB, API_CLUSTER]
    plan = [(TypeUrl.ENDPOINT, eds_names), (TypeUrl.LISTENER, []), (TypeUrl.ROUTE, ["8080"])]
    ack = await s.recv()
    for type_url, names in plan:
        s.send(discovery_pb2.DiscoveryRequest(
            type_url=ack.type_url, response_nonce=ack.nonce, version_info=ack.version_info,
            resource_names=[] if ack.type_url == TypeUrl.CLUSTER else ack_names(ack, plan),
        ))  # fmt: skip
        s.send(discovery_pb2.DiscoveryRequest(type_url=type_url, resource_names=names))
        ack = await s.recv()
    s.send(discovery_pb2.DiscoveryRequest(
        type_url=ack.type_url, response_nonce=ack.nonce, version_info=ack.version_info,
        resource_names=["8080"],
    ))  # fmt: skip


def _extra(tmp: Path, text: str) -> None:
    """A second watched file next to the harness's app.yaml, replaced atomically."""
    (tmp / "extra.tmp").write_text(text)
    (tmp / "extra.tmp").replace(tmp / "extra.yaml")


def ack_names(
    resp: discovery_pb2.DiscoveryResponse, plan: list[tuple[str, list[str]]]
) -> list[str]:
    return next((names for t, names in plan if t == resp.type_url), [])


def test_endpoint_push_carries_only_the_changed_service(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        await _sync(h, s)
        _extra(tmp_path, API + API_2)
        pushed = await s.recv()
        assert pushed.type_url == TypeUrl.ENDPOINT
        clas = [endpoint_pb2.ClusterLoadAssignment.FromString(r.value) for r in pushed.resources]
        assert [c.cluster_name for c in clas] == [API_CLUSTER]  # web's are left as they are
        assert len(clas[0].endpoints[0].lb_endpoints) == 2
        with pytest.raises(TimeoutError):
            await s.recv(timeout=0.3)
        assert h.store.files_parsed == 3  # app.yaml and extra.yaml, then extra.yaml again
        s.close()

    _extra(tmp_path, API)
    run(tmp_path, scenario)


def test_virtual_service_change_pushes_routes_only(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        await _sync(h, s)
        _extra(tmp_path, VS.format(timeout="7s"))
        pushed = await s.recv()
        assert pushed.type_url == TypeUrl.ROUTE  # HTTP routes change neither CDS, EDS nor LDS
        assert [r.type_url for r in pushed.resources] == [TypeUrl.ROUTE]
        with pytest.raises(TimeoutError):
            await s.recv(timeout=0.3)
        s.close()

    _extra(tmp_path, VS.format(timeout="5s"))
    run(tmp_path, scenario)


def test_sotw_wire_bytes_are_protobufs() -> None:
    from meshpilot.xds.resources import _head

    body = b"\x0a\x03web"
    resources = [Resource("web", body, "v", _head(TypeUrl.CLUSTER, body))]
    want = discovery_pb2.DiscoveryResponse(
        version_info="2026-01-01T00:00:00Z/3",
        type_url=TypeUrl.CLUSTER,
        nonce="abc",
        resources=[any_pb2.Any(type_url=TypeUrl.CLUSTER, value=body)],
    )
    want.control_plane.identifier = "meshpilot"
    got = sotw_response("2026-01-01T00:00:00Z/3", TypeUrl.CLUSTER, "abc", resources)
    assert got == want.SerializeToString(deterministic=True)


def test_route_configs_are_built_while_envoy_applies_listeners(tmp_path: Path) -> None:
    """After an LDS answer, the RDS answer Envoy will ask for next is built ahead (B4)."""

    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.LISTENER))
        await s.recv()
        await asyncio.sleep(0.2)
        serialized = h.server.push_context.memo.get("xds.serialized", {})
        assert isinstance(serialized, dict)
        built = {
            r.name
            for msg, r in serialized.values()
            if isinstance(msg, route_pb2.RouteConfiguration)
        }
        assert built == {"8080"}  # before any RDS request
        s.close()

    run(tmp_path, scenario)


VS_TCP = """---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web]
  tcp:
  - route:
    - destination: {host: web}
"""


def test_virtual_service_losing_tcp_routes_pushes_listeners(tmp_path: Path) -> None:
    """Relevance compares the previous push with the new one: the old version's tcp routes
    make LDS affected although the new version has HTTP routes only."""

    async def scenario(h: Harness) -> None:
        s = h.stream()
        await _sync(h, s)
        _extra(tmp_path, VS.format(timeout="7s"))
        first = await s.recv()
        s.send(discovery_pb2.DiscoveryRequest(
            type_url=first.type_url, response_nonce=first.nonce,
            version_info=first.version_info, resource_names=[],
        ))  # fmt: skip
        second = await s.recv()
        assert [first.type_url, second.type_url] == [TypeUrl.LISTENER, TypeUrl.ROUTE]
        s.close()

    _extra(tmp_path, VS_TCP)
    run(tmp_path, scenario)
