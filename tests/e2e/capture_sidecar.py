"""A real sidecar in a capture test's pod: `meshpilot discovery` over files on a Unix
socket the pod's proxy user can reach, and the agent (`meshpilot proxy sidecar`) as root in
the pod, running this checkout's sources."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.ads_harness import DiscoveryProcess
from tests.e2e.agent_harness import wait_for
from tests.e2e.netns_probe import PYTHON

import meshpilot
from meshpilot.demo.processes import meshpilot_argv
from meshpilot.runtime.pod import Pod, RunAs

ROOT = RunAs(0, 0)
ENV = {"PYTHONPATH": str(Path(meshpilot.__file__).resolve().parents[1])}

# No CA in these tests: plaintext inbound, so Envoy needs no workload certificate.
PLAINTEXT = """\
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: DISABLE}}
"""


@contextmanager
def running_discovery(mesh_yaml: str) -> Iterator[DiscoveryProcess]:
    """Discovery serving `mesh_yaml` (plus PLAINTEXT) until the block ends."""
    shared = Path(tempfile.mkdtemp(prefix="mp-capture-"))
    shared.chmod(0o755)  # the pod's proxy user reaches the socket in here
    (shared / "mesh.yaml").write_text(mesh_yaml + "---\n" + PLAINTEXT)
    discovery = DiscoveryProcess([shared / "mesh.yaml"], shared)
    try:
        discovery.start()
        os.chmod(discovery.uds, 0o666)
        yield discovery
    finally:
        discovery.stop()
        shutil.rmtree(shared, ignore_errors=True)


def start_agent(pod: Pod, ip: str, discovery: DiscoveryProcess, user: RunAs, *extra: str) -> None:
    """The agent for `pod` (Envoy as `user`), until it is ready (the log when not)."""
    argv = meshpilot_argv(
        "proxy", "sidecar", "--pod", pod.key, "--ip", ip,
        "--discovery-address", f"unix:{discovery.uds}",
        "--run-as-proxy-uid", "--proxy-uid", str(user.uid), "--proxy-gid", str(user.gid),
        "--concurrency", "1", "--drain-time-s", "1", "--parent-shutdown-time-s", "2",
        "--termination-drain-duration", "100ms", "--work-dir", str(pod.workdir / "agent"),
        *extra,
    )  # fmt: skip
    pod.start_sidecar(argv, run_as=ROOT, env=ENV)
    try:
        wait_for(lambda: _ready(pod), f"{pod.key}'s proxy ready", 60)
    except AssertionError as exc:
        log = (pod.workdir / "sidecar.log").read_text()[-6000:]
        raise AssertionError(f"{exc}\nagent log:\n{log}") from None


def _ready(pod: Pod) -> bool:
    code = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:15021/healthz/ready')"
    return pod.exec([PYTHON, "-c", code]).returncode == 0


def envoy_stat_sum(pod: Pod, prefix: str, stat: str) -> int:
    """The sum of Envoy's counters `<prefix>...<stat>` (admin port, from inside the pod)."""
    code = (
        "import urllib.request; print(urllib.request.urlopen("
        f"'http://127.0.0.1:15000/stats?format=json&filter={stat}').read().decode())"
    )
    result = pod.exec([PYTHON, "-c", code])
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)["stats"]
    return sum(int(s["value"]) for s in stats if s["name"].startswith(prefix))
