"""A generator that raises for one proxy breaks neither its stream nor the push to the others
(issue 18, item 8): the failed type is not sent (the proxy keeps its last one), the failure is
reported with the object being translated, and the next push sends the type again.

The generator bug is injected (a cluster generator that fails for one proxy while it
translates one Service); the server, its streams and the store are the real ones."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds import debug
from meshpilot.xds.generate import GENERATORS, generator
from meshpilot.xds.protos import TypeUrl
from tests.unit.xds_server.test_server import APP, WEB_2, Harness, Stream, run

API = """---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec:
  clusterIP: 10.96.0.30
  selector: {app: api}
  ports: [{name: http, port: 9090}]
"""
API_CLUSTER = "outbound|9090||api.default.svc.cluster.local"
WEB_NODE = "sidecar~10.0.0.1~web-1.default~default.svc.cluster.local"
BROKEN = {"on": False}


def _broken_clusters(push: PushContext, proxy: Proxy, names: Collection[str] | None) -> list[Any]:
    """The cluster generator, failing for client.default while it translates Service api."""
    if BROKEN["on"] and proxy.id == "client.default":
        for obj in push.of_kind(Kind.SERVICE):
            if obj.name == "api":
                raise ValueError("Value out of range: 1099511627776")
    return REAL(push, proxy, names)


REAL = generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)


class NodeStream(Stream):
    def __init__(self, stub: Any, node: str, delta: bool = False) -> None:
        super().__init__(stub, delta)
        self.node = node

    def send(self, req: Any) -> None:
        if self.first:
            req.node.id = self.node
            self.first = False
        self.queue.put_nowait(req)


def _clusters(response: Any) -> set[str]:
    return {cluster_pb2.Cluster.FromString(r.value).name for r in response.resources}


async def _nothing_within(stream: Stream, seconds: float) -> asyncio.Task[Any]:
    """Wait `seconds` for a response that must not come; the read goes on (cancelling it
    would cancel the call) and is returned."""
    read = asyncio.ensure_future(stream.call.read())
    done, _ = await asyncio.wait({read}, timeout=seconds)
    assert not done, read.result()
    return read


def _ack(stream: Stream, response: Any) -> None:
    stream.send(
        discovery_pb2.DiscoveryRequest(
            type_url=response.type_url,
            response_nonce=response.nonce,
            version_info=response.version_info,
        )
    )


@pytest.fixture
def broken_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GENERATORS, (TypeUrl.CLUSTER, ProxyType.SIDECAR), _broken_clusters)
    monkeypatch.setitem(BROKEN, "on", False)


@pytest.mark.usefixtures("broken_generator")
def test_one_proxy_failing_keeps_its_stream_and_the_others_get_the_push(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        from envoy.service.discovery.v3 import ads_pb2_grpc

        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(h.channel)
        client, web = h.stream(), NodeStream(stub, WEB_NODE)
        for s in (client, web):
            s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
            _ack(s, await s.recv())
        BROKEN["on"] = True
        h.edit(APP + API)
        pushed = await web.recv()  # the other proxy gets its push
        assert pushed.type_url == TypeUrl.CLUSTER and API_CLUSTER in _clusters(pushed)
        _ack(web, pushed)
        pending = await _nothing_within(client, 0.5)  # the failing one keeps its last
        [entry] = [
            e for e in debug.syncz(h.server.connections.values()) if e["proxy"] == "client.default"
        ]
        error = entry["generation_errors"]["cds"]
        assert error.startswith("generating cds for client.default failed while translating "
                                "Service default/api (")  # fmt: skip
        assert error.endswith("ValueError: Value out of range: 1099511627776")
        assert h.server.metrics.internal_errors.get("cds") >= 1
        # Fixed: the next push (an endpoint change) sends the failed type again.
        BROKEN["on"] = False
        h.edit(APP + API + WEB_2)
        retried = await asyncio.wait_for(pending, 3)
        while retried.type_url != TypeUrl.CLUSTER:
            retried = await client.recv()
        assert API_CLUSTER in _clusters(retried)
        [entry] = [
            e for e in debug.syncz(h.server.connections.values()) if e["proxy"] == "client.default"
        ]
        assert "generation_errors" not in entry
        client.close()
        web.close()

    with caplog.at_level(logging.ERROR, logger="meshpilot.xds.generation_errors"):
        run(tmp_path, scenario)
    [record] = [r for r in caplog.records if "while translating Service default/api" in r.message]
    assert "not sent to client.default-" in record.getMessage()
    assert "which keeps its last cds" in record.getMessage()


@pytest.mark.usefixtures("broken_generator")
def test_a_failing_first_request_leaves_the_stream_open(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        (tmp_path / "app.yaml").write_text(APP + API)
        h.store.load()
        await asyncio.sleep(0.1)
        BROKEN["on"] = True
        client = h.stream()
        client.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        pending = await _nothing_within(client, 0.5)
        assert h.server.connections  # still connected
        client.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.LISTENER))
        listeners = await asyncio.wait_for(pending, 3)
        assert listeners.type_url == TypeUrl.LISTENER and listeners.resources
        client.close()

    run(tmp_path, scenario)


@pytest.mark.usefixtures("broken_generator")
def test_delta_streams_contain_the_failure_too(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        from envoy.service.discovery.v3 import ads_pb2_grpc

        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(h.channel)
        client, web = h.stream(delta=True), NodeStream(stub, WEB_NODE, delta=True)
        for s in (client, web):
            s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER))
            first = await s.recv()
            s.send(_delta_ack(first))
        BROKEN["on"] = True
        h.edit(APP + API)
        pushed = await web.recv()
        assert API_CLUSTER in {r.name for r in pushed.resources}
        web.send(_delta_ack(pushed))
        pending = await _nothing_within(client, 0.5)
        BROKEN["on"] = False
        h.edit(APP + API + WEB_2)
        retried = await asyncio.wait_for(pending, 3)
        assert retried.type_url == TypeUrl.CLUSTER
        assert API_CLUSTER in {r.name for r in retried.resources}
        client.close()
        web.close()

    run(tmp_path, scenario)


def _delta_ack(response: Any) -> discovery_pb2.DeltaDiscoveryRequest:
    return discovery_pb2.DeltaDiscoveryRequest(
        type_url=response.type_url, response_nonce=response.nonce
    )
