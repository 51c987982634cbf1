"""The README's hand-run mesh: `meshpilot discovery -f examples/bookinfo/`, then `meshpilot
proxy sidecar|router --pod ...` with no certificate flags, on one machine as one user. The
agent finds the control plane's root and TLS port in its CA dir (~/.meshpilot/ca: HOME is
the test's own directory here) and signs its token with that dir's key; Envoy gets its
workload certificate over SDS and becomes ready. An agent whose CA cannot be reached says so
every few seconds, naming the fix. Loopback ports are free ones, as in the other e2e tests."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.e2e.agent_harness import Agent, http_get, wait_for

from meshpilot.runtime.ports import free_ports
from meshpilot.security.ca import CertificateAuthority
from meshpilot.settings import Ports

pytestmark = pytest.mark.envoy

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
INGRESS = "istio-ingressgateway-5d8f7b9c4-x2x7p.istio-system"


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose home is the test's: `~/.meshpilot/ca` is fresh."""
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPILOT_")}
    return {**env, "HOME": str(tmp_path / "home")}


@pytest.fixture
def processes() -> Iterator[list[Agent]]:
    """Every process a test starts (agents and discovery alike), stopped at the end."""
    started: list[Agent] = []
    yield started
    for proc in reversed(started):
        proc.stop()


Start = Callable[..., Agent]


@pytest.fixture
def start(tmp_path: Path, home: dict[str, str], processes: list[Agent]) -> Start:
    def run(name: str, *args: str, ports: Ports | None = None) -> Agent:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [MESHPILOT, *args], stdout=out, stderr=subprocess.STDOUT, env=home
            )
        agent = Agent(proc, ports or Ports(), 0, tmp_path / name, log)
        processes.append(agent)
        return agent

    return run


def _discovery(start: Start) -> int:
    xds, monitoring = free_ports(2)
    start("discovery", "discovery", "-f", str(REPO / "examples" / "bookinfo"),
          "--xds-port", str(xds), "--monitoring-port", str(monitoring))  # fmt: skip
    wait_for(lambda: http_get(monitoring, "/ready")[0] == 200, "discovery ready", timeout=30)
    return xds


def _proxy(start: Start, kind: str, pod: str, xds: int, *extra: str) -> Agent:
    admin, status, health, prometheus = free_ports(4)
    ports = Ports(envoy_admin=admin, agent_status=status, health=health, prometheus=prometheus)
    return start(
        f"agent-{kind}", "proxy", kind, "--pod", pod, "--ip", "127.0.0.1",
        "--discovery-address", f"127.0.0.1:{xds}",
        "--admin-port", str(admin), "--status-port", str(status),
        "--health-port", str(health), "--prometheus-port", str(prometheus),
        "--concurrency", "1", "--drain-time-s", "1", "--termination-drain-duration", "0.5s",
        *extra, ports=ports,
    )  # fmt: skip


def test_readme_sequence_sidecar_becomes_ready_without_certificate_flags(
    start: Start, home: dict[str, str]
) -> None:
    xds = _discovery(start)
    records = Path(home["HOME"]) / ".meshpilot" / "ca" / "control-planes"
    [record] = records.glob("*.json")
    assert stat.S_IMODE(records.stat().st_mode) == 0o700
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    agent = _proxy(start, "sidecar", PRODUCTPAGE, xds, "--interception-mode", "NONE")
    wait_for(
        lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200,
        f"sidecar ready on 15021; log:\n{agent.log}",
        timeout=40,
    )
    log = agent.log.read_text()
    assert "control plane on this machine" in log and "tokens signed with the CA dir's key" in log
    status, certs = http_get(agent.ports.envoy_admin, "/certs")
    assert status == 200 and "spiffe://cluster.local/ns/default/sa/default" in certs
    assert "Bearer" not in log and "eyJ" not in log  # the token is never logged


def test_readme_gateway_gets_its_tls_secret_over_the_tls_port(
    start: Start, home: dict[str, str]
) -> None:
    """A gateway's `kubernetes://` secret goes only to a stream that proves its identity:
    the agent moves its xDS to the control plane's TLS port with the workload certificate."""
    xds = _discovery(start)
    agent = _proxy(start, "router", INGRESS, xds)
    wait_for(
        lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200,
        "gateway ready on 15021",
        timeout=40,
    )
    assert "over TLS" in agent.log.read_text()
    _, dump = http_get(agent.ports.envoy_admin, "/config_dump?resource=dynamic_active_secrets")
    assert "kubernetes://bookinfo-credential" in dump


def test_agent_that_cannot_get_a_certificate_says_so_every_few_seconds(
    start: Start, tmp_path: Path
) -> None:
    CertificateAuthority.open(tmp_path / "ca")
    (tmp_path / "token").write_text("not-a-real-token\n")
    closed = free_ports(1)[0]  # nothing listens there: the CA is down
    agent = _proxy(
        start, "sidecar", PRODUCTPAGE, free_ports(1)[0], "--interception-mode", "NONE",
        "--root-cert", str(tmp_path / "ca" / "root-cert.pem"),
        "--ca-address", f"127.0.0.1:{closed}", "--token-file", str(tmp_path / "token"),
    )  # fmt: skip

    def complaints() -> list[str]:
        text = agent.log.read_text()
        return [line for line in text.splitlines() if "no workload certificate for" in line]

    wait_for(lambda: len(complaints()) >= 3, "three complaints within a few seconds", timeout=20)
    line = complaints()[-1]
    assert "spiffe://cluster.local/ns/default/sa/default" in line
    assert f"Is the control plane's CA running at 127.0.0.1:{closed}?" in line
    assert "Start `meshpilot discovery`" in line and "--root-cert" in line
    assert "not-a-real-token" not in agent.log.read_text()
    assert http_get(agent.ports.agent_status, "/healthz/ready")[0] == 503


def test_agent_with_no_control_plane_here_says_what_to_give(start: Start) -> None:
    agent = _proxy(start, "sidecar", PRODUCTPAGE, free_ports(1)[0], "--interception-mode", "NONE")
    wait_for(
        lambda: "no control plane of this user on this machine" in agent.log.read_text(),
        "the agent's warning",
    )
    text = agent.log.read_text()
    assert "start `meshpilot discovery` here first, or give --root-cert and --token-file" in text
