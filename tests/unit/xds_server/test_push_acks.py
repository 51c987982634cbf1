"""ACKs of pushes over real gRPC, SotW and Delta: a plain ACK is recorded even when the
stream's reader records it without waking the stream's task (xds/stream_loop.py
`take_ack`), a stale one is not taken for the ACK of the last response, and a stream
whose push was ACKed gets the next push (the push was reported done)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.push_context import PushContext
from meshpilot.xds import debug
from meshpilot.xds.protos import TypeUrl
from tests.unit.xds_server.test_server import APP, WEB, WEB_2, Harness, Stream, run

# Enough names that a SotW ACK is recognised from its bytes (xds/connection.py
# `parse_request`), as an Envoy's EDS ACK of a large mesh is.
NAMES = [WEB, *(f"outbound|8080||svc-{i}.default.svc.cluster.local" for i in range(200))]
_DR = discovery_pb2.DiscoveryRequest
_DDR = discovery_pb2.DeltaDiscoveryRequest


def ack(delta: bool, response: Any, names: list[str]) -> Any:
    if delta:
        return _DDR(type_url=response.type_url, response_nonce=response.nonce)
    return _DR(
        type_url=response.type_url,
        resource_names=names,
        response_nonce=response.nonce,
        version_info=response.version_info,
    )


async def synced(h: Harness, delta: bool) -> tuple[Stream, Any]:
    """A stream with clusters and assignments received and ACKed; returns the EDS answer."""
    s = h.stream(delta=delta)
    s.send(_DDR(type_url=TypeUrl.CLUSTER) if delta else _DR(type_url=TypeUrl.CLUSTER))
    cds = await s.recv()
    s.send(ack(delta, cds, []))
    if delta:
        s.send(_DDR(type_url=TypeUrl.ENDPOINT, resource_names_subscribe=NAMES))
    else:
        s.send(_DR(type_url=TypeUrl.ENDPOINT, resource_names=NAMES))
    eds = await s.recv()
    s.send(ack(delta, eds, NAMES))
    await asyncio.sleep(0.1)
    return s, eds


def eds_status(h: Harness) -> dict[str, Any]:
    (entry,) = debug.syncz(h.server.connections.values())
    types: dict[str, Any] = entry["types"]
    return {**types["eds"], "acked": entry["endpoint_acked"]}


def endpoints(response: Any) -> int:
    (res,) = response.resources
    raw = res.resource.value if hasattr(res, "resource") else res.value
    cla = endpoint_pb2.ClusterLoadAssignment.FromString(raw)
    return sum(len(group.lb_endpoints) for group in cla.endpoints)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_pushes_are_acked_and_the_next_push_follows(tmp_path: Path, delta: bool) -> None:
    async def scenario(h: Harness) -> None:
        s, _ = await synced(h, delta)
        for edit, count in ((APP + WEB_2, 2), (APP, 1), (APP + WEB_2, 2)):
            h.edit(edit)
            pushed = await s.recv()
            assert pushed.type_url == TypeUrl.ENDPOINT and endpoints(pushed) == count
            assert eds_status(h)["status"] == "STALE"  # sent, not ACKed yet
            s.send(ack(delta, pushed, NAMES))
            await asyncio.sleep(0.1)
            status = eds_status(h)
            assert status["status"] == "SYNCED" and status["acked"] == pushed.nonce
            timeline = h.server.timelines.latest()
            assert timeline is not None and timeline.acked == 1 and not timeline.full
        s.close()

    run(tmp_path, scenario)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_a_stale_ack_is_not_the_ack_of_the_push(tmp_path: Path, delta: bool) -> None:
    async def scenario(h: Harness) -> None:
        s, eds = await synced(h, delta)
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        s.send(ack(delta, eds, NAMES))  # the ACK of the answer before the push
        await asyncio.sleep(0.1)
        status = eds_status(h)
        assert status["status"] == "STALE" and status["acked"] == eds.nonce
        s.send(ack(delta, pushed, NAMES))
        await asyncio.sleep(0.1)
        assert eds_status(h)["acked"] == pushed.nonce
        s.close()

    run(tmp_path, scenario)


def test_collection_resumes_once_an_endpoint_push_is_out(tmp_path: Path) -> None:
    """The collector pauses while an EDS-only push goes out (xds/server.py) and is never
    left off: on again once the queue is idle."""
    assert gc.isenabled()

    async def scenario(h: Harness) -> None:
        s, _ = await synced(h, delta=True)
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        assert endpoints(pushed) == 2 and not h.server.push_history[-1].full
        for _ in range(40):
            if gc.isenabled():
                break
            await asyncio.sleep(0.05)
        assert gc.isenabled() and h.server.queue.idle
        s.close()

    run(tmp_path, scenario)
    assert gc.isenabled()


def alive_push_versions() -> list[str]:
    """The push contexts still alive, garbage in reference cycles included when the caller
    has set DEBUG_SAVEALL (a collection then keeps what it finds in gc.garbage): an old push
    must be freed by reference counting alone, as the server freezes its heap after each
    push (meshpilot/heap.py)."""
    gc.unfreeze()
    gc.collect()
    return sorted(o.version for o in gc.get_objects() if isinstance(o, PushContext))


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_a_push_context_is_freed_once_every_stream_has_the_next(
    tmp_path: Path, delta: bool
) -> None:
    """Only the current push context stays alive once the heap has settled: neither the push
    history, a stream's own frame nor a reference cycle keeps the ones before (each held its
    caches and shared responses: 150 MB a VirtualService push at 1000 proxies)."""

    async def scenario(h: Harness) -> None:
        s, _ = await synced(h, delta)
        for edit in (APP + WEB_2, APP, APP + WEB_2):
            h.edit(edit)
            pushed = await s.recv()
            s.send(ack(delta, pushed, NAMES))
        # The pushes replaced are held until the heap's settle, a second after the last push
        # went out (xds/push_heap.py): not freed in the middle of a fan-out.
        assert h.server.heap.retired
        for _ in range(60):
            if not h.server.heap.retired:
                break
            await asyncio.sleep(0.05)
        assert len(h.server.push_history) == 4  # the first push and one per edit
        assert alive_push_versions() == [h.server.push_context.version]
        s.close()

    gc.unfreeze()  # the garbage of the tests before (their servers froze it) is not ours
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run(tmp_path, scenario)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
