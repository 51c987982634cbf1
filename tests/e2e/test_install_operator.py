"""The control plane lifecycle on one machine, as the seed's canary upgrade runs it: `install`
revision a (which starts `meshpilot operator`, which runs a's discovery), install b beside it
(both serve, each seeing its own istio.io/rev config), a's discovery killed and restarted by
the operator, the `default` tag moved from a to b, `uninstall --revision a`, then `--purge`.
A sidecar (real Envoy) on b shows in `version`'s data plane. Real processes on free
loopback ports; every process started here is stopped at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.e2e.agent_harness import Agent, http_get, wait_for

from meshpilot.install.operator_record import find_operator, revision_socket_dir
from meshpilot.istio_version import ISTIO_VERSION
from meshpilot.runtime.ports import free_ports
from meshpilot.security.control_plane_record import ControlPlaneRecord, live_records
from meshpilot.settings import Ports

pytestmark = pytest.mark.envoy

IOP = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec: {profile: minimal}\n"
GITOPS_IOP = """apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
metadata: {name: default-istiocontrolplane, namespace: istio-system}
spec:
  profile: minimal
  revision: c
"""
VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: only-{rev}, namespace: default, labels: {{istio.io/rev: {rev}}}}}
spec:
  hosts: [r]
  http: [{{route: [{{destination: {{host: r}}}}]}}]
"""


def _meshpilot(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", "from meshpilot.cli.main import main; main()", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return response.status, response.read().decode()
    except OSError as exc:
        return 0, str(exc)


def _sidecar(tmp_path: Path, ca: Path, xds_port: int) -> Agent:
    admin, status, health, prometheus = free_ports(4)
    ports = Ports(envoy_admin=admin, agent_status=status, health=health, prometheus=prometheus)
    log = tmp_path / "agent.log"
    argv = [sys.executable, "-c", "from meshpilot.cli.main import main; main()", "proxy",
            "sidecar", "--pod", "web-1.default", "--ip", "127.0.0.1",
            "--discovery-address", f"127.0.0.1:{xds_port}", "--ca-dir", str(ca),
            "--interception-mode", "NONE", "--admin-port", str(admin),
            "--status-port", str(status), "--health-port", str(health),
            "--prometheus-port", str(prometheus), "--concurrency", "1", "--drain-time-s", "1",
            "--termination-drain-duration", "0.5s"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    return Agent(proc, ports, xds_port, tmp_path / "agent", log)


def _record(ca: Path, revision: str, timeout: float = 60) -> ControlPlaneRecord:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r for r in live_records(ca) if r.revision == revision]
        if found and _get(found[0].monitoring_port, "/ready")[0] == 200:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no ready control plane of revision {revision} after {timeout}s")


@pytest.fixture
def ca(tmp_path: Path) -> Iterator[Path]:
    ca_dir = tmp_path / "ca"
    yield ca_dir
    operator = find_operator(ca_dir)
    if operator is not None:  # its control planes stop with it
        os.kill(operator.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while (find_operator(ca_dir) or live_records(ca_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for record in live_records(ca_dir):
        os.kill(record.pid, signal.SIGKILL)


def test_install_two_revisions_operator_restart_tag_and_uninstall(tmp_path: Path, ca: Path) -> None:
    store = str(tmp_path / "store")
    common = ("--store", store)
    iop = tmp_path / "iop.yaml"
    iop.write_text(IOP)

    def install(revision: str, tag: str) -> subprocess.CompletedProcess[str]:
        return _meshpilot("install", "-f", str(iop), "-r", revision, "--set", f"tag={tag}",
                          "-y", "--ca-dir", str(ca), *common)  # fmt: skip

    first = install("a", "1.27.0")
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines() == [
        "\u2714 Istio core installed",
        "\u2714 Istiod installed",
        "\u2714 Installation complete",
    ]
    operator = find_operator(ca)
    assert operator is not None
    second = install("b", "1.28.0")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "WARNING: Istio is being upgraded from 1.27.0 -> 1.28.0" in second.stderr
    assert find_operator(ca) == operator  # the running operator took it

    # both serve, each with its own config: Istio's istio.io/rev rule
    for rev in ("a", "b"):
        (tmp_path / f"vs-{rev}.yaml").write_text(VS.format(rev=rev))
        assert _meshpilot("apply", "-f", str(tmp_path / f"vs-{rev}.yaml"), *common).returncode == 0
    a, b = _record(ca, "a"), _record(ca, "b")
    assert a.xds_port != b.xds_port and a.pid != b.pid
    time.sleep(1.0)  # the pushes of the applies
    configz = {rev: _get(r.monitoring_port, "/debug/configz")[1] for rev, r in (("a", a), ("b", b))}
    assert "only-a" in configz["a"] and "only-b" not in configz["a"]
    assert "only-b" in configz["b"] and "only-a" not in configz["b"]

    # a's control plane dies: the operator starts it again
    os.kill(a.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        again = [r for r in live_records(ca) if r.revision == "a" and r.pid != a.pid]
        if again:
            break
        time.sleep(0.2)
    restarted = _record(ca, "a")
    assert restarted.pid != a.pid

    # the default tag, moved from a to b (the canary's crux)
    assert _meshpilot("tag", "set", "default", "-r", "a", *common).returncode == 0
    moved = _meshpilot("tag", "set", "default", "-r", "b", "--overwrite", *common)
    assert moved.returncode == 0, moved.stderr
    tag = yaml.safe_load(
        _meshpilot(
            "get",
            "mutatingwebhookconfiguration",
            "istio-revision-tag-default",
            "-o",
            "yaml",
            *common,
        ).stdout
    )
    assert tag["metadata"]["labels"]["istio.io/rev"] == "b"
    urls = {h["clientConfig"]["url"] for h in tag["webhooks"]}
    assert urls == {f"https://127.0.0.1:{b.webhook_port}/inject"}  # b's webhook, published

    agent = _sidecar(tmp_path, ca, b.xds_port)
    try:
        wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200,
                 f"sidecar on b ready; log:\n{agent.log}", timeout=60)  # fmt: skip
        version = json.loads(_meshpilot("version", "-o", "json", "--ca-dir", str(ca)).stdout)
        text = _meshpilot("version", "--ca-dir", str(ca), *common).stdout.splitlines()
    finally:
        agent.stop()
    assert sorted((m["Revision"], m["Info"]["version"]) for m in version["meshVersion"]) == [
        ("a", ISTIO_VERSION),  # without the store: the version meshpilot speaks
        ("b", ISTIO_VERSION),
    ]
    assert [(p["Revision"], p["IstioVersion"]) for p in version["dataPlaneVersion"]] == [
        ("b", ISTIO_VERSION)
    ]
    assert text[1] == "control plane version: 1.27.0 (revision a), 1.28.0 (revision b)"
    assert text[2] == f"data plane version: {ISTIO_VERSION} (1 proxy)"

    # an IstioOperator delivered as any object is (kubectl apply, GitOps sync): installed,
    # a change rolled out through its ConfigMaps, its deletion stops the control plane
    delivered = tmp_path / "iop-c.yaml"
    delivered.write_text(GITOPS_IOP)
    assert _meshpilot("apply", "-f", str(delivered), *common).returncode == 0
    _record(ca, "c")
    delivered.write_text(GITOPS_IOP + "  meshConfig: {accessLogFile: /dev/stdout}\n")
    assert _meshpilot("apply", "-f", str(delivered), *common).returncode == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mesh = yaml.safe_load(_meshpilot("get", "cm", "istio-c", "-n", "istio-system", "-o",
                                         "yaml", *common).stdout)["data"]["mesh"]  # fmt: skip
        if "accessLogFile: /dev/stdout" in mesh:
            break
        time.sleep(0.3)
    assert "accessLogFile: /dev/stdout" in mesh
    deleted = _meshpilot("delete", "-f", str(delivered), *common)
    assert deleted.returncode == 0, deleted.stderr
    deadline = time.monotonic() + 30
    while any(r.revision == "c" for r in live_records(ca)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {r.revision for r in live_records(ca)} == {"a", "b"}

    removed = _meshpilot("uninstall", "--revision", "a", "-y", "--ca-dir", str(ca), *common)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert removed.stdout.splitlines()[-1] == "\u2714 Uninstall complete"
    assert {r.revision for r in live_records(ca)} == {"b"}
    listed = _meshpilot("tag", "list", *common).stdout.splitlines()
    assert listed[1].split() == ["default", "b"]  # the tag stays

    purged = _meshpilot("uninstall", "--purge", "-y", "--ca-dir", str(ca), *common)
    assert purged.returncode == 0, purged.stdout + purged.stderr
    deadline = time.monotonic() + 30
    while (find_operator(ca) or live_records(ca)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert find_operator(ca) is None and live_records(ca) == []
    assert not revision_socket_dir(ca, "b").parent.exists()  # pods' socket dirs removed
