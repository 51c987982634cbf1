"""The ADS server in-process, spoken to over real gRPC: what only a protocol-level client can
show (NACK bookkeeping, Delta diffs, identity errors). Envoy itself: tests/e2e."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.rpc import status_pb2

from meshpilot.settings import Settings
from meshpilot.store import FileStore
from meshpilot.xds import debug
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.server import DiscoveryServer

APP = """apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.20
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
status: {podIP: 10.0.0.9}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
status: {podIP: 10.0.0.1}
"""
WEB_2 = """---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: default, labels: {app: web}}
status: {podIP: 10.0.0.2}
"""
NODE = "sidecar~10.0.0.9~client.default~default.svc.cluster.local"
WEB = "outbound|8080||web.default.svc.cluster.local"


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        (tmp / "app.yaml").write_text(APP)
        self.store = FileStore([tmp], poll_interval=0.02)
        self.store.load()
        settings = Settings(debounce_after=0.02, debounce_max=1)
        self.server = DiscoveryServer(self.store, settings)
        self.channel: grpc.aio.Channel | None = None
        self.watch: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Harness:
        port = await self.server.start("127.0.0.1", 0)
        self.watch = asyncio.create_task(self.store.watch())
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.channel is not None and self.watch is not None
        self.watch.cancel()
        await self.channel.close()
        await self.server.stop(0)

    def stream(self, delta: bool = False) -> Stream:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel)
        return Stream(stub, delta)

    def edit(self, text: str) -> None:
        tmp = self.dir / "app.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.dir / "app.yaml")


class Stream:
    def __init__(self, stub: Any, delta: bool) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        method = stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources
        self.call = method(self._requests())
        self.first = True

    async def _requests(self) -> AsyncIterator[Any]:
        while (req := await self.queue.get()) is not None:
            yield req

    def send(self, req: Any) -> None:
        if self.first:
            req.node.id = NODE
            self.first = False
        self.queue.put_nowait(req)

    async def recv(self, timeout: float = 3) -> Any:
        return await asyncio.wait_for(self.call.read(), timeout)

    def close(self) -> None:
        self.queue.put_nowait(None)


def run(tmp: Path, scenario: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        async with Harness(tmp) as harness:
            await scenario(harness)

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_sotw_ack_nack_and_names(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        assert cds.version_info.endswith("/1") and cds.nonce
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ENDPOINT, resource_names=[WEB]))
        eds = await s.recv()
        cla = endpoint_pb2.ClusterLoadAssignment.FromString(eds.resources[0].value)
        assert cla.cluster_name == WEB
        s.send(
            discovery_pb2.DiscoveryRequest(
                type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce, version_info=cds.version_info
            )
        )
        nack = discovery_pb2.DiscoveryRequest(
            type_url=TypeUrl.ENDPOINT, resource_names=[WEB], response_nonce=eds.nonce,
            error_detail=status_pb2.Status(code=3, message="endpoint rejected: test"),
        )  # fmt: skip
        s.send(nack)
        await asyncio.sleep(0.2)
        (entry,) = debug.syncz(h.server.connections.values())
        assert entry["proxy"] == "client.default"
        assert entry["types"]["cds"]["status"] == "SYNCED"
        assert entry["cluster_acked"] == cds.nonce
        assert entry["types"]["eds"]["status"] == "NACKED"
        assert entry["types"]["eds"]["last_error"] == "endpoint rejected: test"
        assert h.server.metrics.rejects.get("eds") == 1
        s.close()

    run(tmp_path, scenario)


def test_endpoint_change_is_an_eds_only_push(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ENDPOINT, resource_names=[WEB]))
        eds = await s.recv()
        for r in (cds, eds):
            names = [WEB] if r is eds else []
            s.send(discovery_pb2.DiscoveryRequest(
                type_url=r.type_url, resource_names=names, response_nonce=r.nonce,
                version_info=r.version_info,
            ))  # fmt: skip
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        assert pushed.type_url == TypeUrl.ENDPOINT
        cla = endpoint_pb2.ClusterLoadAssignment.FromString(pushed.resources[0].value)
        assert len(cla.endpoints[0].lb_endpoints) == 2
        with pytest.raises(TimeoutError):
            await s.recv(timeout=0.3)  # nothing else: no CDS, LDS, RDS
        assert not h.server.push_history[-1].full
        s.close()

    run(tmp_path, scenario)


def test_delta_sends_only_what_changed(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream(delta=True)
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        names = {r.name for r in cds.resources}
        assert WEB in names and all(r.version for r in cds.resources)
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce)
        )
        nope = "outbound|1||nope.default.svc.cluster.local"
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(
                type_url=TypeUrl.ENDPOINT, resource_names_subscribe=[WEB, nope]
            )
        )
        eds = await s.recv()
        assert [r.name for r in eds.resources] == [WEB]
        assert list(eds.removed_resources) == [nope]
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.ENDPOINT, response_nonce=eds.nonce)
        )
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        assert pushed.type_url == TypeUrl.ENDPOINT and [r.name for r in pushed.resources] == [WEB]
        assert not pushed.removed_resources
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(
                type_url=TypeUrl.ENDPOINT, response_nonce=pushed.nonce
            )
        )
        h.edit(APP.replace("8080", "9090"))  # the service changes port: a full push
        cds2 = await s.recv()
        assert cds2.type_url == TypeUrl.CLUSTER and WEB in cds2.removed_resources
        s.close()

    run(tmp_path, scenario)


def test_node_id_must_be_istios(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(h.channel)
        req = discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER)
        req.node.id = "not-an-istio-node"

        async def one() -> AsyncIterator[Any]:
            yield req
            await asyncio.sleep(1)

        call = stub.StreamAggregatedResources(one())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "4 parts" in (err.value.details() or "")

    run(tmp_path, scenario)


def test_connected_proxy_takes_its_pods_identity(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        req = discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER)
        req.node.metadata.update({"INTERCEPTION_MODE": "NONE", "ISTIO_VERSION": "1.27.1"})
        s.send(req)
        await s.recv()
        (conn,) = h.server.connections.values()
        assert conn.proxy.labels == {"app": "client"}
        assert conn.proxy.ip_addresses == ("10.0.0.9",)
        assert not conn.proxy.intercept and conn.proxy.istio_version == "1.27.1"
        assert h.server.metrics.xds_clients.get("1.27.1") == 1
        s.close()

    run(tmp_path, scenario)
