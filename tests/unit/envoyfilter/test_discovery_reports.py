"""`meshpilot discovery` serves the rest of the configuration when an EnvoyFilter patch is
skipped, logs it naming the filter and the patch index, and lists it on /debug/configz."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from tests.unit.envoyfilter.helpers import BOOKINFO, PRODUCTPAGE
from tests.unit.xds_server.test_debug_api import _get

BAD = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: bad-timeout, namespace: default}
spec:
  workloadSelector: {labels: {app: productpage}}
  configPatches:
  - applyTo: CLUSTER
    match: {cluster: {service: details.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 3s}}
  - applyTo: CLUSTER
    match: {cluster: {service: reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 0s}}
"""
SKIPPED = (
    "EnvoyFilter default/bad-timeout ({file}:1) configPatches[1] skipped: Envoy would reject "
    "the patched Cluster 'outbound|9080||reviews.default.svc.cluster.local': connect_timeout: "
    "must be greater than 0s"
)


def test_a_skipped_patch_is_logged_and_shown_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "envoyfilter.yaml"
    path.write_text(BAD)

    async def scenario() -> tuple[dict[str, object], dict[str, object]]:
        settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0))
        discovery = Discovery([BOOKINFO, tmp_path], settings)
        await discovery.start()
        port = discovery.monitoring_port
        try:
            status, _, body = await _get(port, f"/debug/config_dump?proxyID={PRODUCTPAGE}")
            assert status == 200
            dump = json.loads(body)
            status, _, body = await _get(port, "/debug/configz")
            return dump, json.loads(body)
        finally:
            await discovery.stop()

    with caplog.at_level(logging.WARNING, "meshpilot.xds.patch"):
        dump, configz = asyncio.run(scenario())
    expected = SKIPPED.format(file=path)
    assert expected in configz["skipped_patches"]  # type: ignore[operator]
    assert expected in [r.getMessage() for r in caplog.records]
    clusters = {
        c["cluster"]["name"]: c["cluster"].get("connect_timeout")
        for c in dump["configs"][0]["dynamic_active_clusters"]  # type: ignore[index]
    }
    assert clusters["outbound|9080||details.default.svc.cluster.local"] == "3s"
    assert clusters["outbound|9080||reviews.default.svc.cluster.local"] == "10s"
