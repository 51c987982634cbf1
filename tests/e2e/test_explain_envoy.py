"""Ground truth for `meshpilot explain`: requests sent through the live demo mesh (real
netns pods, real Envoys, `meshpilot discovery` over the same files) end where explain says.

For each request, explain's predicted response code must be what the client got, and its
upstream cluster must be the one whose Envoy counter (`cluster.<name>.upstream_rq_total`
on the source sidecar) rose; a request that never leaves the source proxy (a fault abort, a
direct response) must raise no cluster's counter. meshpilot does not generate access logs
(meshConfig.accessLogFile is not supported yet), so the per-cluster counters stand in for
the access log's %UPSTREAM_CLUSTER%. The demo's Envoys count only outbound|/inbound|
clusters: a request explain sends to PassthroughCluster must instead be answered by the
original destination (the external server names the host it was asked for).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for

from meshpilot.cli.main import cli
from meshpilot.config.loader import load_paths
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.topology import API_HOST, EGRESS_HOST, UNREGISTERED_HOST
from meshpilot.explain import Explanation, build_scene, explain, parse_request, workload_of
from meshpilot.model.push_context import build_push_context

pytestmark = pytest.mark.envoy

APP_STATUS = 200  # what the demo apps answer
_COUNTER = re.compile(r"^cluster\.(.+?);?\.upstream_rq_total$")

DENY_PATH = """\
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ratings-no-denied, namespace: default}
spec:
  selector: {matchLabels: {app: ratings}}
  action: DENY
  rules:
  - to:
    - operation: {paths: ["/denied*"]}
"""


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


def _explain(mesh: DemoMesh, pod: str, url: str, *headers: str) -> Explanation:
    assert mesh.workspace is not None
    loaded = load_paths([mesh.workspace.config.path])
    push = build_push_context(loaded.served, loaded.mesh)
    source = push.pod("default", pod)
    assert source is not None, pod
    return explain(workload_of(push, source), parse_request(url, "GET", headers), build_scene(push))


def _counters(mesh: DemoMesh, pod: str) -> dict[str, int]:
    stats = mesh.stats(pod, r"^cluster\..*\.upstream_rq_total$")
    return {m.group(1): v for k, v in stats.items() if (m := _COUNTER.match(k))}


def _counted(cluster: str) -> bool:
    """The demo's Envoys keep the counters of outbound|... and inbound|... clusters only
    (its stats inclusion prefixes), not those of PassthroughCluster or BlackHoleCluster."""
    return cluster.startswith(("outbound|", "inbound|"))


def _check(mesh: DemoMesh, pod: str, url: str, *headers: str) -> Explanation:
    """Send one request; assert Envoy did what explain predicted."""
    predicted = _explain(mesh, pod, url, *headers)
    before = _counters(mesh, pod)
    status, line = mesh.get(pod, url, *headers)
    after = _counters(mesh, pod)
    rose = sorted(name for name, n in after.items() if n > before.get(name, 0))
    out = predicted.outcome
    left_the_proxy = out.delivered or out.dies_at in ("endpoints", "inbound_chain", "rbac")
    expected_clusters = [out.cluster] if left_the_proxy and _counted(out.cluster) else []
    expected_status = out.code if out.code is not None else APP_STATUS
    assert (status, rose) == (expected_status, expected_clusters), (
        f"{pod} {url} {headers}: Envoy answered {status} ({line!r}) via {rose}; "
        f"explain predicted {expected_status} via {expected_clusters}: {out.reason}"
    )
    return predicted


@pytest.mark.parametrize(
    ("pod", "url", "headers"),
    [
        ("client", "http://reviews:9080/", ("end-user: jason",)),  # header match → v2
        ("client", "http://ratings:9080/", ()),
        ("client", "http://ratings:9080/", ("x-demo-fault: abort",)),  # fault 418, no upstream
        ("client", f"http://{EGRESS_HOST}/", ()),  # through the egress gateway
        ("client-locked", f"http://{API_HOST}/", ()),  # registered external host
        ("client-locked", f"http://{UNREGISTERED_HOST}/", ()),  # REGISTRY_ONLY → 502
    ],
)
def test_explain_predicts_what_envoy_does(
    mesh: DemoMesh, pod: str, url: str, headers: tuple[str, ...]
) -> None:
    _check(mesh, pod, url, *headers)
    assert_no_nacks(mesh)


def test_explain_predicts_an_rbac_403_and_names_the_policy(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    path = Path(mesh.workspace.config.write("explain-authz.yaml", DENY_PATH))
    try:
        wait_for(
            lambda: mesh.get("client", "http://ratings:9080/denied/1")[0] == 403,
            "ratings' sidecar denies /denied",
        )
        denied = _check(mesh, "client", "http://ratings:9080/denied/1")
        assert denied.outcome.dies_at == "rbac"
        rbac = [h for h in denied.hops if h.stage == "rbac"]
        assert [o.name for o in rbac[-1].objects] == ["ratings-no-denied"]
        assert rbac[-1].objects[0].file == str(path)
        _check(mesh, "client", "http://ratings:9080/allowed")
    finally:
        mesh.workspace.config.remove("explain-authz.yaml")
    assert_no_nacks(mesh)


def test_live_explain_from_discovery_and_from_the_envoys_own_config_dump(
    mesh: DemoMesh, tmp_path: Path
) -> None:
    """--discovery reads the running control plane; --config-dump what the Envoy itself
    runs (its admin /config_dump): both predict what the offline walk predicts."""
    assert mesh.control is not None and mesh.workspace is not None
    url, jason = "http://reviews:9080/", "end-user: jason"
    offline = _explain(mesh, "client", url, jason).outcome
    assert offline.cluster == "outbound|9080|v2|reviews.default.svc.cluster.local"
    status, dump = mesh.admin("client", "/config_dump?include_eds")
    assert status == 200
    (tmp_path / "client.json").write_text(dump)
    runs = {
        "discovery": ["--discovery", mesh.control.url],
        "config-dump": [
            "-f",
            str(mesh.workspace.config.path),
            "--config-dump",
            str(tmp_path / "client.json"),
        ],
    }
    for name, args in runs.items():
        result = CliRunner().invoke(
            cli, ["explain", *args, "--from", "client.default", "-H", jason, "-o", "json", url]
        )
        assert result.exit_code == 0, f"{name}: {result.output}"
        outcome = json.loads(result.stdout)["outcome"]
        assert (outcome["cluster"], outcome["code"], outcome["delivered"]) == (
            offline.cluster,
            offline.code,
            offline.delivered,
        ), name


def test_generated_requests_end_where_explain_says(mesh: DemoMesh) -> None:
    """Every combination of source, destination, path and headers below, 8 requests each
    (224 in all): each answer's status and the rise of the source's cluster counters equal
    explain's prediction."""
    assert mesh.workspace is not None
    loaded = load_paths([mesh.workspace.config.path])
    push = build_push_context(loaded.served, loaded.mesh)
    scene = build_scene(push)
    targets = [
        ("http://reviews:9080", ("end-user: jason",)),
        ("http://ratings:9080", ()),
        ("http://ratings:9080", ("x-demo-fault: abort",)),
        ("http://productpage:9080", ()),
        (f"http://{API_HOST}", ()),
        (f"http://{EGRESS_HOST}", ()),
        (f"http://{UNREGISTERED_HOST}", ()),
    ]
    count, failures = 8, []
    for pod in ("client", "client-locked"):
        source = push.pod("default", pod)
        assert source is not None
        origin = workload_of(push, source)
        for (base, headers), path in itertools.product(targets, ("/", "/a/b")):
            request = parse_request(base + path, "GET", headers)
            out = explain(origin, request, scene).outcome
            left = out.delivered or out.dies_at in ("endpoints", "inbound_chain", "rbac")
            counted = left and _counted(out.cluster)
            expected = ({out.cluster: count} if counted else {}, out.code or APP_STATUS)
            before = _counters(mesh, pod)
            args = [a for h in headers for a in ("-H", h)]
            answers = mesh.client(pod, "http", request.url, *args, "--count", str(count))
            after = _counters(mesh, pod)
            rose = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
            statuses = {int(answer.split()[0]) for answer in answers["counts"]}
            if out.cluster == "PassthroughCluster":  # the original destination answered
                statuses |= {0 for answer in answers["counts"] if request.host not in answer}
            if (rose, statuses) != (expected[0], {expected[1]}):
                failures.append(
                    f"{pod} {request.url} {headers}: Envoy {statuses} via {rose}, "
                    f"explain {expected[1]} via {expected[0]} ({out.reason})"
                )
    assert failures == []
    assert_no_nacks(mesh)
