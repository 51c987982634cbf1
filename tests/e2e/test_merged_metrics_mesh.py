"""The agent's merged Prometheus endpoint on the live demo mesh (netns pods, real Envoys):
after requests from the client's sidecar to reviews' with Istio's metrics on, the reviews
pod's `:15020/stats/prometheus` has `istio_requests_total` under Istio's name (not Envoy's
`envoy_istio_` prefix) with Istio's labels, as Prometheus scraping the pod sees it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for

from meshpilot.demo.mesh import DemoMesh

pytestmark = pytest.mark.envoy

METRICS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultProviders:
      metrics: [prometheus]
"""
_SERIES = re.compile(r"^istio_requests_total\{(.*)\} (\d+)$")


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


def _merged(mesh: DemoMesh, pod: str) -> str:
    port = mesh.agent_ports[pod].status
    status, body = mesh.get(pod, f"http://127.0.0.1:{port}/stats/prometheus", full=True)
    assert status == 200, body[:300]
    return body


def _from_client(mesh: DemoMesh, pod: str) -> int:
    """Requests reviews' sidecar counted as destination, from the client, answered 200."""
    total = 0
    for line in _merged(mesh, pod).splitlines():
        if found := _SERIES.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
            if (
                labels.get("reporter") == "destination"
                and labels.get("source_workload") == "client"
                and labels.get("destination_app") == "reviews"
                and labels.get("destination_service") == "reviews.default.svc.cluster.local"
                and labels.get("source_principal") == "spiffe://cluster.local/ns/default/sa/client"
                and labels.get("response_code") == "200"
            ):
                total += int(found.group(2))
    return total


def _send(mesh: DemoMesh) -> None:
    status, line = mesh.get("client", "http://reviews:9080/")
    assert status == 200, line


def test_istio_requests_total_on_the_agents_merged_endpoint(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    pods = [p for p in mesh.pods if re.fullmatch(r"reviews-v\d+", p)]
    mesh.workspace.config.write("metrics.yaml", METRICS)
    try:

        def counted() -> int:
            _send(mesh)
            return sum(_from_client(mesh, pod) for pod in pods)

        wait_for(counted, "istio_requests_total on 15020", timeout=60)
        body = _merged(mesh, pods[0])
        assert "envoy_istio_" not in body
        assert "# TYPE istio_requests_total counter" in body.splitlines()
        assert re.search(r"^envoy_server_live\S* 1$", body, re.MULTILINE), "Envoy's own stats"
    finally:
        mesh.workspace.config.remove("metrics.yaml")
    assert_no_nacks(mesh)
