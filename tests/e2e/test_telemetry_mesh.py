"""Tracing and access logs on the live demo mesh (netns pods, real Envoys).

A request through the ingress gateway to productpage, which calls reviews: its spans reach a
Zipkin-format collector the test runs on the bridge's host address (registered in the mesh
by a ServiceEntry, named by a zipkin extension provider, chosen by a mesh-wide Telemetry),
joined parent to child by the B3 headers the sidecars add and the app propagates. Every hop
writes a JSON access log line (meshConfig accessLogFile /dev/stdout, accessLogEncoding JSON)
carrying the request's x-request-id.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for
from tests.e2e.zipkin_collector import Collector, zipkin_collector

from meshpilot.demo import checks
from meshpilot.demo import pods as podlib
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.topology import INGRESS_HOST, INGRESS_POD

pytestmark = pytest.mark.envoy

COLLECTOR_HOST = "zipkin.telemetry.test"
CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: istio, namespace: istio-system}}
data:
  mesh: |
    accessLogFile: /dev/stdout
    accessLogEncoding: JSON
    extensionProviders:
    - name: zipkin
      zipkin: {{service: {host}, port: {port}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: zipkin, namespace: istio-system}}
spec:
  hosts: [{host}]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{{number: {port}, name: http-zipkin, protocol: HTTP}}]
  endpoints: [{{address: {address}}}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {{name: mesh-default, namespace: istio-system}}
spec:
  tracing:
  - providers: [{{name: zipkin}}]
    randomSamplingPercentage: 100
"""


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


@pytest.fixture
def collector(mesh: DemoMesh) -> Iterator[Collector]:
    assert mesh.cluster is not None and not mesh.loopback
    host = str(mesh.cluster.bridge.gateway)  # type: ignore[attr-defined]
    with zipkin_collector(host) as found:
        yield found


def _summary(mesh: DemoMesh, collector: Collector) -> str:
    """What the collector got and what the control plane saw, for a failure message."""
    assert mesh.control is not None
    traces = {
        trace: sorted(
            (s.get("localEndpoint", {}).get("serviceName", "?"), s["id"], s.get("parentId", "-"))
            for s in spans
        )
        for trace, spans in collector.traces().items()
    }
    stats = mesh.admin("productpage-v1", "/stats?filter=zipkin|tracing|telemetry")[1]
    dump = mesh.admin("productpage-v1", "/config_dump?resource=dynamic_active_clusters")[1]
    zipkin_clusters = [line for line in dump.splitlines() if "zipkin" in line][:5]
    return (
        f"traces: {traces}; nacks: {mesh.control.nacks()}; stats: {stats}; "
        f"clusters: {zipkin_clusters}; {mesh.logs('productpage-v1')[-3000:]}"
    )


def _joined_trace(collector: Collector) -> list[dict[str, Any]] | None:
    """A trace whose spans cover the gateway, productpage and reviews, each span's parent
    (but the root's) being a span of the same trace."""
    for spans in collector.traces().values():
        ids = {s["id"] for s in spans}
        roots = [s for s in spans if "parentId" not in s]
        services = {s.get("localEndpoint", {}).get("serviceName", "") for s in spans}
        joined = len(roots) == 1 and all(s["parentId"] in ids for s in spans if s not in roots)
        if joined and len(spans) >= 5 and _covers(services):  # one per hop: none late
            return spans
    return None


def _covers(services: set[str]) -> bool:
    names = " ".join(services)
    return all(name in names for name in ("ingressgateway", "productpage", "reviews"))


def _log_lines(mesh: DemoMesh, pod: str, request_id: str) -> list[dict[str, Any]]:
    agent = podlib.agent_process(mesh.pods[pod])
    assert agent is not None
    out = []
    for line in agent.log.read_text(errors="replace").splitlines():
        if line.startswith("{") and request_id in line:
            out.append(json.loads(line))
    return out


def test_a_request_is_traced_across_three_proxies_and_logged_at_each_hop(
    mesh: DemoMesh, collector: Collector
) -> None:
    assert mesh.workspace is not None
    address, port = collector.address
    text = CONFIG.format(host=COLLECTOR_HOST, port=port, address=address)
    mesh.workspace.config.write("telemetry.yaml", text)
    try:

        def traced() -> list[dict[str, Any]] | None:
            status, body = checks.https_get(
                mesh.ingress,
                INGRESS_HOST,
                "/productpage",
                mesh.workspace.ca_file,  # type: ignore[union-attr]
            )
            assert status == 200, body
            time.sleep(0.5)
            return _joined_trace(collector)

        try:
            spans = wait_for(traced, "a joined trace at the collector", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {_summary(mesh, collector)}") from None
    finally:
        mesh.workspace.config.remove("telemetry.yaml")
    chain = _chain(spans)
    # The gateway's server span, the upstream span it spawns, then a server and a client span
    # per sidecar hop: each the child of the one before (B3 ids, 128-bit trace id).
    assert [(s["localEndpoint"]["serviceName"], s["kind"]) for s in chain] == [
        ("istio-ingressgateway.istio-system", "SERVER"),
        ("istio-ingressgateway.istio-system", "CLIENT"),
        ("productpage.default", "SERVER"),
        ("productpage.default", "CLIENT"),
        ("reviews.default", "SERVER"),
    ]
    assert len(chain[0]["traceId"]) == 32
    request_id = chain[0]["tags"]["guid:x-request-id"]
    reviews = "reviews-v2" if "|v2|" in chain[3]["tags"]["upstream_cluster"] else "reviews-v1"
    # One JSON line per HCM the request went through: productpage's inbound and outbound.
    pods = (INGRESS_POD, "productpage-v1", reviews)
    hops = {pod: _log_lines(mesh, pod, request_id) for pod in pods}
    assert {pod: len(lines) for pod, lines in hops.items()} == dict(
        zip(pods, (1, 2, 1), strict=True)
    )
    for lines in hops.values():
        assert all(line["response_code"] == 200 for line in lines)
        assert all(line["path"] in ("/productpage", "/reviews") for line in lines)
    assert_no_nacks(mesh)


def _chain(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's spans from the root down, following parentId (one child each)."""
    children = {s.get("parentId"): s for s in spans}
    out = [children[None]]
    while out[-1]["id"] in children:
        out.append(children[out[-1]["id"]])
    return out


METRICS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultProviders:
      metrics: [prometheus]
"""
Series = list[tuple[dict[str, str], int]]
_SERIES = r"^envoy_istio_{}\{{(.*)\}} (\d+)$"


def _requests_total(
    mesh: DemoMesh, pod: str, metric: str = "requests_total"
) -> list[tuple[dict[str, str], int]]:
    status, body = mesh.admin(pod, "/stats/prometheus")
    assert status == 200, body[:200]
    series = re.compile(_SERIES.format(metric))
    out = []
    for line in body.splitlines():
        if found := series.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
            out.append((labels, int(found.group(2))))
    return out


def test_both_reporters_count_requests_with_istios_labels(mesh: DemoMesh) -> None:
    """client -> productpage -> reviews with metrics on: productpage reports as source
    toward reviews, reviews as destination, with workloads, principals (mTLS), service and
    response code; 5 requests each. Then one TCP exchange client -> tcp-echo: its
    connection opened and closed, bytes counted."""
    pods = ("productpage-v1", "reviews-v1", "reviews-v2")
    source = {
        "reporter": "source",
        "source_workload": "productpage-v1",
        "source_principal": "spiffe://cluster.local/ns/default/sa/productpage",
        "destination_workload_namespace": "default",
        "destination_service": "reviews.default.svc.cluster.local",
        "destination_service_name": "reviews",
        "destination_app": "reviews",
        "response_code": "200",
    }
    dest = {
        "reporter": "destination",
        "source_workload": "productpage-v1",
        "source_workload_namespace": "default",
        "source_app": "productpage",
        "source_principal": "spiffe://cluster.local/ns/default/sa/productpage",
        "destination_principal": "spiffe://cluster.local/ns/default/sa/reviews",
        "destination_service": "reviews.default.svc.cluster.local",
        "connection_security_policy": "mutual_tls",
        "response_code": "200",
    }

    def counted(since: dict[str, Series]) -> tuple[int, int]:
        """(productpage as source, reviews as destination) since `since`."""
        now = {pod: _requests_total(mesh, pod) for pod in pods}
        reviews = sum(_delta(since[p], now[p], dest) for p in pods[1:])
        return _delta(since[pods[0]], now[pods[0]], source), reviews

    assert mesh.workspace is not None
    mesh.workspace.config.write("telemetry.yaml", METRICS)
    try:
        # Requests until both reporters have counted one (the config has arrived).
        none: dict[str, Series] = {pod: [] for pod in pods}
        wait_for(lambda: min(counted(none)) >= 1 or _send(mesh), "metrics on", timeout=60)
        before = {pod: _requests_total(mesh, pod) for pod in pods}
        for _ in range(5):
            status, line = mesh.get("client", "http://productpage:9080/productpage")
            assert status == 200, line
        # A request is counted when its stream ends, just after the answer: wait for it.
        wait_for(lambda: min(counted(before)) >= 5, "5 requests counted by both reporters")
        assert counted(before) == (5, 5)
        tcp_before = _tcp_series(mesh)
        reply = mesh.client("client", "tcp", "tcp-echo", str(mesh.topology.ports.tcp), "hi")
        assert reply.get("line") == "tcp-echo v1 pod=tcp-echo-v1: hi", reply
        tcp_after = wait_for(lambda: _tcp_closed(mesh, tcp_before), "TCP close counted")
    finally:
        mesh.workspace.config.remove("telemetry.yaml")
    # TCP, destination reporter: one connection opened and closed, bytes both ways; the
    # client's principal is known once the connection ends (at upstream connect, the
    # downstream TLS handshake may not have finished: Envoy leaves the SAN empty then).
    tcp = {
        "reporter": "destination",
        "destination_workload": "tcp-echo-v1",
        "destination_service": "tcp-echo.default.svc.cluster.local",
        "connection_security_policy": "mutual_tls",
        "request_protocol": "tcp",
    }
    principal = {"source_principal": "spiffe://cluster.local/ns/default/sa/client"}
    opened = "tcp_connections_opened_total"
    assert _delta(tcp_before[opened], tcp_after[opened], tcp) == 1, str(tcp_after[opened])
    for metric in (
        "tcp_connections_closed_total",
        "tcp_sent_bytes_total",
        "tcp_received_bytes_total",
    ):
        assert _delta(tcp_before[metric], tcp_after[metric], tcp | principal) > 0, str(
            tcp_after[metric]
        )
    assert_no_nacks(mesh)


_TCP = (
    "tcp_connections_opened_total",
    "tcp_connections_closed_total",
    "tcp_sent_bytes_total",
    "tcp_received_bytes_total",
)


def _tcp_series(mesh: DemoMesh) -> dict[str, Series]:
    return {metric: _requests_total(mesh, "tcp-echo-v1", metric) for metric in _TCP}


def _tcp_closed(mesh: DemoMesh, before: dict[str, Series]) -> dict[str, Series] | None:
    after = _tcp_series(mesh)
    closed = "tcp_connections_closed_total"
    wanted = {"reporter": "destination"}
    return after if _delta(before[closed], after[closed], wanted) >= 1 else None


def _send(mesh: DemoMesh) -> None:
    mesh.get("client", "http://productpage:9080/productpage")


def _delta(
    before: list[tuple[dict[str, str], int]],
    after: list[tuple[dict[str, str], int]],
    wanted: dict[str, str],
) -> int:
    def total(series: list[tuple[dict[str, str], int]]) -> int:
        return sum(n for labels, n in series if wanted.items() <= labels.items())

    return total(after) - total(before)
