"""B4: what Envoy asks for after its first clusters is built while it applies them.

After the first CDS answer (Delta or SotW), the server builds, into the push's caches, the
assignments of those clusters, the listeners and their route configs, before Envoy asks:
its EDS, LDS and RDS requests are then answered from the cache. The answers are the same as
without the warm-up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.references import rds_names
from meshpilot.xds.resources import ALL_NAMES, generate_resources, prewarm
from tests.unit.xds_server.test_server import NODE, WEB, Harness, run

_MEMO_KEY = "xds.serialized"  # xds/resources.py: serialized resources of the push


def _built(h: Harness) -> set[str]:
    """Names of the resources serialized so far for the current push."""
    memo = h.server.push_context.memo.get(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    return {resource.name for _, resource in memo.values()}


def test_first_cds_answer_warms_eds_lds_and_rds(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream(delta=True)
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        assert WEB in {r.name for r in cds.resources}
        for _ in range(100):  # the warm-up runs once the answer is written
            if {WEB, "8080"} <= _built(h):
                break
            await asyncio.sleep(0.02)
        built = _built(h)
        assert WEB in built, "the cluster's assignment is built before Envoy asks"
        assert "8080" in built, "the route config of the 8080 listener is built"
        assert any(name.endswith("_8080") or name == "virtualOutbound" for name in built)

        # Envoy's requests are answered as before.
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.CLUSTER, response_nonce=cds.nonce)
        )
        s.send(
            discovery_pb2.DeltaDiscoveryRequest(
                type_url=TypeUrl.ENDPOINT, resource_names_subscribe=[WEB]
            )
        )
        eds = await s.recv()
        assert eds.type_url == TypeUrl.ENDPOINT and [r.name for r in eds.resources] == [WEB]
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.LISTENER))
        lds = await s.recv()
        assert lds.type_url == TypeUrl.LISTENER and lds.resources
        s.close()

    run(tmp_path, scenario)


def test_first_sotw_cds_answer_warms_them_too(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream(delta=False)
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER))
        cds = await s.recv()
        assert cds.type_url == TypeUrl.CLUSTER and cds.resources
        for _ in range(100):
            if {WEB, "8080"} <= _built(h):
                break
            await asyncio.sleep(0.02)
        assert {WEB, "8080"} <= _built(h)
        s.close()

    run(tmp_path, scenario)


def test_prewarm_of_all_listeners_builds_what_generation_returns(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        proxy = _proxy(h)
        push = h.server.push_context
        prewarm(push, proxy, [(TypeUrl.LISTENER, ALL_NAMES)])
        listeners = generate_resources(push, proxy, TypeUrl.LISTENER, None)
        assert listeners and all(r.name in _built(h) for r in listeners)
        rds = set(rds_names([listener_pb2.Listener.FromString(r.body) for r in listeners]))
        assert "8080" in rds and rds <= _built(h)

    run(tmp_path, scenario)


def _proxy(h: Harness) -> Proxy:
    return proxy_for(h.server.push_context, parse_node(base_pb2.Node(id=NODE)))
