"""A push's timeline (xds/push_timeline.py): its stages in order, its responses and ACKs
counted, over real gRPC; and the benchmark clients' ACKs are the bytes protobuf writes."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from bench.push import EDS, names_bytes, request_bytes
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_timeline import PushTimeline, PushTimelines
from tests.unit.xds_server.test_server import APP, WEB, WEB_2, Harness, run


def _ack(resp: discovery_pb2.DiscoveryResponse, names: list[str]) -> discovery_pb2.DiscoveryRequest:
    return discovery_pb2.DiscoveryRequest(
        type_url=resp.type_url,
        resource_names=names,
        response_nonce=resp.nonce,
        version_info=resp.version_info,
    )


def test_an_endpoint_push_records_its_stages_sends_and_acks(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ENDPOINT, resource_names=[WEB]))
        eds = await s.recv()
        s.send(_ack(cds, []))
        s.send(_ack(eds, [WEB]))
        before = time.monotonic()
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        s.send(_ack(pushed, [WEB]))
        await asyncio.sleep(0.2)
        timeline = h.server.timelines.get(pushed.version_info)
        assert timeline is not None and not timeline.full
        assert (timeline.streams, timeline.sent, timeline.acked) == (1, 1, 1)
        stamps = [
            timeline.changed,
            timeline.debounced,
            timeline.built,
            timeline.queued,
            timeline.first_sent,
            timeline.last_acked,
        ]
        assert before <= stamps[0] and stamps == sorted(stamps)
        assert timeline.debounced - timeline.changed >= 0.02  # the harness's debounce
        assert h.server.timelines.latest() is timeline
        s.close()

    run(tmp_path, scenario)


def test_delta_acks_count_by_their_nonce(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream(delta=True)
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce)
        )
        subscribe = discovery_pb2.DeltaDiscoveryRequest(
            type_url=TypeUrl.ENDPOINT, resource_names_subscribe=[WEB]
        )
        s.send(subscribe)
        eds = await s.recv()
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.ENDPOINT, response_nonce=eds.nonce)
        )
        h.edit(APP + WEB_2)
        pushed = await s.recv()
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(
                type_url=TypeUrl.ENDPOINT, response_nonce=pushed.nonce
            )
        )
        await asyncio.sleep(0.2)
        timeline = h.server.timelines.get(pushed.system_version_info)
        assert timeline is not None and (timeline.sent, timeline.acked) == (1, 1)
        s.close()

    run(tmp_path, scenario)


def test_timeline_json_gives_each_stage_after_the_change() -> None:
    t = PushTimeline("v/2", full=False, changed=10.0, debounced=10.1, built=10.125)
    t.queued = 10.126
    data = json.loads(t.to_json())
    assert data["ms"]["debounced"] == 100.0 and data["ms"]["built"] == 125.0
    assert data["ms"]["last_acked"] == 0.0  # not reached
    assert data["version"] == "v/2" and data["changed"] == 10.0


def test_the_cpu_clock_is_read_once_per_burst_of_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand ACKs in a few ms read the process's CPU clock (which sums every thread's
    time) a few times, not a thousand; an ACK after a pause reads it."""
    reads = []
    monkeypatch.setattr(time, "process_time", lambda: reads.append(1) or float(len(reads)))
    t = PushTimeline("v/2", full=True, changed=0.0, debounced=0.0)
    t.record_queued(1000)
    for _ in range(1000):
        t.record_ack()
    assert t.acked == 1000 and 2 <= len(reads) <= 10
    time.sleep(0.003)
    t.record_ack()
    assert t.cpu_last_acked == float(len(reads))  # the latest reading, taken at this ACK


def test_only_the_latest_timelines_are_kept() -> None:
    kept = PushTimelines(keep=2)
    for i in range(3):
        kept.add(PushTimeline(f"v/{i}", full=True, changed=0.0, debounced=0.0))
    assert kept.get("v/0") is None and kept.get("v/1") is not None
    latest = kept.latest()
    assert latest is not None and latest.version == "v/2"


def test_bench_acks_are_the_bytes_protobuf_writes() -> None:
    names = tuple(f"outbound|8080||svc-{i}.ns-1.svc.cluster.local" for i in range(40))
    for version, subscribed, nonce in (("", (), ""), ("2026-11-23T06:00:00Z/5", names, "ab12")):
        expected = discovery_pb2.DiscoveryRequest(
            version_info=version, resource_names=subscribed, type_url=EDS, response_nonce=nonce
        ).SerializeToString()
        assert request_bytes(version, names_bytes(subscribed), EDS, nonce) == expected
