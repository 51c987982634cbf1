"""Ground truth for `meshpilot explain`: requests sent through the live demo mesh (real
netns pods, real Envoys, `meshpilot discovery` over the same files) end where explain says,
as the proxies' own access logs tell.

The mesh config turns access logs on (JSON lines on each proxy's stdout); every request
carries its own x-request-id, and the source proxy's line for it must show the cluster
(`%UPSTREAM_CLUSTER_RAW%`), the response code and the response flags explain predicted. A
weighted route may take any branch with a nonzero weight: the log says which one Envoy drew.
A request explain sends to PassthroughCluster is answered by the original destination (the
external server names the host it was asked for).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.e2e.access_log import ACCESS_LOG_CONFIG, LogLine, find_lines
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for

from meshpilot.cli.main import cli
from meshpilot.config.loader import load_paths
from meshpilot.demo import checks
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.topology import (
    API_HOST,
    EGRESS_HOST,
    EGRESS_POD,
    GATEWAY_NAMESPACE,
    INGRESS_HOST,
    INGRESS_POD,
    UNREGISTERED_HOST,
)
from meshpilot.explain import Explanation, Outcome, build_scene, explain, parse_request, workload_of
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import PushContext, build_push_context

pytestmark = pytest.mark.envoy

APP_STATUS = 200  # what the demo apps answer

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

# ratings accepts mTLS only, while every caller is told to send it plaintext.
STRICT_PLAINTEXT = """\
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: ratings-strict, namespace: default}
spec:
  selector: {matchLabels: {app: ratings}}
  mtls: {mode: STRICT}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings-plaintext, namespace: default}
spec:
  host: ratings.default.svc.cluster.local
  trafficPolicy: {tls: {mode: DISABLE}}
"""


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    for demo in running_mesh():
        assert demo.workspace is not None
        demo.workspace.config.write("access-log.yaml", ACCESS_LOG_CONFIG)
        wait_for(partial(_logged, demo), "the client's sidecar writes access log lines", 30)
        yield demo


def _logged(mesh: DemoMesh) -> bool:
    rid = f"probe-{uuid.uuid4()}"
    mesh.get("client", "http://ratings:9080/", f"x-request-id: {rid}")
    return bool(find_lines(mesh, ["client"], [rid], timeout=2)[rid])


def _push(mesh: DemoMesh) -> PushContext:
    assert mesh.workspace is not None
    loaded = load_paths([mesh.workspace.config.path])
    return build_push_context(loaded.served, loaded.mesh)


def _explain(
    mesh: DemoMesh, pod: str, url: str, *headers: str, namespace: str = "default"
) -> Explanation:
    push = _push(mesh)
    source = push.pod(namespace, pod)
    assert source is not None, pod
    kind = ProxyType.ROUTER if namespace == GATEWAY_NAMESPACE else None
    origin = workload_of(push, source, kind)
    return explain(origin, parse_request(url, "GET", headers), build_scene(push))


def _mismatch(out: Outcome, line: LogLine | None, status: int) -> str:
    """ "" when the source proxy's log line is what explain predicted, else why not."""
    code = out.code if out.code is not None else APP_STATUS
    clusters = [c for c, _ in out.branches] or [out.cluster]
    if line is None:
        return f"no access log line (client got {status})"
    if line.cluster not in clusters or (line.code, line.flags, status) != (code, out.flags, code):
        return (
            f"Envoy logged {line.cluster or '-'} {line.code} {line.flags or '-'} "
            f"({line.details}; client got {status}); explain predicted {' or '.join(clusters)} "
            f"{code} {out.flags or '-'}: {out.reason}"
        )
    return ""


def _one(mesh: DemoMesh, pod: str, rid: str) -> LogLine | None:
    lines = find_lines(mesh, [pod], [rid])[rid]
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


def _check(mesh: DemoMesh, pod: str, url: str, *headers: str) -> Explanation:
    """Send one request; assert the source proxy logged what explain predicted."""
    rid = f"e2e-{uuid.uuid4()}"
    predicted = _explain(mesh, pod, url, *headers, f"x-request-id: {rid}")
    status, body = mesh.get(pod, url, *headers, f"x-request-id: {rid}")
    why = _mismatch(predicted.outcome, _one(mesh, pod, rid), status)
    assert not why, f"{pod} {url} {headers} ({body!r}): {why}"
    if predicted.outcome.cluster == "PassthroughCluster":
        assert predicted.request.host in body, body  # the original destination answered
    return predicted


@pytest.mark.parametrize(
    ("pod", "url", "headers"),
    [
        ("client", "http://reviews:9080/", ("end-user: jason",)),  # header match → v2
        ("client", "http://reviews:9080/", ()),  # weighted v1 80 / v2 20
        ("client", "http://ratings:9080/", ()),
        ("client", "http://ratings:9080/", ("x-demo-fault: abort",)),  # fault 418, FI
        ("client", f"http://{EGRESS_HOST}/", ()),  # through the egress gateway
        ("client", f"http://{API_HOST}/", ()),  # registered external host, directly
        ("client", f"http://{UNREGISTERED_HOST}/", ()),  # ALLOW_ANY: PassthroughCluster
        ("client-locked", f"http://{API_HOST}/", ()),  # registered external host
        ("client-locked", f"http://{UNREGISTERED_HOST}/", ()),  # REGISTRY_ONLY → 502
    ],
)
def test_explain_predicts_what_envoy_logs(
    mesh: DemoMesh, pod: str, url: str, headers: tuple[str, ...]
) -> None:
    _check(mesh, pod, url, *headers)
    assert_no_nacks(mesh)


def test_the_egress_gateway_logs_the_cluster_explain_walks_it_to(mesh: DemoMesh) -> None:
    """The gateway hop: the sidecar's line names the cluster to the egress gateway, the
    gateway's own line the external cluster explain's nested walk reached."""
    rid = f"e2e-{uuid.uuid4()}"
    url = f"http://{EGRESS_HOST}/"
    predicted = _explain(mesh, "client", url, f"x-request-id: {rid}")
    status, _ = mesh.get("client", url, f"x-request-id: {rid}", f"x-e2e-id: {rid}")
    lines = find_lines(mesh, ["client", EGRESS_POD], [rid], each=2)[rid]
    by_pod = {line.pod: line for line in lines}
    assert _mismatch(predicted.outcome, by_pod.get("client"), status) == ""
    onwards = [h.envoy for h in predicted.hops if h.side == "gateway" and h.stage == "cluster"]
    assert by_pod[EGRESS_POD].cluster == onwards[-1]
    assert (by_pod[EGRESS_POD].code, by_pod[EGRESS_POD].flags) == (APP_STATUS, "")


def test_weighted_routes_say_envoy_draws_the_branch(mesh: DemoMesh) -> None:
    rid = f"e2e-{uuid.uuid4()}"
    predicted = _explain(mesh, "client", "http://reviews:9080/", f"x-request-id: {rid}")
    branches = [c for c, _ in predicted.outcome.branches]
    assert sorted(branches) == [
        "outbound|9080|v1|reviews.default.svc.cluster.local",
        "outbound|9080|v2|reviews.default.svc.cluster.local",
    ]
    (note,) = [n for n in predicted.notes if "weighted" in n]
    assert f"picks the branch for request {rid} at random" in note
    assert "80%" in note and "20%" in note


def test_an_rbac_403_is_logged_with_the_policy_explain_names(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    path = Path(mesh.workspace.config.write("explain-authz.yaml", DENY_PATH))
    try:
        wait_for(
            lambda: mesh.get("client", "http://ratings:9080/denied/1")[0] == 403,
            "ratings' sidecar denies /denied",
        )
        rid = f"e2e-{uuid.uuid4()}"
        url = "http://ratings:9080/denied/1"
        denied = _explain(mesh, "client", url, f"x-request-id: {rid}")
        status, _ = mesh.get("client", url, f"x-request-id: {rid}")
        lines = find_lines(mesh, ["client", "ratings-v1"], [rid], each=2)[rid]
        by_pod = {line.pod: line for line in lines}
        assert _mismatch(denied.outcome, by_pod.get("client"), status) == ""
        assert denied.outcome.dies_at == "rbac"
        rbac = [h for h in denied.hops if h.stage == "rbac"]
        assert [o.name for o in rbac[-1].objects] == ["ratings-no-denied"]
        assert rbac[-1].objects[0].file == str(path)
        # ratings' inbound line: 403, and Envoy names the same policy in its details.
        inbound = by_pod["ratings-v1"]
        assert inbound.code == 403
        assert "policy[ratings-no-denied]" in inbound.details, inbound
        _check(mesh, "client", "http://ratings:9080/allowed")
    finally:
        mesh.workspace.config.remove("explain-authz.yaml")
    assert_no_nacks(mesh)


def test_strict_refusing_plaintext_is_logged_as_explain_predicts(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    mesh.workspace.config.write("explain-strict.yaml", STRICT_PLAINTEXT)
    try:
        wait_for(
            lambda: mesh.get("client", "http://ratings:9080/")[0] == 503,
            "ratings' sidecar refuses the plaintext its callers now send",
        )
        refused = _check(mesh, "client", "http://ratings:9080/")
        assert refused.outcome.dies_at == "inbound_chain"
        assert "PeerAuthentication STRICT" in refused.outcome.reason
    finally:
        mesh.workspace.config.remove("explain-strict.yaml")
    wait_for(lambda: mesh.get("client", "http://ratings:9080/")[0] == 200, "plaintext gone")
    assert_no_nacks(mesh)


@pytest.mark.parametrize(
    ("path", "host"),
    [("/productpage", INGRESS_HOST), ("/anything", INGRESS_HOST), ("/", "unknown.demo.test")],
)
def test_ingress_https_through_the_gateway(mesh: DemoMesh, path: str, host: str) -> None:
    """From outside the mesh over HTTPS (SNI bookinfo.demo.test): the gateway's line; a Host
    no virtual host serves gets the gateway's own 404 (NR)."""
    assert mesh.workspace is not None
    rid = f"e2e-{uuid.uuid4()}"
    headers = (f"host: {host}",) if host != INGRESS_HOST else ()
    predicted = _explain(
        mesh,
        INGRESS_POD,
        f"https://{INGRESS_HOST}{path}",
        *headers,
        f"x-request-id: {rid}",
        namespace=GATEWAY_NAMESPACE,
    )
    sent = {"x-request-id": rid, "x-e2e-id": rid, **({"Host": host} if headers else {})}
    status, _ = checks.https_get(
        mesh.ingress, INGRESS_HOST, path, mesh.workspace.ca_file, headers=sent
    )
    why = _mismatch(predicted.outcome, _one(mesh, INGRESS_POD, rid), status)
    assert not why, f"{host}{path}: {why}"
    if host != INGRESS_HOST:
        assert (predicted.outcome.code, predicted.outcome.flags) == (404, "NR")


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
    (256 in all), each with its own x-request-id: the source proxy's log line for each
    equals explain's prediction (cluster or weighted branch, code, flags)."""
    push = _push(mesh)
    scene = build_scene(push)
    targets = [
        ("http://reviews:9080", ("end-user: jason",)),
        ("http://reviews:9080", ()),
        ("http://ratings:9080", ()),
        ("http://ratings:9080", ("x-demo-fault: abort",)),
        ("http://productpage:9080", ()),
        (f"http://{API_HOST}", ()),
        (f"http://{EGRESS_HOST}", ()),
        (f"http://{UNREGISTERED_HOST}", ()),
    ]
    count, failures, seen = 8, [], 0
    for pod in ("client", "client-locked"):
        source = push.pod("default", pod)
        assert source is not None
        origin = workload_of(push, source)
        for (base, headers), path in itertools.product(targets, ("/", "/a/b")):
            request = parse_request(base + path, "GET", headers)
            out = explain(origin, request, scene).outcome
            prefix = f"gen-{uuid.uuid4()}"
            args = [a for h in headers for a in ("-H", h)]
            answers = mesh.client(
                pod, "http", request.url, *args, "--count", str(count), "--request-id", prefix
            )["requests"]
            logged = find_lines(mesh, [pod], [rid for rid, _, _ in answers])
            for rid, status, body in answers:
                seen += 1
                lines = logged[rid]
                why = _mismatch(out, lines[0] if len(lines) == 1 else None, status)
                if not why and out.cluster == "PassthroughCluster" and request.host not in body:
                    why = f"PassthroughCluster, but the answer is {body!r}"
                if why:
                    failures.append(f"{pod} {request.url} {headers} [{rid}]: {why}")
    assert seen == 256
    assert failures == []
    assert_no_nacks(mesh)
