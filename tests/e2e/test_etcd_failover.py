"""Failover end to end on a real three-member etcd cluster on loopback: two `meshpilot
discovery` replicas on it (one root through a shared --cacerts), two gateway Envoys (the
real agent, `meshpilot proxy router`) listing both replicas in opposite orders, and
requests through both gateways all along. One replica is killed -> its proxies are served
by the other within 5 s and no request fails. The etcd leader is killed -> writes resume
after the election, every object written is there (checked key by key), and a change
reaches the gateways through the surviving replica's watch; the killed replica, restarted,
has it too."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.e2e.agent_harness import AgentFactory, agent_factory, http_get, wait_for
from tests.etcd_cluster import EtcdCluster, etcd_cluster_fixture  # noqa: F401
from tests.unit.security.pki import write_cacerts

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.runtime.ports import free_ports
from meshpilot.runtime.tokens import project_token
from meshpilot.security.tokens import TOKEN_KEY_FILE
from meshpilot.store.etcd import EtcdError, parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore

pytestmark = pytest.mark.envoy

MESHPILOT = Path(sys.executable).parent / "meshpilot"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MESH = """\
apiVersion: v1
kind: Service
metadata: {{name: backend, namespace: default, labels: {{app: backend}}}}
spec:
  clusterIP: 10.96.9.9
  selector: {{app: backend}}
  ports:
  - {{name: http, port: 80, targetPort: {backend}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: backend-1, namespace: default, labels: {{app: backend}}}}
spec:
  containers:
  - {{name: app, image: backend, ports: [{{containerPort: {backend}}}]}}
status:
  podIP: 127.0.0.1
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw1, namespace: istio-system}}
spec:
  selector: {{istio: gw1}}
  servers:
  - port: {{number: {gw1}, name: http, protocol: HTTP}}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw2, namespace: istio-system}}
spec:
  selector: {{istio: gw2}}
  servers:
  - port: {{number: {gw2}, name: http, protocol: HTTP}}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: backend, namespace: istio-system}}
spec:
  hosts: ["*"]
  gateways: [gw1, gw2]
  http:
  - route:
    - destination: {{host: backend.default.svc.cluster.local, port: {{number: 80}}}}
"""
EXTRA = """\
apiVersion: v1
kind: Service
metadata: {name: extra, namespace: default}
spec:
  clusterIP: 10.96.9.10
  ports:
  - {name: http, port: 80}
"""


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args: object) -> None:
        pass


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


@dataclass
class Traffic:
    """GETs through both gateways, one after the other, until stopped (2 min at most)."""

    ports: tuple[int, ...]
    sent: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            for port in self.ports:
                self.sent += 1
                try:
                    with _OPENER.open(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                        if reply.status != 200:
                            self.failures.append(f":{port} {reply.status}")
                except OSError as exc:
                    self.failures.append(f":{port} {exc}")
            time.sleep(0.01)


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, 1.0)


@pytest.fixture
def backend() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def replicas(etcd_cluster: EtcdCluster, tmp_path: Path) -> Iterator[list[Replica]]:
    write_cacerts(tmp_path / "cacerts")
    (tmp_path / "ca-a").mkdir(mode=0o700)
    (tmp_path / "ca-b").mkdir(mode=0o700)
    started: list[Replica] = []
    try:
        for name in ("a", "b"):
            xds, secure, monitoring, mtls = free_ports(4)
            args = [str(MESHPILOT), "discovery", "--store", etcd_cluster.url(),
                    "--debounce", "50ms", "--xds-port", str(xds),
                    "--monitoring-port", str(monitoring), "--ca-dir", str(tmp_path / f"ca-{name}"),
                    "--cacerts", str(tmp_path / "cacerts"), "--secure-port", str(secure),
                    "--mtls-port", str(mtls)]  # fmt: skip
            if name == "b":  # the token key, given to every replica as cacerts is
                shutil.copy2(tmp_path / "ca-a" / TOKEN_KEY_FILE, tmp_path / "ca-b" / TOKEN_KEY_FILE)
            with (tmp_path / f"discovery-{name}.log").open("wb") as log:
                proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            started.append(Replica(name, proc, xds, secure, monitoring))
            wait_for(lambda r=started[-1]: http_get(r.monitoring, "/ready")[0] == 200, "ready", 30)
        yield started
    finally:
        for replica in started:
            if replica.proc.poll() is None:
                replica.proc.terminate()
                replica.proc.wait(timeout=15)


def _has_extra(admin_port: int) -> bool:
    return "extra.default.svc.cluster.local" in http_get(admin_port, "/clusters")[1]


def _write(store: EtcdStore, name: str) -> None:
    """One ConfigMap, retried while etcd elects a leader (a refused write is not applied)."""
    doc = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": {"n": name}}  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            store.apply([RawDocument("<test>", 1, doc, {})])
            return
        except EtcdError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_replica_and_etcd_leader_failover_under_traffic(
    etcd_cluster: EtcdCluster,
    replicas: list[Replica],
    start_agent: AgentFactory,
    backend: int,
    tmp_path: Path,
) -> None:
    a, b = replicas
    gw1, gw2 = free_ports(2)
    mesh = tmp_path / "mesh.yaml"
    mesh.write_text(MESH.format(backend=backend, gw1=gw1, gw2=gw2))
    subprocess.run([str(MESHPILOT), "apply", "-f", str(mesh), "--store", etcd_cluster.url()],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    root = tmp_path / "cacerts" / "root-cert.pem"
    routers = []
    for n, order in ((1, (a, b)), (2, (b, a))):
        token = project_token(tmp_path / "ca-a", tmp_path / f"gw-{n}", "istio-system",
                              "default", f"gw-{n}")  # fmt: skip
        routers.append(start_agent(
            "router", "--pod", f"gw-{n}.istio-system", "--label", f"istio=gw{n}",
            "--discovery-address", ",".join(f"127.0.0.1:{r.xds}" for r in order),
            "--ca-address", ",".join(f"127.0.0.1:{r.secure}" for r in order),
            "--root-cert", str(root), "--token-file", str(token),
        ))  # fmt: skip
    for port in (gw1, gw2):
        wait_for(lambda p=port: http_get(p, "/")[0] == 200, f"gateway :{port} serves", 60)
    proxies = [f"gw-{n}.istio-system" for n in (1, 2)]
    spread = {p: next((r.name for r in (a, b) if r.serves(p)), None) for p in proxies}
    traffic = Traffic((gw1, gw2))
    sender = threading.Thread(target=traffic.run)
    sender.start()
    try:
        time.sleep(1)
        # 1. The replica serving gw-1 dies: both gateways are served by the other.
        victim = next(r for r in (a, b) if r.serves(proxies[0]))
        survivor = b if victim is a else a
        victim.proc.kill()
        victim.proc.wait()
        killed = time.monotonic()
        wait_for(lambda: all(survivor.serves(p) for p in proxies), "all on the survivor", 5)
        moved = time.monotonic() - killed
        time.sleep(1)
        # 2. The etcd leader dies while objects are written: writes resume, none is lost.
        writer = EtcdStore(parse_etcd_url(etcd_cluster.url()))
        names = [f"cm-{i}" for i in range(40)]
        leader = etcd_cluster.leader()
        assert leader is not None
        for name in names[:20]:
            _write(writer, name)
        etcd_cluster.kill(leader)
        lost = time.monotonic()
        _write(writer, names[20])
        resumed = time.monotonic() - lost
        for name in names[21:]:
            _write(writer, name)
        extra = tmp_path / "extra.yaml"
        extra.write_text(EXTRA)
        subprocess.run([str(MESHPILOT), "apply", "-f", str(extra), "--store", etcd_cluster.url()],
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        for router in routers:
            wait_for(lambda r=router: _has_extra(r.ports.envoy_admin), "the change in Envoy", 15)
        # 3. The killed replica restarts: it catches up with what was written meanwhile.
        restarted = subprocess.Popen(victim.proc.args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)  # fmt: skip
        victim.proc = restarted
        wait_for(lambda: http_get(victim.monitoring, "/ready")[0] == 200, "restarted", 30)
        registry = http_get(victim.monitoring, "/debug/registryz")[1]
        assert "extra.default.svc.cluster.local" in registry
        time.sleep(1)
    finally:
        traffic.stop.set()
        sender.join()
    reader = EtcdStore(parse_etcd_url(etcd_cluster.url()))
    for name in names:
        stored = reader.manifest(ConfigKey(Kind.CONFIG_MAP, "default", name))
        assert stored is not None and stored["data"] == {"n": name}, name
    print(f"spread {spread}; proxies moved {moved:.2f} s after replica {victim.name} died; "
          f"etcd writes resumed {resumed:.2f} s after leader {leader.name} died; "
          f"{traffic.sent} requests, {len(traffic.failures)} failed")  # fmt: skip
    assert traffic.failures == []
    assert traffic.sent > 100
