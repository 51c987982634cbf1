"""The push made ready while its change is debounced (xds/speculation.py), over real gRPC:
adopted when nothing came meanwhile, dropped when a newer change did, and either way the
proxies get what a build from the files as they are would give them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.config.loader import load_paths
from meshpilot.model.push_context import build_push_context
from meshpilot.settings import Settings
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.resources import generate_resources
from meshpilot.xds.warmed import keep_warmed, warmed
from tests.conftest import proxy_for
from tests.unit.xds_server.test_push_scope import VS  # a VirtualService with {timeout}
from tests.unit.xds_server.test_server import APP, Harness, Stream

ROUTE = "8080"


def run(tmp: Path, scenario: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        harness = Harness(tmp)
        # A debounce long enough for the speculation to be ready before it ends.
        harness.server.debouncer.after = 0.3
        harness.server.settings = Settings(debounce_after=0.3, debounce_max=2)
        async with harness:
            await scenario(harness)

    asyncio.run(asyncio.wait_for(main(), timeout=30))


async def _sotw_routes(h: Harness) -> Stream:
    s = h.stream()
    s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ROUTE, resource_names=[ROUTE]))
    got = await s.recv()
    s.send(
        discovery_pb2.DiscoveryRequest(
            type_url=TypeUrl.ROUTE,
            resource_names=[ROUTE],
            version_info=got.version_info,
            response_nonce=got.nonce,
        )
    )
    return s


async def _delta_routes(h: Harness) -> Stream:
    s = h.stream(delta=True)
    s.send(
        discovery_pb2.DeltaDiscoveryRequest(
            type_url=TypeUrl.ROUTE, resource_names_subscribe=[ROUTE]
        )
    )
    got = await s.recv()
    s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.ROUTE, response_nonce=got.nonce))
    return s


async def _pushed_route(s: Stream, delta: bool) -> bytes:
    """The route config of the next RDS response on the stream (other types skipped)."""
    while True:
        got = await s.recv()
        if got.type_url == TypeUrl.ROUTE:
            resources = [r.resource for r in got.resources] if delta else list(got.resources)
            assert len(resources) == 1
            return bytes(resources[0].value)


def _cold_route(tmp: Path) -> bytes:
    """The route config a build from the files as they are now gives the client."""
    loaded = load_paths([tmp])
    push = build_push_context(loaded.objects, loaded.mesh)
    resources = generate_resources(push, proxy_for(push, "client.default"), TypeUrl.ROUTE, [ROUTE])
    return resources[0].body


def _timeout_s(route_config: bytes) -> int:
    config = route_pb2.RouteConfiguration.FromString(route_config)
    vhost = next(v for v in config.virtual_hosts if "web" in v.name)
    return int(vhost.routes[0].route.timeout.seconds)


async def _settled(h: Harness) -> None:
    """Until the server has recorded every stream's ACK: one arriving after the warm-up
    moves the stream on, and its push is rightly worked out again (xds/prepared.py)."""
    for _ in range(200):
        watches = [w for c in h.server.connections.values() for w in c.watched.values()]
        if watches and all(w.nonce_acked == w.nonce_sent for w in watches):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the streams' ACKs were not recorded")


async def _wait_warmed(h: Harness, streams: int) -> None:
    for _ in range(100):
        if h.server.speculation.warmed >= streams:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("no speculation made within the debounce window")


def test_an_unchanged_store_adopts_the_speculation(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sotw, delta = await _sotw_routes(h), await _delta_routes(h)
        await _settled(h)
        h.edit(APP + VS.format(timeout="7s"))
        await _wait_warmed(h, 2)
        assert h.server.push_history[-1].configs_updated == frozenset()  # not pushed yet
        got = [await _pushed_route(sotw, False), await _pushed_route(delta, True)]
        spec = h.server.speculation
        assert (spec.adopted, spec.dropped, spec.warmed) == (1, 0, 2)
        rendered = h.server.metrics.render()
        assert 'meshpilot_push_speculations{result="adopted"} 1' in rendered
        # The Delta stream's push was worked out to its bytes ahead (xds/prepared.py).
        assert 'meshpilot_push_prepared{result="applied"} 1' in rendered
        assert got == [_cold_route(tmp_path)] * 2
        assert _timeout_s(got[0]) == 7
        sotw.close()
        delta.close()

    run(tmp_path, scenario)


def test_a_newer_change_drops_the_speculation(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sotw, delta = await _sotw_routes(h), await _delta_routes(h)
        h.edit(APP + VS.format(timeout="7s"))
        await _wait_warmed(h, 2)
        h.edit(APP + VS.format(timeout="9s"))  # within the debounce window
        got = [await _pushed_route(sotw, False), await _pushed_route(delta, True)]
        spec = h.server.speculation
        # The first speculation is dropped; the second, made for both changes, adopted.
        assert (spec.adopted, spec.dropped) == (1, 1)
        assert got == [_cold_route(tmp_path)] * 2
        assert _timeout_s(got[1]) == 9
        assert len([r for r in h.server.push_history if r.configs_updated]) == 1
        sotw.close()
        delta.close()

    run(tmp_path, scenario)


def test_warmed_resources_are_taken_once_and_only_for_what_they_were_made_for(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.yaml").write_text(APP)
    loaded = load_paths([tmp_path])
    push = build_push_context(loaded.objects, loaded.mesh)
    proxy, other = proxy_for(push, "client.default"), proxy_for(push, "client.default")
    made = generate_resources(push, proxy, TypeUrl.ROUTE, [ROUTE])
    for asked in ((other, [ROUTE]), (proxy, ["9090"]), (proxy, [ROUTE]), (proxy, [ROUTE])):
        keep_warmed(push, 7, TypeUrl.ROUTE, proxy, [ROUTE], made)
        got = warmed(push, 7, TypeUrl.ROUTE, *asked)
        assert got is (made if asked[0] is proxy and asked[1] == [ROUTE] else None)
    assert warmed(push, 7, TypeUrl.ROUTE, proxy, [ROUTE]) is None  # taken already


def test_a_burst_of_changes_gets_a_few_speculations_not_one_each(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sotw = await _sotw_routes(h)
        for seconds in range(1, 31):  # a change every 10 ms, within one debounce window
            h.edit(APP + VS.format(timeout=f"{seconds}s"))
            await asyncio.sleep(0.01)
        got = await _pushed_route(sotw, False)
        while _timeout_s(got) != 30:  # (a stalled machine may push part of the burst first)
            got = await _pushed_route(sotw, False)
        assert got == _cold_route(tmp_path)
        spec = h.server.speculation
        events = h.server.debouncer.events
        pushes = len([r for r in h.server.push_history if r.configs_updated])
        assert events >= 10  # (the store saw most of the writes)
        # Each drop doubles the quiet wait: past 10 ms, the burst's changes get none.
        assert spec.adopted >= 1 and spec.dropped <= 7 * pushes, (events, pushes, spec.dropped)
        sotw.close()

    run(tmp_path, scenario)
