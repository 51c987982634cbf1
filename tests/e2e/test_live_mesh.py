"""The demo mesh, live: network-namespace pods with capture rules, their sidecars and two
gateways (real Envoy), `meshpilot discovery` over watched files, real traffic.

First `meshpilot demo` itself (its own meshes: --check, the loopback fallback, Ctrl-C and
SIGTERM). Then one mesh for the rest of the module (tests/e2e/live_mesh.py); tests that
change the config put it back and wait until traffic shows it. After every test that uses
it, no Envoy may have NACKed anything.
"""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.live_mesh import (
    Traffic,
    alive,
    assert_no_nacks,
    running_mesh,
    versions,
    wait_for,
)
from tests.e2e.netns_probe import host_support_or_fail, leftovers, new_cluster_name

from meshpilot.demo import checks
from meshpilot.demo.manifests import dump
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.routing import reviews_rules
from meshpilot.demo.topology import INGRESS_HOST

pytestmark = pytest.mark.envoy

REVIEWS = "http://reviews:9080/"
RATINGS = "http://ratings:9080/"


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


@pytest.fixture(autouse=True)
def _no_nacks(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "mesh" in request.fixturenames:
        assert_no_nacks(request.getfixturevalue("mesh"))


# ---------------------------------------------------------------- meshpilot demo

DEMO = "from meshpilot.cli.demo import demo; demo(prog_name='meshpilot demo')"
# Every path the demo prints that its processes run from: the workspace and the pods' logs.
_PATHS = re.compile(r"/tmp/meshpilot-demo-[\w-]+|(?<=pod logs: )\S+")


def _paths(output: str) -> set[str]:
    return {m.group(0) for m in _PATHS.finditer(output)}


def _processes_under(paths: set[str]) -> set[int]:
    """Processes whose command line names one of `paths`."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(path in cmdline for path in paths):
                found.add(int(proc.name))
    return found


@pytest.mark.parametrize("loopback", [False, True], ids=["pods", "loopback"])
def test_demo_check_passes_and_leaves_nothing_behind(loopback: bool) -> None:
    host_support_or_fail()
    name = new_cluster_name()
    argv = [sys.executable, "-c", DEMO, "--check", "--name", name]
    argv += ["--loopback"] if loopback else []
    result = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "FAIL" not in result.stdout
    passes = len(re.findall(r"^PASS ", result.stdout, re.MULTILINE))
    assert passes == (12 if loopback else 15), result.stdout
    if loopback:
        # capture (ALLOW_ANY, REGISTRY_ONLY) and sidecar-to-sidecar mTLS need pods
        assert "interceptionMode NONE" in result.stdout and "3 skipped" in result.stdout
    else:
        assert "PASS  mTLS: client -> reviews" in result.stdout
    assert "Done: pods, namespaces, processes and temporary files removed." in result.stderr
    assert leftovers(name) == []
    paths = _paths(result.stdout)
    assert paths and not any(Path(p).exists() for p in paths), paths


@pytest.mark.parametrize(
    ("sig", "status"),
    [(signal.SIGINT, 0), (signal.SIGTERM, 128 + signal.SIGTERM)],
    ids=["ctrl-c", "sigterm"],
)
def test_demo_tears_down_on_ctrl_c_and_sigterm(sig: signal.Signals, status: int) -> None:
    host_support_or_fail()
    name = new_cluster_name()
    argv = [sys.executable, "-c", DEMO, "--name", name]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        stderr = proc.stderr
        lines: list[str] = []
        for line in proc.stdout:
            lines.append(line)
            if "pod logs:" in line:
                break
        guide = "".join(lines)
        wait_for(lambda: "runs until Ctrl-C" in stderr.readline(), "the demo waiting", 60)
        pids = _processes_under(_paths(guide))
        assert len(pids) >= 20, f"expected apps, agents, Envoys and discovery: {pids}"
        # Read both pipes to their end from now on: a full pipe would block the demo's
        # teardown on a write, and the test would wait for it forever.
        rest: list[str] = []
        readers = [
            threading.Thread(target=lambda f=f: rest.extend(f), daemon=True)
            for f in (proc.stdout, stderr)
        ]
        for reader in readers:
            reader.start()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tree = subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,args"], capture_output=True)
            raise AssertionError(
                f"the demo did not stop within 60 s of {sig.name}; its output after the signal:"
                f"\n{''.join(rest)[-4000:]}\nprocesses:\n{tree.stdout.decode()[-6000:]}"
            ) from None
        for reader in readers:
            reader.join(10)
        assert code == status, "".join(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert leftovers(name) == []
    assert [pid for pid in pids if alive(pid)] == []
    assert not any(Path(p).exists() for p in _paths(guide))


def _passes(result: checks.CheckResult) -> None:
    assert result.ok, str(result)


# ---------------------------------------------------------------- (1) ingress


def test_https_through_the_ingress_gateway_verified_by_the_client(mesh: DemoMesh) -> None:
    _passes(checks.check_ingress_https(mesh))
    assert mesh.workspace is not None
    # The certificate is really checked: another CA, or another name, is refused.
    other_ca = mesh.workspace.root / "other-ca.crt"
    other_ca.write_bytes(Path(ssl.get_default_verify_paths().cafile or "/dev/null").read_bytes())
    with pytest.raises(ssl.SSLCertVerificationError):
        checks.https_get(mesh.ingress, INGRESS_HOST, "/productpage", other_ca)
    # A name the gateway does not serve matches no filter chain: the connection is refused.
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        checks.https_get(mesh.ingress, "other.demo.test", "/", mesh.workspace.ca_file)


# ---------------------------------------------------------------- (2) pod to pod


def _inbound_reviews(mesh: DemoMesh) -> int:
    pattern = r"^cluster\.inbound\|9080\|\|.*upstream_rq_total$"
    return sum(sum(mesh.stats(pod, pattern).values()) for pod in ("reviews-v1", "reviews-v2"))


def test_pod_to_pod_through_both_sidecars_by_service_name(mesh: DemoMesh) -> None:
    outbound = r"^cluster\.outbound\|9080\|v[12]\|reviews\.default\..*upstream_rq_total$"
    sent, received = sum(mesh.stats("client", outbound).values()), _inbound_reviews(mesh)
    _passes(checks.check_pod_to_pod(mesh))
    counts = mesh.client("client", "http", REVIEWS, "--count", "10")["counts"]
    assert set(versions(counts, "reviews")) <= {"v1", "v2"}, counts
    # The client's sidecar sent them to a subset cluster; a reviews sidecar received them.
    assert sum(mesh.stats("client", outbound).values()) == sent + 11
    assert _inbound_reviews(mesh) == received + 11
    # productpage's app itself calls http://reviews:9080 (its /etc/hosts, its capture).
    status, line = mesh.get("client", "http://productpage:9080/productpage")
    assert status == 200 and " -> reviews v" in line, line
    assert _inbound_reviews(mesh) == received + 12
    _passes(checks.check_tcp(mesh))


# ---------------------------------------------------------------- (3) egress


def test_external_host_directly_and_through_the_egress_gateway(mesh: DemoMesh) -> None:
    """The sidecar -> egress gateway hop is mTLS (ISTIO_MUTUAL server on 8443, SNI the
    external host): the client's subset cluster and the gateway's listener both count TLS
    handshakes, and the external server hears the client's SPIFFE id from the gateway."""
    _passes(checks.check_egress_direct(mesh))
    gateway = "istio-egressgateway-0"
    pattern = r"^http\.outbound_0\.0\.0\.0_8443.*downstream_rq_total$"
    before = sum(mesh.stats(gateway, pattern).values())
    _passes(checks.check_egress_gateway(mesh))
    assert sum(mesh.stats(gateway, pattern).values()) == before + 1
    assert sum(mesh.stats(gateway, r"^listener\.0\.0\.0\.0_8443\.ssl\.handshake$").values()) > 0
    sent = r"^cluster\.outbound\|443\|external\|istio-egressgateway\..*\.ssl\.handshake$"
    assert sum(mesh.stats("client", sent).values()) > 0


# ---------------------------------------------------------------- (4) traffic split


def test_weighted_split_holds_and_header_match_picks_the_subset(mesh: DemoMesh) -> None:
    result = checks.check_weighted_split(mesh, count=1000, tolerance=0.05)
    _passes(result)
    _passes(checks.check_header_match(mesh, count=50))


# ---------------------------------------------------------------- (5) resilience


def test_retries_faults_and_timeout(mesh: DemoMesh) -> None:
    retries = (
        r"^cluster\.outbound\|9080\|\|ratings\.default\.svc\.cluster\.local.*upstream_rq_retry$"
    )
    before = sum(mesh.stats("client", retries).values())
    _passes(checks.check_retries(mesh))
    counts = mesh.client("client", "http", RATINGS + "flaky", "--count", "20")["counts"]
    assert versions(counts, "ratings") == {"v1": 20}, counts
    assert sum(mesh.stats("client", retries).values()) >= before + 21
    _passes(checks.check_fault_abort(mesh))
    _passes(checks.check_fault_delay(mesh))
    _passes(checks.check_timeout(mesh))


# ---------------------------------------------------------------- (6) outbound policy


def test_registry_only_blocks_and_allow_any_passes(mesh: DemoMesh) -> None:
    _passes(checks.check_registry_only(mesh))
    _passes(checks.check_allow_any(mesh))


# ---------------------------------------------------------------- (7) live reroute


def _reviews_split(mesh: DemoMesh, count: int = 100) -> dict[str, int]:
    return versions(
        mesh.client("client", "http", REVIEWS, "--count", str(count))["counts"], "reviews"
    )


def test_virtual_service_edit_reroutes_within_2s_without_restart_or_failure(
    mesh: DemoMesh,
) -> None:
    pids = {name: mesh.envoy_pid(name) for name in ("client", "reviews-v1", "reviews-v2")}
    assert all(pids.values()), pids
    traffic = Traffic(mesh, "client", REVIEWS, seconds=5)
    time.sleep(1.5)
    with mesh.edited("reviews.yaml", dump(reviews_rules(v1_weight=0))):
        edited_at = time.time()
        log = traffic.log()
    failed = [(t, status, line) for t, status, line in log if status != 200]
    assert not failed, f"requests failed during the change: {failed[:5]}"
    v1 = [t for t, _, line in log if line.startswith("reviews v1 ")]
    assert v1 and v1[0] < edited_at, "no v1 answers before the edit"
    took = v1[-1] - edited_at
    assert took < 2.0, f"v1 still answered {took:.2f}s after the edit"
    assert [line for t, _, line in log if t > edited_at + 2.0 and "reviews v2 " not in line] == []
    assert {name: mesh.envoy_pid(name) for name in pids} == pids, "an Envoy restarted"
    # The edit is undone: the split comes back.
    wait_for(lambda: "v1" in _reviews_split(mesh, 20), "v1 answering again")


# ---------------------------------------------------------------- (8) scaling out


def _versions_sent(mesh: DemoMesh, proxy: str) -> dict[str, str]:
    assert mesh.control is not None
    entry = next(e for e in mesh.control.json("/debug/syncz") if e["proxy"] == proxy)
    return {short: w["version_sent"] for short, w in entry["types"].items()}


def test_scaling_out_reaches_callers_by_an_eds_only_push(mesh: DemoMesh) -> None:
    assert mesh.control is not None
    before = _versions_sent(mesh, "client.default")
    triggers = mesh.control.metrics().get('pilot_push_triggers{type="endpoint"}', 0)
    new = mesh.topology.workload("ratings-v1").scaled("b")
    mesh.add_pod(new)
    try:

        def pods_answering() -> set[str]:
            counts = mesh.client("client", "http", RATINGS, "--count", "20")["counts"]
            return {answer.split()[3] for answer in counts if answer.startswith("200 ")}

        wait_for(lambda: "pod=ratings-v1-b" in pods_answering(), "the new pod answering", 10)
        after = _versions_sent(mesh, "client.default")
        changed = {t for t in before if after.get(t) != before[t]}
        assert changed == {"eds"}, f"types pushed to the client: {changed}"
        assert mesh.control.metrics()['pilot_push_triggers{type="endpoint"}'] > triggers
    finally:
        mesh.remove_pod(new.name)
    wait_for(lambda: pods_answering() == {"pod=ratings-v1"}, "the removed pod gone", 10)


# ---------------------------------------------------------------- (9) a broken file


def test_invalid_file_keeps_the_last_good_config_and_shows_the_error(mesh: DemoMesh) -> None:
    assert mesh.control is not None
    control = mesh.control

    def errors() -> list[dict[str, str]]:
        return [
            d
            for d in control.json("/debug/configz")["diagnostics"]
            if d["severity"] == "error" and d["file"].endswith("ratings.yaml")
        ]

    broken = "apiVersion: networking.istio.io/v1\nkind: [VirtualService\n"
    with mesh.edited("ratings.yaml", broken):
        (diagnostic,) = wait_for(errors, "the error in /debug/configz", 5)
        assert "YAML" in diagnostic["message"], diagnostic
        configz = control.json("/debug/configz")
        stale = {(o["kind"], o["name"]) for o in configz["objects"] if o["stale"]}
        assert stale == {("VirtualService", "ratings")}, stale
        assert control.metrics()["meshpilot_config_errors"] >= 1
        time.sleep(0.5)  # past the poll interval and the debounce: nothing was pushed
        _passes(checks.check_fault_abort(mesh))  # ratings' rules still serve
        _passes(checks.check_retries(mesh))
    wait_for(lambda: not errors(), "the error cleared", 5)
    _passes(checks.check_fault_abort(mesh))
