"""B4: the clusters of known pods' proxies are built before any of them connects, within
a time budget, so a starting Envoy's first CDS answer comes from the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

from meshpilot.xds.resources import prebuild_known
from tests.unit.xds_server.test_server import WEB, Harness, run

_MEMO_KEY = "xds.serialized"  # xds/resources.py: serialized resources of the push


def test_known_pods_clusters_are_built_before_they_connect(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        memo = h.server.push_context.memo.get(_MEMO_KEY, {})
        assert isinstance(memo, dict)
        built = {resource.name for _, resource in memo.values()}
        assert WEB in built, "the client pod's outbound cluster was built at startup"
        assert prebuild_known(h.server.push_context, budget=0.0) <= 1  # the budget is kept
        await asyncio.sleep(0)

    run(tmp_path, scenario)
