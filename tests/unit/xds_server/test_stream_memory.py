"""What a stream keeps once its answers are out (B3: 1000 streams of megabytes each).

Over real gRPC: once a client has its responses, the server holds no serialized response for
it (gRPC's handler loop and the generators between it and the stream keep their last item
until the next one, which for an idle stream is the next push). ACKs that repeat a large
subscription are recognised without rebuilding the set of names.
"""

from __future__ import annotations

import asyncio
import inspect
import tracemalloc
from pathlib import Path

import pytest
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.xds import debug, grpc_service, resources
from meshpilot.xds.connection import Subscription, parse_request, request_names
from meshpilot.xds.protos import TypeUrl
from tests.unit.xds_server.test_server import WEB, Harness, run


def _response_lines() -> set[tuple[str, int]]:
    """Where serialized responses are allocated (the join in `sotw_response`)."""
    lines, first = inspect.getsourcelines(resources.sotw_response)
    return {(resources.__file__, first + i) for i, text in enumerate(lines) if 'b"".join' in text}


def _live_response_bytes() -> int:
    where = _response_lines()
    snapshot = tracemalloc.take_snapshot()
    return sum(
        stat.size
        for stat in snapshot.statistics("lineno")
        if (stat.traceback[0].filename, stat.traceback[0].lineno) in where
    )


def test_no_response_outlives_its_sending(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ENDPOINT, resource_names=[WEB]))
        eds = await s.recv()
        for resp, names in ((cds, []), (eds, [WEB])):
            s.send(
                discovery_pb2.DiscoveryRequest(
                    type_url=resp.type_url,
                    resource_names=names,
                    response_nonce=resp.nonce,
                    version_info=resp.version_info,
                )
            )
        await asyncio.sleep(0.2)  # the ACKs are handled; the stream waits for a push
        assert _live_response_bytes() == 0
        s.close()

    tracemalloc.start(1)
    try:
        run(tmp_path, scenario)
    finally:
        tracemalloc.stop()


def _request(names: list[str], nonce: str, version: str) -> discovery_pb2.DiscoveryRequest:
    return discovery_pb2.DiscoveryRequest(
        type_url=TypeUrl.ENDPOINT, resource_names=names, response_nonce=nonce, version_info=version
    )


def test_an_ack_repeating_the_subscription_yields_the_same_set() -> None:
    names = [f"outbound|8080||svc-{i}.default.svc.cluster.local" for i in range(100)]
    first = request_names(_request(names, "n1", "v1"))
    ack = _request(names, "n2", "v2")
    again = request_names(ack)
    assert again is first and again == frozenset(names)
    assert (ack.response_nonce, ack.version_info) == ("n2", "v2")  # the request is intact
    changed = request_names(_request([*names[1:], "outbound|9090||x.default.svc.cluster.local"],
                                     "n3", "v3"))  # fmt: skip
    assert changed != first and "outbound|9090||x.default.svc.cluster.local" in changed
    few = request_names(_request(names[:3], "n4", "v4"))
    assert few == frozenset(names[:3])


def _node(pod: str, ip: str) -> str:
    return f"sidecar~{ip}~{pod}.default~default.svc.cluster.local"


def test_proxies_of_one_class_share_one_response(tmp_path: Path) -> None:
    """From the second proxy of a class on, the same resources go out as the same bytes
    (nonce included); a stream never gets the nonce it got last."""

    async def scenario(h: Harness) -> None:
        nonces = []
        for pod, ip in (("client", "10.0.0.9"), ("web-1", "10.0.0.1"), ("ghost", "10.0.0.50")):
            s = h.stream()
            req = discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ENDPOINT, resource_names=[WEB])
            req.node.id = _node(pod, ip)
            s.first = False
            s.send(req)
            eds = await s.recv()
            assert [r.type_url for r in eds.resources] == [TypeUrl.ENDPOINT]
            nonces.append(eds.nonce)
            if pod == "ghost":  # asks again (as if it had lost the answer): a new nonce
                again = discovery_pb2.DiscoveryRequest(
                    type_url=TypeUrl.ENDPOINT, resource_names=[WEB]
                )
                s.send(again)
                repeat = await s.recv()
                assert repeat.resources == eds.resources and repeat.nonce != eds.nonce
            s.close()
        first, second, third = nonces
        assert first != second and second == third

    run(tmp_path, scenario)


def test_a_repeated_large_subscription_is_read_from_its_bytes() -> None:
    names = [f"outbound|8080||svc-{i}.ns-{i % 10}.svc.cluster.local" for i in range(400)]
    first = parse_request(_request(names, "n1", "2026-11-23T00:00:00Z/1").SerializeToString())
    ack = parse_request(_request(names, "n2", "2026-11-23T00:00:01Z/2").SerializeToString())
    assert isinstance(first, Subscription) and isinstance(ack, Subscription)
    assert ack.names is first.names and ack.names == frozenset(names)
    assert (ack.request.type_url, ack.request.response_nonce, ack.request.version_info) == (
        TypeUrl.ENDPOINT,
        "n2",
        "2026-11-23T00:00:01Z/2",
    )
    nack = _request(names, "n3", "v3")
    nack.error_detail.message = "rejected"
    with_node = _request(names, "", "")
    with_node.node.id = "sidecar~10.0.0.1~a.default~default.svc.cluster.local"
    for request in (nack, with_node):
        parsed = parse_request(request.SerializeToString())
        assert parsed == request  # read in full, as it is
    other = parse_request(_request(names[1:], "n4", "v4").SerializeToString())
    assert isinstance(other, Subscription) and other.names == frozenset(names[1:])


def test_a_large_subscription_is_acked_over_grpc(tmp_path: Path) -> None:
    names = [WEB, *(f"outbound|8080||gone-{i}.default.svc.cluster.local" for i in range(300))]

    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(_request(names, "", ""))
        eds = await s.recv()
        for _ in range(2):  # the ACK, then the same again (stale nonce): no answer to either
            s.send(_request(names, eds.nonce, eds.version_info))
        await asyncio.sleep(0.3)
        (entry,) = debug.syncz(h.server.connections.values())
        assert entry["types"]["eds"]["status"] == "SYNCED"
        assert entry["types"]["eds"]["nonce_sent"] == eds.nonce  # nothing sent since
        s.send(_request(names[:1], eds.nonce, eds.version_info))  # fewer names: no answer
        s.send(_request([*names, "outbound|9090||web.default.svc.cluster.local"], eds.nonce, ""))
        again = await s.recv()  # one name more: answered
        assert again.nonce != eds.nonce
        s.close()

    run(tmp_path, scenario)


def test_sent_bytes_count_until_the_client_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gRPC reports a message written once it is in its own buffers: the budget lets the
    bytes go only when the client's next request shows it has them."""
    monkeypatch.setattr(grpc_service, "LARGE_RESPONSE", 0)  # every response is large here

    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        await asyncio.sleep(0.1)
        assert h.server.budget.in_flight == cds.ByteSize()
        s.send(
            discovery_pb2.DiscoveryRequest(
                type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce, version_info=cds.version_info
            )
        )
        await asyncio.sleep(0.1)
        assert h.server.budget.in_flight == 0
        s.close()

    run(tmp_path, scenario)
