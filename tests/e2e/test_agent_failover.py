"""`meshpilot proxy sidecar --discovery-address a,b`: the real agent and Envoy between two
`meshpilot discovery` replicas sharing one CA dir (one root): the replica serving the proxy
is killed, Envoy stays ready on the configuration it has and is served by the other within
seconds; the agent's certificate came from whichever CA answered."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.agent_harness import Agent, AgentFactory, agent_factory, http_get, wait_for

from meshpilot.runtime.ports import free_ports
from meshpilot.runtime.tokens import project_token
from meshpilot.security.ca import CertificateAuthority

pytestmark = pytest.mark.envoy

MESH = """\
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
PROXY = "demo-1.default"
_DISCOVERY_CLI = "from meshpilot.cli.discovery import discovery; discovery()"


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    xds: int
    secure: int
    monitoring: int

    def serves(self, proxy: str) -> bool:
        status, body = http_get(self.monitoring, "/debug/syncz")
        return status == 200 and proxy in body

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[Replica, Replica, Path, Path]]:
    ca_dir = tmp_path / "ca"
    CertificateAuthority.open(ca_dir)  # the root both replicas sign with
    token = project_token(ca_dir, tmp_path / "pod", "default", "default", "demo-1")
    mesh = tmp_path / "mesh.yaml"
    mesh.write_text(MESH.format(port=free_ports(1)[0]))
    started: list[Replica] = []
    try:
        for name in ("a", "b"):
            xds, secure, monitoring, mtls = free_ports(4)
            args = [sys.executable, "-c", _DISCOVERY_CLI, "-f", str(mesh)]
            args += ["--xds-port", str(xds), "--monitoring-port", str(monitoring)]
            args += ["--ca-dir", str(ca_dir), "--secure-port", str(secure)]
            args += ["--mtls-port", str(mtls)]
            with (tmp_path / f"discovery-{name}.log").open("wb") as log:
                proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            started.append(Replica(name, proc, xds, secure, monitoring))
        for replica in started:
            wait_for(lambda r=replica: http_get(r.monitoring, "/ready")[0] == 200, "ready", 30)
        yield started[0], started[1], ca_dir / "root-cert.pem", token
    finally:
        for replica in started:
            if replica.proc.poll() is None:
                replica.proc.terminate()
                replica.proc.wait(timeout=15)


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, 1.0)


def _listeners(agent: Agent) -> list[Any]:
    status, body = http_get(agent.ports.envoy_admin, "/listeners?format=json")
    assert status == 200, body
    return sorted(body.split())


def test_envoy_moves_to_the_other_replica_and_keeps_its_config_meanwhile(
    replicas: tuple[Replica, Replica, Path, Path], start_agent: AgentFactory
) -> None:
    a, b, root, token = replicas
    addresses = f"127.0.0.1:{a.xds},127.0.0.1:{b.xds}"
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        "--discovery-address", addresses,
        "--root-cert", str(root), "--token-file", str(token),
        "--ca-address", f"127.0.0.1:{a.secure},127.0.0.1:{b.secure}",
    )  # fmt: skip
    ready = f"http://127.0.0.1:{agent.ports.health}/healthz/ready"
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, ready, 40)
    serving = wait_for(lambda: next((r for r in (a, b) if r.serves(PROXY)), None), "a replica")
    other = b if serving is a else a
    before = _listeners(agent)
    serving.kill()
    killed = time.monotonic()
    not_ready = 0
    while not other.serves(PROXY):
        assert time.monotonic() - killed < 5, f"not served by replica {other.name} within 5 s"
        not_ready += http_get(agent.ports.health, "/healthz/ready")[0] != 200
        time.sleep(0.05)
    moved = time.monotonic() - killed
    print(f"proxy served by replica {other.name} {moved:.2f} s after {serving.name} died")
    assert not_ready == 0, "Envoy was not ready while it changed replicas"
    assert _listeners(agent) == before  # the configuration it had, kept and served again
    assert http_get(agent.ports.health, "/healthz/ready")[0] == 200


def test_the_ca_of_a_dead_first_replica_is_passed_over(
    replicas: tuple[Replica, Replica, Path, Path], start_agent: AgentFactory
) -> None:
    """The first CA listed is dead before the agent starts: its certificate comes from
    the second (same root), and Envoy gets ready."""
    a, b, root, token = replicas
    a.kill()
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        "--discovery-address", f"127.0.0.1:{a.xds},127.0.0.1:{b.xds}",
        "--root-cert", str(root), "--token-file", str(token),
        "--ca-address", f"127.0.0.1:{a.secure},127.0.0.1:{b.secure}",
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready", 40)
    assert b.serves(PROXY)
