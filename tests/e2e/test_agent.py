"""`meshpilot proxy sidecar|router` with the real Envoy: readiness, restart, drain, proxy UID.

Every agent runs on free loopback ports and is stopped by the fixture's finalizer, with any
Envoy it started; so is the control plane (`meshpilot discovery`) where a test needs one.
That control plane runs its CA (a CA dir in the test's directory, made before it starts so
that an agent started first already has the root): the sidecar's inbound listener needs
the workload certificate (SDS `default`, `ROOTCA`) before Envoy is ready, as in Istio.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.e2e.agent_harness import (
    Agent,
    AgentFactory,
    agent_factory,
    http_get,
    listening_addresses,
    process_ids,
    wait_for,
)
from tests.wasm_module import build_module

from meshpilot.runtime.ports import free_ports
from meshpilot.runtime.tokens import project_token
from meshpilot.security.ca import CertificateAuthority

pytestmark = pytest.mark.envoy

DRAIN = 1.0  # --termination-drain-duration in these tests


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, DRAIN)


def test_sidecar_is_not_ready_without_a_control_plane(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar", "--interception-mode", "NONE", "--label", "app=demo")
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    # Envoy waits for its first CDS/LDS (initial_fetch_timeout 0s, as Istio): not LIVE yet.
    status, body = http_get(agent.ports.envoy_admin, "/ready")
    assert status == 503 and "INITIALIZING" in body
    status, body = http_get(agent.ports.agent_status, "/healthz/ready")
    assert status == 503 and "config not received" in body
    # Envoy opens 15021 only once initialized, so a probe there fails as in Istio.
    assert http_get(agent.ports.health, "/healthz/ready")[0] != 200
    # Admin on loopback only.
    assert listening_addresses(agent.ports.envoy_admin) == {"127.0.0.1"}
    boot = json.loads((agent.work_dir / "envoy-rev.json").read_text())
    assert boot["node"]["id"] == "sidecar~127.0.0.1~demo-1.default~default.svc.cluster.local"
    assert boot["node"]["metadata"]["INTERCEPTION_MODE"] == "NONE"
    assert process_ids(agent.envoy_pid())[0] == os.getuid()  # NONE: no proxy UID


def test_envoy_is_restarted_after_sigkill(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar", "--interception-mode", "NONE")
    first = wait_for(agent.envoy_pid, "Envoy started")
    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (pid := agent.envoy_pid()) != first and pid, "Envoy restarted")
    assert second != first
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin again")
    assert agent.proc.poll() is None


def test_agent_gives_up_after_its_restart_budget(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar", "--interception-mode", "NONE", "--max-restarts", "1")
    first = wait_for(agent.envoy_pid, "Envoy started")
    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (pid := agent.envoy_pid()) != first and pid, "Envoy restarted")
    os.kill(second, signal.SIGKILL)
    assert agent.proc.wait(timeout=10) == 1
    assert "gave up after 1 restarts" in agent.log.read_text()


def test_sigterm_drains_then_exits_zero(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar", "--interception-mode", "NONE")
    envoy = wait_for(agent.envoy_pid, "Envoy started")
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    started = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    status, _ = wait_for(
        lambda: (
            (r := http_get(agent.ports.agent_status, "/healthz/ready")) and "DRAINING" in r[1] and r
        ),
        "readiness reports draining",
    )
    assert status == 503
    assert agent.proc.wait(timeout=DRAIN + 8) == 0
    elapsed = time.monotonic() - started
    assert DRAIN - 0.2 <= elapsed < DRAIN + 5, elapsed
    assert not Path(f"/proc/{envoy}").exists(), "Envoy outlived its agent"
    log = agent.log.read_text()
    assert "/drain_listeners?inboundonly&graceful" in log


@pytest.mark.skipif(os.geteuid() != 0, reason="running Envoy as UID 1337 needs root")
def test_capturing_sidecar_runs_envoy_as_proxy_uid(start_agent: AgentFactory) -> None:
    agent = start_agent("sidecar")  # interception REDIRECT: run as 1337 by default
    envoy = wait_for(agent.envoy_pid, "Envoy started")
    assert process_ids(envoy) == (1337, 1337)
    assert agent.work_dir.stat().st_uid == 1337
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")


def test_router_runs_as_the_current_user_and_drains_everything(start_agent: AgentFactory) -> None:
    agent = start_agent("router", "--pod", "gw-1.istio-system")
    envoy = wait_for(agent.envoy_pid, "Envoy started")
    assert process_ids(envoy) == (os.getuid(), os.getgid())
    boot = json.loads((agent.work_dir / "envoy-rev.json").read_text())
    assert boot["node"]["id"].startswith("router~127.0.0.1~gw-1.istio-system~")
    assert "INTERCEPTION_MODE" not in boot["node"]["metadata"]
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(timeout=DRAIN + 8) == 0
    assert "/drain_listeners?graceful" in agent.log.read_text()


MESH = """\
apiVersion: v1
kind: Namespace
metadata: {{name: default}}
---
apiVersion: v1
kind: Service
metadata: {{name: demo, namespace: default, labels: {{app: demo}}}}
spec:
  clusterIP: 10.96.7.7
  selector: {{app: demo}}
  ports:
  - {{name: http, port: {port}, targetPort: {port}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: demo-1, namespace: default, labels: {{app: demo}}}}
spec:
  containers:
  - {{name: app, image: demo, ports: [{{containerPort: {port}}}]}}
status:
  podIP: 127.0.0.1
"""


@dataclass(frozen=True)
class MeshCa:
    """The control plane's CA as the agent sees it: its root, its TLS port, the pod's token."""

    ca_dir: Path
    root_cert: Path
    secure_port: int
    token_file: Path

    def agent_args(self) -> list[str]:
        return [
            "--root-cert", str(self.root_cert),
            "--ca-address", f"127.0.0.1:{self.secure_port}",
            "--token-file", str(self.token_file),
        ]  # fmt: skip


@pytest.fixture
def mesh_ca(tmp_path: Path) -> MeshCa:
    """A CA dir with its root made now, and the token of pod demo-1 (service account
    `default`), as the runtime projects it."""
    ca_dir = tmp_path / "ca"
    CertificateAuthority.open(ca_dir)
    token = project_token(ca_dir, tmp_path / "pod", "default", "default", "demo-1")
    return MeshCa(ca_dir, ca_dir / "root-cert.pem", free_ports(1)[0], token)


Discovery = subprocess.Popen[bytes]


@pytest.fixture
def start_discovery(tmp_path: Path, mesh_ca: MeshCa) -> Iterator[Callable[..., Discovery]]:
    """`meshpilot discovery` on the given loopback port over a one-pod mesh (pod IP
    127.0.0.1, a service on a free port, since a NONE sidecar binds it on 127.0.0.1),
    with the CA of `mesh_ca` on its TLS port; returned once it is ready."""
    pytest.importorskip("meshpilot.xds.server")
    cli = pytest.importorskip("meshpilot.cli.discovery")
    procs: list[Discovery] = []

    def start(xds: int, *extra: str) -> Discovery:
        monitoring, service, mtls = free_ports(3)
        mesh = tmp_path / "mesh.yaml"
        mesh.write_text(MESH.format(port=service))
        code = f"from {cli.__name__} import discovery; discovery()"
        args = ["-f", str(mesh), "--xds-port", str(xds), "--monitoring-port", str(monitoring)]
        args += ["--ca-dir", str(mesh_ca.ca_dir), "--secure-port", str(mesh_ca.secure_port)]
        args += ["--mtls-port", str(mtls), *extra]
        with (tmp_path / "discovery.log").open("wb") as log:
            procs.append(
                subprocess.Popen([sys.executable, "-c", code, *args], stdout=log, stderr=log)
            )
        wait_for(lambda: http_get(monitoring, "/ready")[0] == 200, "discovery ready")
        return procs[-1]

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("xds_type", ["DELTA_GRPC", "GRPC"])
def test_ready_once_config_arrives(
    start_agent: AgentFactory,
    start_discovery: Callable[..., Discovery],
    mesh_ca: MeshCa,
    xds_type: str,
) -> None:
    xds_port = free_ports(1)[0]
    agent = start_agent(
        "sidecar",
        "--interception-mode", "NONE", "--label", "app=demo", "--xds-type", xds_type,
        *mesh_ca.agent_args(),
        discovery_port=xds_port,
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    assert http_get(agent.ports.agent_status, "/healthz/ready")[0] == 503
    # The control plane (and its CA) comes up where the agent looks for it; the agent gets
    # its certificate at its next retry (at most 1 s apart), Envoy reconnects.
    start_discovery(xds_port)
    wait_for(
        lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200,
        "ready via 15021",
        timeout=40,
    )
    assert http_get(agent.ports.agent_status, "/healthz/ready")[0] == 200
    status, body = http_get(agent.ports.prometheus, "/stats/prometheus")
    assert status == 200 and "envoy_server_live" in body


@pytest.mark.parametrize("mode", ["NONE", "REDIRECT"])
def test_envoy_never_outlives_a_killed_agent(start_agent: AgentFactory, mode: str) -> None:
    """SIGKILL leaves the agent no chance to clean up: Envoy gets SIGKILL from the kernel
    (parent-death signal), also when it runs as the proxy UID."""
    agent = start_agent("sidecar", "--interception-mode", mode)
    envoy = wait_for(agent.envoy_pid, "Envoy started")
    agent.proc.kill()
    agent.proc.wait(timeout=5)
    wait_for(lambda: not Path(f"/proc/{envoy}").exists(), "Envoy gone", timeout=5)


def test_two_agents_with_hot_restart_base_ids_coexist(start_agent: AgentFactory) -> None:
    """Without --base-id Envoy runs with hot restart disabled (Istio's way); with it, each
    Envoy needs its own shared-memory base id, which --use-dynamic-base-id picks."""
    first = start_agent("sidecar", "--interception-mode", "NONE", "--use-dynamic-base-id")
    second = start_agent("router", "--pod", "gw-1.istio-system", "--use-dynamic-base-id")
    for agent in (first, second):
        port = agent.ports.envoy_admin
        wait_for(lambda: http_get(port, "/ready")[0] is not None, "admin")  # noqa: B023
        assert agent.proc.poll() is None


def test_ready_over_the_control_planes_unix_socket(
    start_agent: AgentFactory, start_discovery: Callable[..., Discovery], mesh_ca: MeshCa
) -> None:
    """`--discovery-address unix:<path>`: how a pod in another network namespace reaches the
    control plane on the same host (xds-grpc is then a pipe, as in Istio's bootstrap)."""
    socket_path = mesh_ca.ca_dir.parent / "xds.sock"
    start_discovery(free_ports(1)[0], "--xds-uds", str(socket_path))
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        "--discovery-address", f"unix://{socket_path}", *mesh_ca.agent_args(),
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready via 15021")


def test_ready_over_tls_on_the_secure_unix_socket(
    start_agent: AgentFactory, start_discovery: Callable[..., Discovery], mesh_ca: MeshCa
) -> None:
    """How the demo's pods reach the control plane: xDS and the CA over TLS on one Unix
    socket (`--secure-uds`), the control plane verified against the mesh root, the pod's
    identity proven by its token. No plaintext port is used."""
    socket_path = mesh_ca.ca_dir.parent / "secure.sock"
    start_discovery(free_ports(1)[0], "--secure-uds", str(socket_path))
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        "--discovery-address", f"unix:{socket_path}", "--tls",
        "--root-cert", str(mesh_ca.root_cert), "--token-file", str(mesh_ca.token_file),
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready via 15021")
    status, body = http_get(agent.ports.envoy_admin, "/stats?filter=xds-grpc.ssl.handshake")
    assert status == 200 and "cluster.xds-grpc.ssl.handshake: 1" in body


def _xds_connected(agent: Agent) -> bool | None:
    """Envoy's ADS stream is open: a request to the control plane is active (its
    `control_plane.*` stats are not kept, as in Istio); None while admin does not answer."""
    stat = "cluster.xds-grpc.upstream_rq_active"
    status, body = http_get(agent.ports.envoy_admin, f"/stats?filter=^{stat}$")
    return None if status != 200 else f"{stat}: 1" in body


def test_envoy_reconnects_within_a_second_of_a_control_plane_restart(
    start_agent: AgentFactory, start_discovery: Callable[..., Discovery], mesh_ca: MeshCa
) -> None:
    """Envoy's default ADS retry backoff grows to 30 s: after a long outage a proxy came
    back seconds after its control plane. The bootstrap caps it at 1 s (with jitter)."""
    xds_port = free_ports(1)[0]
    discovery = start_discovery(xds_port)
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        *mesh_ca.agent_args(), discovery_port=xds_port,
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready", 40)
    assert _xds_connected(agent)
    discovery.terminate()
    discovery.wait(timeout=10)
    wait_for(lambda: _xds_connected(agent) is False, "Envoy sees the control plane gone")
    time.sleep(8)  # long enough for an uncapped backoff to grow past several seconds
    start_discovery(xds_port)  # returns once the new control plane serves
    restarted = time.monotonic()
    wait_for(lambda: _xds_connected(agent), "Envoy reconnected", timeout=30)
    elapsed = time.monotonic() - restarted
    assert elapsed < 1.5, f"Envoy reconnected {elapsed:.1f}s after the control plane restart"
    assert http_get(agent.ports.health, "/healthz/ready")[0] == 200


_WAIT_CLI = "from meshpilot.cli.proxy import proxy; proxy(prog_name='meshpilot proxy')"


def test_proxy_wait_returns_once_the_real_agent_is_ready(
    start_agent: AgentFactory, start_discovery: Callable[..., Discovery], mesh_ca: MeshCa
) -> None:
    """`meshpilot proxy wait` (the hold's postStart hook) blocks while the proxy has no
    config and returns as soon as Envoy's 15021 readiness answers 200."""
    xds_port = free_ports(1)[0]
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        *mesh_ca.agent_args(), discovery_port=xds_port,
    )  # fmt: skip
    url = f"http://127.0.0.1:{agent.ports.health}/healthz/ready"
    wait = [sys.executable, "-c", _WAIT_CLI, "wait", "--url", url, "--periodMillis", "100"]
    early = subprocess.run([*wait, "--timeoutSeconds", "1"], capture_output=True, text=True)
    assert early.returncode == 1 and "timeout waiting for Envoy proxy" in early.stderr
    waiter = subprocess.Popen(
        [*wait, "--timeoutSeconds", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(1)
        assert waiter.poll() is None, "wait returned before the proxy had its config"
        start_discovery(xds_port)
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert b"Envoy is ready!" in out
    assert http_get(agent.ports.health, "/healthz/ready")[0] == 200


WASM_PLUGIN = """\
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{matchLabels: {{app: demo}}}}
  url: {url}
  sha256: {sha256}
"""


class _Modules(http.server.BaseHTTPRequestHandler):
    module = b""

    def do_GET(self) -> None:
        found = self.path == "/add_header.wasm"
        body = self.module if found else b"not found\n"
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _fetches(agent: Agent) -> dict[str, int]:
    """Envoy's remote Wasm loads: successes and failures."""
    status, body = http_get(agent.ports.envoy_admin, "/stats?filter=wasm.remote_load_fetch_")
    assert status == 200, body
    stats = {}
    for line in body.splitlines():
        key, _, value = line.partition(": ")
        if value.strip().isdigit():
            stats[key.removeprefix("wasm.remote_load_fetch_")] = int(value)
    return stats


def _ecds_names(agent: Agent) -> list[str]:
    status, body = http_get(agent.ports.envoy_admin, "/config_dump?resource=ecds_filters")
    assert status == 200, body
    return [c["ecds_filter"]["name"] for c in json.loads(body).get("configs", [])]


@pytest.mark.parametrize("reachable", [True, False], ids=["served", "unreachable"])
def test_the_agent_fetches_an_http_wasm_module_for_envoy(
    start_agent: AgentFactory,
    start_discovery: Callable[..., Discovery],
    mesh_ca: MeshCa,
    tmp_path: Path,
    reachable: bool,
) -> None:
    """An http WasmPlugin module reaches Envoy through the agent's fetcher, checked against
    its sha256 (Envoy loads it, the ECDS config is applied). Unreachable, the agent says so
    in its log and Envoy counts the failed load."""
    module = build_module(tmp_path / "add_header.wasm").read_bytes()
    _Modules.module = module
    server = http.server.HTTPServer(("127.0.0.1", 0), _Modules)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    if not reachable:
        server.shutdown()
        server.server_close()
    url = f"http://127.0.0.1:{port}/add_header.wasm"
    plugin = tmp_path / "wasm.yaml"
    sha256 = hashlib.sha256(module).hexdigest()
    plugin.write_text(WASM_PLUGIN.format(name="fetched", url=url, sha256=sha256))
    xds_port = free_ports(1)[0]
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        *mesh_ca.agent_args(), discovery_port=xds_port,
    )  # fmt: skip
    try:
        start_discovery(xds_port, "-f", str(plugin))
        name = "extensions.istio.io/wasmplugin/default.fetched"
        if reachable:
            wait_for(lambda: _fetches(agent).get("successes"), "module fetched", 40)
            wait_for(lambda: _ecds_names(agent) == [name], "the plugin's config applied")
            assert _fetches(agent).get("failures") == 0
            assert f"fetched Wasm module {url} ({len(module)} bytes" in agent.log.read_text()
        else:
            wait_for(lambda: _fetches(agent).get("failures"), "fetch failed", 40)
            log = agent.log.read_text()
            assert f"Wasm module {url} not fetched: unreachable: " in log, log[-2000:]
    finally:
        if reachable:
            server.shutdown()
            server.server_close()


BOOTSTRAP_PATCH = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: boot, namespace: default}}
spec:
  workloadSelector: {{labels: {{app: demo}}}}
  configPatches:
  - applyTo: BOOTSTRAP
    patch: {{operation: MERGE, value: {{stats_flush_interval: {interval}}}}}
"""


def _bootstrap(agent: Agent) -> dict[str, object]:
    status, body = http_get(agent.ports.envoy_admin, "/config_dump?mask=bootstrap")
    assert status == 200, body
    found: dict[str, object] = json.loads(body)["configs"][0]["bootstrap"]
    return found


@pytest.mark.parametrize(("interval", "applied"), [("7s", True), ("0.0005s", False)])
def test_bootstrap_patches_are_merged_before_envoy_starts(
    start_agent: AgentFactory,
    start_discovery: Callable[..., Discovery],
    mesh_ca: MeshCa,
    tmp_path: Path,
    interval: str,
    applied: bool,
) -> None:
    """An EnvoyFilter BOOTSTRAP MERGE reaches the bootstrap Envoy starts with; one Envoy
    would reject (a flush interval under 1 ms) is left out, the agent's log naming it, and
    Envoy starts with the agent's own bootstrap."""
    patch = tmp_path / "boot.yaml"
    patch.write_text(BOOTSTRAP_PATCH.format(interval=interval))
    xds_port = free_ports(1)[0]
    start_discovery(xds_port, "-f", str(patch))
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        *mesh_ca.agent_args(), discovery_port=xds_port,
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready")[0] is not None, "admin answers")
    log = agent.log.read_text()
    if applied:
        assert _bootstrap(agent).get("stats_flush_interval") == "7s"
        assert "BOOTSTRAP patches applied: EnvoyFilter default/boot configPatches[0]" in log
    else:
        assert "stats_flush_interval" not in _bootstrap(agent)
        assert "BOOTSTRAP patches left out (EnvoyFilter default/boot configPatches[0]): " in log
