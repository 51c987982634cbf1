"""Delta responses assembled on the wire: the bytes protobuf would write, shared by the
streams of one proxy class (a nonce of their own each), and ACKs that change no subscription
recorded without touching the watched names. Real gRPC against the real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

from meshpilot.xds import debug
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.resources import CONTROL_PLANE, delta_response, generate_resources
from tests.unit.xds_server.test_server import APP, NODE, WEB, WEB_2, Harness, run

ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
NODE_2 = "sidecar~10.0.0.8~client-2.default~default.svc.cluster.local"
CLIENT_2 = """apiVersion: v1
kind: Pod
metadata: {name: client-2, namespace: default, labels: {app: client}}
status: {podIP: 10.0.0.8}
"""
WEB_3 = WEB_2.replace("web-2", "web-3").replace("10.0.0.2", "10.0.0.3")
_DDR = discovery_pb2.DeltaDiscoveryRequest
_RESP = discovery_pb2.DeltaDiscoveryResponse


def _expected(version: str, type_url: str, nonce: str, resources: Any, removed: Any) -> bytes:
    msg = _RESP(system_version_info=version, type_url=type_url, nonce=nonce)
    msg.control_plane.identifier = CONTROL_PLANE
    for r in resources:
        res = msg.resources.add(name=r.name, version=r.version)
        res.resource.type_url = type_url
        res.resource.value = r.body
    msg.removed_resources.extend(removed)
    return bytes(msg.SerializeToString(deterministic=True))


def test_delta_response_bytes_are_protobufs(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        push = h.server.push_context
        node = parse_node(_DDR(node={"id": NODE}).node)
        proxy = proxy_for(push, node)
        for type_url in (TypeUrl.CLUSTER, TypeUrl.ENDPOINT, TypeUrl.LISTENER):
            names = [WEB] if type_url == TypeUrl.ENDPOINT else None
            resources = generate_resources(push, proxy, type_url, names)
            assert resources
            for removed in ([], ["gone|1", "gone|2"]):
                # the first of a kind, the second (kept), the third (shared): same bytes
                nonces = []
                for _ in range(3):
                    nonce, got = delta_response(push, type_url, resources, removed, "")
                    assert got == _expected(push.version, type_url, nonce, resources, removed)
                    nonces.append(nonce)
                # a stream is never sent the nonce it was sent last
                again, got = delta_response(push, type_url, resources, removed, nonces[-1])
                assert again != nonces[-1]
                assert got == _expected(push.version, type_url, again, resources, removed)
        nonce, empty = delta_response(push, TypeUrl.ROUTE, [], [], "")
        assert empty == _expected(push.version, TypeUrl.ROUTE, nonce, [], [])

    run(tmp_path, scenario)


class RawStream:
    """A Delta ADS stream whose responses arrive as the bytes on the wire."""

    def __init__(self, h: Harness, node_id: str) -> None:
        assert h.channel is not None
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.node_id = node_id
        method = h.channel.stream_stream(ADS, request_serializer=None, response_deserializer=None)
        self.call = method(self._requests())

    async def _requests(self) -> AsyncIterator[bytes]:
        while (req := await self.queue.get()) is not None:
            yield req

    def send(self, req: discovery_pb2.DeltaDiscoveryRequest) -> None:
        if self.node_id:
            req.node.id, self.node_id = self.node_id, ""
        self.queue.put_nowait(req.SerializeToString())

    async def recv(self) -> tuple[bytes, discovery_pb2.DeltaDiscoveryResponse]:
        raw = await asyncio.wait_for(self.call.read(), 3)
        assert isinstance(raw, bytes)
        return raw, _RESP.FromString(raw)

    async def sync_eds(self) -> None:
        self.send(_DDR(type_url=TypeUrl.CLUSTER))
        _, cds = await self.recv()
        self.send(_DDR(type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce))
        self.send(_DDR(type_url=TypeUrl.ENDPOINT, resource_names_subscribe=[WEB]))
        _, eds = await self.recv()
        assert [r.name for r in eds.resources] == [WEB]
        self.send(_DDR(type_url=TypeUrl.ENDPOINT, response_nonce=eds.nonce))

    def close(self) -> None:
        self.queue.put_nowait(None)


def _canonical(raw: bytes) -> bool:
    return bytes(_RESP.FromString(raw).SerializeToString(deterministic=True)) == raw


def test_endpoint_push_is_shared_with_a_nonce_per_stream(tmp_path: Path) -> None:
    (tmp_path / "client-2.yaml").write_text(CLIENT_2)

    async def scenario(h: Harness) -> None:
        one, two = RawStream(h, NODE), RawStream(h, NODE_2)
        await one.sync_eds()
        await two.sync_eds()
        await asyncio.sleep(0.1)  # the ACKs are in
        conns = {c.node.node_id: c for c in h.server.connections.values()}
        watched = {n: c.watched[TypeUrl.ENDPOINT] for n, c in conns.items()}
        assert all(w.nonce_acked == w.nonce_sent for w in watched.values())
        # One state for both (xds/delta_versions.py `Versions`): not a dict of versions per stream.
        assert conns[NODE].known[TypeUrl.ENDPOINT] is conns[NODE_2].known[TypeUrl.ENDPOINT]

        h.edit(APP + WEB_2)
        (raw_1, push_1), (raw_2, push_2) = await one.recv(), await two.recv()
        assert push_1.type_url == push_2.type_url == TypeUrl.ENDPOINT
        assert _canonical(raw_1) and _canonical(raw_2)
        assert push_1.nonce != push_2.nonce
        assert push_1.resources == push_2.resources and [r.name for r in push_1.resources] == [WEB]
        cla = endpoint_pb2.ClusterLoadAssignment.FromString(push_1.resources[0].resource.value)
        assert len(cla.endpoints[0].lb_endpoints) == 2
        assert push_1.system_version_info == h.server.push_context.version
        assert conns[NODE].known[TypeUrl.ENDPOINT] is conns[NODE_2].known[TypeUrl.ENDPOINT]

        # An ACK naming its nonce only: recorded, the subscription not copied.
        one.send(_DDR(type_url=TypeUrl.ENDPOINT, response_nonce=push_1.nonce))
        # A NACK: recorded, and the rejected assignment is no longer counted as known.
        nack = _DDR(type_url=TypeUrl.ENDPOINT, response_nonce=push_2.nonce)
        nack.error_detail.CopyFrom(status_pb2.Status(code=3, message="rejected: test"))
        two.send(nack)
        await asyncio.sleep(0.2)
        acked = conns[NODE].watched[TypeUrl.ENDPOINT]
        assert acked.names is watched[NODE].names
        assert acked.nonce_acked == push_1.nonce == acked.nonce_sent
        assert WEB in conns[NODE].known[TypeUrl.ENDPOINT]
        assert WEB not in conns[NODE_2].known[TypeUrl.ENDPOINT]  # its state is its own now
        assert conns[NODE].known[TypeUrl.ENDPOINT][WEB] == push_1.resources[0].version
        status = {e["proxy"]: e["types"]["eds"] for e in debug.syncz(conns.values())}
        assert status["client.default"]["status"] == "SYNCED"
        assert status["client-2.default"]["status"] == "NACKED"
        assert status["client-2.default"]["last_error"] == "rejected: test"

        # The next push: the same assignment to both, again a nonce each.
        h.edit(APP + WEB_2 + WEB_3)
        (raw_1, push_1), (raw_2, push_2) = await one.recv(), await two.recv()
        assert _canonical(raw_1) and _canonical(raw_2)
        assert push_1.nonce != push_2.nonce and push_1.resources == push_2.resources
        one.close()
        two.close()

    run(tmp_path, scenario)


def test_unchanged_resource_is_not_resent_and_removal_is_named(tmp_path: Path) -> None:
    """initial_resource_versions: what the client has at its version is not sent again."""

    async def scenario(h: Harness) -> None:
        first = RawStream(h, NODE)
        first.send(_DDR(type_url=TypeUrl.CLUSTER))
        _, cds = await first.recv()
        versions = {r.name: r.version for r in cds.resources}
        first.close()

        again = RawStream(h, NODE)  # a reconnect naming what it has
        stale = "outbound|1||gone.default.svc.cluster.local"
        again.send(
            _DDR(
                type_url=TypeUrl.CLUSTER,
                initial_resource_versions={**versions, WEB: "old", stale: "v0"},
            )
        )
        raw, cds = await again.recv()
        assert _canonical(raw)
        assert [r.name for r in cds.resources] == [WEB]
        assert list(cds.removed_resources) == [stale]
        again.close()

    run(tmp_path, scenario)


def test_unsubscribed_then_resubscribed_resource_is_sent_again(tmp_path: Path) -> None:
    (tmp_path / "client-2.yaml").write_text(CLIENT_2)

    async def scenario(h: Harness) -> None:
        one, two = RawStream(h, NODE), RawStream(h, NODE_2)
        await one.sync_eds()
        await two.sync_eds()
        await asyncio.sleep(0.1)
        conns = {c.node.node_id: c for c in h.server.connections.values()}
        shared = conns[NODE_2].known[TypeUrl.ENDPOINT]
        one.send(_DDR(type_url=TypeUrl.ENDPOINT, resource_names_unsubscribe=[WEB]))
        one.send(_DDR(type_url=TypeUrl.ENDPOINT, resource_names_subscribe=[WEB]))
        raw, again = await one.recv()
        assert _canonical(raw) and [r.name for r in again.resources] == [WEB]
        # the other stream's state is untouched by the first one's own changes
        assert conns[NODE_2].known[TypeUrl.ENDPOINT] is shared and WEB in shared
        one.close()
        two.close()

    run(tmp_path, scenario)
