"""Two `meshpilot discovery --store etcd://...` replicas on one real etcd, with one root: the
plugged-in CA (`--cacerts`, Istio's layout) given to both, each with its own CA dir holding
a copy of the token-signing key. The real agent lists both (`--discovery-address a,b`): the
replica serving it is killed, the other serves it within seconds while Envoy stays ready,
and a change written to etcd afterwards reaches Envoy from the survivor."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.e2e.agent_harness import Agent, AgentFactory, agent_factory, http_get, wait_for
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401
from tests.unit.security.pki import write_cacerts

from meshpilot.runtime.ports import free_ports
from meshpilot.runtime.tokens import project_token
from meshpilot.security.tokens import TOKEN_KEY_FILE

pytestmark = pytest.mark.envoy

MESHPILOT = Path(sys.executable).parent / "meshpilot"
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default, labels: {{app: {name}}}}}
spec:
  clusterIP: {ip}
  selector: {{app: {name}}}
  ports:
  - {{name: http, port: {port}, targetPort: {port}}}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: demo-1, namespace: default, labels: {app: demo}}
spec:
  containers:
  - {name: app, image: demo}
status:
  podIP: 127.0.0.1
"""
PROXY = "demo-1.default"


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    xds: int
    secure: int
    monitoring: int
    log: Path

    def serves(self, proxy: str) -> bool:
        status, body = http_get(self.monitoring, "/debug/syncz")
        return status == 200 and proxy in body

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def meshpilot(*args: str) -> str:
    done = subprocess.run([str(MESHPILOT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class Setup:
    url: str
    replicas: tuple[Replica, Replica]
    root: Path
    token: Path
    work: Path


@pytest.fixture
def setup(etcd: EtcdServer, tmp_path: Path) -> Iterator[Setup]:
    url = etcd.url("/meshpilot")
    mesh = tmp_path / "mesh.yaml"
    service = SERVICE.format(name="demo", ip="10.96.7.7", port=free_ports(1)[0])
    mesh.write_text(service + "---\n" + POD)
    meshpilot("apply", "-f", str(mesh), "--store", url)
    write_cacerts(tmp_path / "cacerts")
    ca_dirs = [tmp_path / "ca-a", tmp_path / "ca-b"]
    token = project_token(ca_dirs[0], tmp_path / "pod", "default", "default", "demo-1")
    ca_dirs[1].mkdir(mode=0o700)
    shutil.copy2(ca_dirs[0] / TOKEN_KEY_FILE, ca_dirs[1] / TOKEN_KEY_FILE)  # as cacerts
    started: list[Replica] = []
    try:
        for name, ca_dir in zip("ab", ca_dirs, strict=True):
            xds, secure, monitoring, mtls = free_ports(4)
            args = [str(MESHPILOT), "discovery", "--store", url, "--debounce", "50ms"]
            args += ["--xds-port", str(xds), "--monitoring-port", str(monitoring)]
            args += ["--ca-dir", str(ca_dir), "--cacerts", str(tmp_path / "cacerts")]
            args += ["--secure-port", str(secure), "--mtls-port", str(mtls)]
            log = tmp_path / f"discovery-{name}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
            started.append(Replica(name, proc, xds, secure, monitoring, log))
        for r in started:
            wait_for(lambda r=r: http_get(r.monitoring, "/ready")[0] == 200, f"{r.log} ready", 30)
        yield Setup(url, (started[0], started[1]), tmp_path / "cacerts/root-cert.pem", token,
                    tmp_path)  # fmt: skip
    finally:
        for replica in started:
            if replica.proc.poll() is None:
                replica.proc.terminate()
                replica.proc.wait(timeout=15)


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, 1.0)


def _clusters(agent: Agent) -> str:
    return http_get(agent.ports.envoy_admin, "/clusters")[1]


def test_proxies_move_between_replicas_on_one_etcd_with_one_root(
    setup: Setup, start_agent: AgentFactory
) -> None:
    a, b = setup.replicas
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo",
        "--discovery-address", f"127.0.0.1:{a.xds},127.0.0.1:{b.xds}",
        "--root-cert", str(setup.root), "--token-file", str(setup.token),
        "--ca-address", f"127.0.0.1:{a.secure},127.0.0.1:{b.secure}",
    )  # fmt: skip
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready", 40)
    assert "outbound|" in _clusters(agent) and "demo.default.svc.cluster.local" in _clusters(agent)
    serving = wait_for(lambda: next((r for r in (a, b) if r.serves(PROXY)), None), "a replica")
    other = b if serving is a else a
    serving.kill()
    killed = time.monotonic()
    not_ready = 0
    while not other.serves(PROXY):
        assert time.monotonic() - killed < 5, f"not served by replica {other.name} within 5 s"
        not_ready += http_get(agent.ports.health, "/healthz/ready")[0] != 200
        time.sleep(0.05)
    print(f"served by replica {other.name} {time.monotonic() - killed:.2f} s after the kill")
    assert not_ready == 0
    # A change written to etcd now reaches Envoy from the replica that is left.
    extra = setup.work / "extra.yaml"
    extra.write_text(SERVICE.format(name="extra", ip="10.96.7.8", port=free_ports(1)[0]))
    meshpilot("apply", "-f", str(extra), "--store", setup.url)
    wait_for(lambda: "extra.default.svc.cluster.local" in _clusters(agent), "the new Service", 10)
    assert http_get(agent.ports.health, "/healthz/ready")[0] == 200
