"""The seed's canary upgrade on netns pods under continuous traffic through the ingress
gateway: revision 1-14-3 serves namespace shop (istio.io/rev=default, the `default` tag) and
the gateway; 1-15-4 is installed beside it (its install upgrades the gateway in place, as
istioctl's does); the tag moves to 1-15-4 and a rollout restart moves every proxy there
(proxy-status on 1-15-4 lists them); rollback and forward again; `uninstall --revision
1-14-3`. Not one request fails, and the test says how many were sent."""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.netns_probe import PYTHON, host_support_or_fail, leftovers, new_cluster_name
from tests.e2e.test_run_injected import APP, Lines

from meshpilot.config.kinds import Kind
from meshpilot.install.operator_record import find_operator, revision_socket_dir
from meshpilot.runtime.run.access import MESHPILOT_ARGV
from meshpilot.security.control_plane_record import ControlPlaneRecord, live_records
from meshpilot.store.directory import DirectoryStore

pytestmark = pytest.mark.envoy

A, B = "1-14-3", "1-15-4"
IOP = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec: {profile: default}\n"
READY = re.compile(r"^pod (\S+)/(\S+) ready at (\S+) \((.*)\), logs in (\S+)$")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def workloads() -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Namespace
        metadata: {{name: shop, labels: {{istio.io/rev: default}}}}
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: web, namespace: shop}}
        spec:
          clusterIP: 10.96.0.20
          selector: {{app: web}}
          ports: [{{name: http, port: 8080}}]
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: shop}}
        spec:
          replicas: 2
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web, version: v1}}}}
            spec:
              serviceAccountName: web
              securityContext: {{runAsUser: 65534, runAsGroup: 65534}}
              containers:
              - name: web
                command: [{PYTHON}, {APP}, http, --service, web, --version, v1]
                args: [--pod, $(POD_NAME), --port, "8080"]
                env:
                - name: POD_NAME
                  valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
                ports: [{{containerPort: 8080}}]
        ---
        apiVersion: networking.istio.io/v1
        kind: Gateway
        metadata: {{name: ingress, namespace: istio-system}}
        spec:
          selector: {{istio: ingressgateway}}
          servers:
          - port: {{number: 8080, name: http, protocol: HTTP}}
            hosts: ["*"]
        ---
        apiVersion: networking.istio.io/v1
        kind: VirtualService
        metadata: {{name: web, namespace: istio-system}}
        spec:
          hosts: ["*"]
          gateways: [ingress]
          http:
          - route:
            - destination: {{host: web.shop.svc.cluster.local, port: {{number: 8080}}}}
        """)


def meshpilot(*args: str, timeout: float = 120) -> str:
    result = subprocess.run([*MESHPILOT_ARGV, *args], capture_output=True, text=True,
                            timeout=timeout, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


class Load:
    """~`rps` requests a second through the gateway pods the store lists as ready (a load
    balancer's health check: a pod withdrawn from the store gets no new request)."""

    def __init__(self, store: Path, rps: int = 20) -> None:
        self.store = DirectoryStore(store)
        self.rps = rps
        self.sent = 0
        self.failures: list[str] = []
        self.targets: list[str] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._track, self._send)]

    def _track(self) -> None:
        while not self.stop.is_set():
            self.store.refresh()
            ips = []
            for obj in self.store.snapshot().of_kind(Kind.POD):
                manifest = self.store.manifest(obj.key) or {}
                labels = (manifest.get("metadata") or {}).get("labels") or {}
                status = manifest.get("status") or {}
                ready = {"type": "Ready", "status": "True"} in (status.get("conditions") or [])
                if labels.get("istio") == "ingressgateway" and ready:
                    ips.append(str(status.get("podIP")))
            self.targets = sorted(ips)
            self.stop.wait(0.2)

    def _one(self, ip: str) -> None:
        try:
            with _OPENER.open(f"http://{ip}:8080/", timeout=5) as reply:
                body = reply.read().decode()
                ok = reply.status == 200 and body.startswith("web v1 pod=web-")
                problem = "" if ok else f"{reply.status} {body[:80]}"
        except OSError as exc:
            problem = repr(exc)
        if problem:
            with self._lock:
                self.failures.append(f"{time.time():.2f} {ip}: {problem}")

    def _send(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            while not self.stop.is_set():
                targets = self.targets
                if targets:
                    pool.submit(self._one, targets[self.sent % len(targets)])
                    self.sent += 1
                time.sleep(1 / self.rps)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + 20
        while not self.targets and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.targets, "no ready ingress gateway pod in the store"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


def _record(ca: Path, revision: str) -> ControlPlaneRecord:
    found = [r for r in live_records(ca) if r.revision == revision]
    assert found, f"no control plane of revision {revision}"
    return found[-1]


def _running(store: Path, namespace: str) -> set[str]:
    """The proxies `meshpilot run` runs now (`<pod>.<namespace>`, as proxy-status names them;
    terminating ones left out)."""
    snapshot = DirectoryStore(store).snapshot()
    pods = [o for o in snapshot.of_kind(Kind.POD) if o.key.namespace == namespace]
    return {f"{o.name}.{namespace}" for o in pods if not o.model.metadata.deletion_timestamp}


def _settled(store: Path, namespace: str, count: int, before: set[str]) -> None:
    """Wait until the namespace runs `count` pods, none of `before` (a rollout done)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        now = _running(store, namespace)
        if len(now) == count and not now & before:
            return
        time.sleep(0.3)
    raise AssertionError(f"{namespace}: still {sorted(_running(store, namespace))}")


def _synced(ca: Path, revision: str) -> set[str]:
    port = _record(ca, revision).monitoring_port
    table = meshpilot("proxy-status", "--discovery", f"http://127.0.0.1:{port}")
    return {line.split()[0] for line in table.splitlines()[1:] if line.strip()}


def _all_on(ca: Path, store: Path, revision: str, namespace: str, timeout: float = 30) -> set[str]:
    """The namespace's proxies, once proxy-status on `revision` lists every one."""
    deadline = time.monotonic() + timeout
    while True:
        running, synced = _running(store, namespace), _synced(ca, revision)
        if (running and running <= synced) or time.monotonic() > deadline:
            assert running and running <= synced, (revision, running, synced)
            return running
        time.sleep(0.5)


@pytest.fixture
def ca() -> Iterator[Path]:
    host_support_or_fail()
    ca_dir = Path(tempfile.mkdtemp(prefix="mpc-"))  # short: the sockets' paths
    yield ca_dir
    operator = find_operator(ca_dir)
    if operator is not None:  # its control planes stop with it
        os.kill(operator.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while (find_operator(ca_dir) or live_records(ca_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for record in live_records(ca_dir):
        os.kill(record.pid, signal.SIGKILL)
    shutil.rmtree(revision_socket_dir(ca_dir, A).parent, ignore_errors=True)
    shutil.rmtree(ca_dir, ignore_errors=True)


def test_canary_upgrade_rollback_and_uninstall_without_a_failed_request(
    tmp_path: Path, ca: Path
) -> None:
    store = tmp_path / "store"
    common = ("--store", str(store))
    iop = tmp_path / "iop.yaml"
    iop.write_text(IOP)
    installed = meshpilot("install", "-f", str(iop), "-r", A, "--set", "tag=1.14.3", "-y",
                          "--ca-dir", str(ca), *common)  # fmt: skip
    assert "\u2714 Gateway istio-ingressgateway installed (run by `meshpilot run`)" in installed
    meshpilot("tag", "set", "default", "--revision", A, *common)
    files = tmp_path / "workloads.yaml"
    files.write_text(workloads())
    cluster = new_cluster_name()
    run = subprocess.Popen(
        [*MESHPILOT_ARGV, "run", "-f", str(files), "--all", *common, "--cluster", cluster,
         "--secure-uds", str(revision_socket_dir(ca, A) / "secure.sock"), "--ca-dir", str(ca),
         "--drain", "3"],  # time for every proxy to drop a retired pod, on a loaded CI machine
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = Lines(run)

    def restart(deployment: str, namespace: str, pods: int) -> None:
        before = _running(store, namespace)
        meshpilot("rollout", "restart", f"deployment/{deployment}", "-n", namespace, *common)
        meshpilot("rollout", "status", f"deployment/{deployment}", "-n", namespace, "--timeout",
                  "90", *common)  # fmt: skip
        _settled(store, namespace, pods, before)

    try:
        lines.next(READY, 3, timeout=90)  # web x2 and the gateway
        assert len(_all_on(ca, store, A, "shop")) == 2
        assert len(_all_on(ca, store, A, "istio-system")) == 1
        with Load(store) as load:
            # B beside A; its install upgrades the gateway in place (a new pod on B first)
            meshpilot("install", "-f", str(iop), "-r", B, "--set", "tag=1.15.4", "-y",
                      "--ca-dir", str(ca), *common)  # fmt: skip
            _settled(store, "istio-system", 1, _running(store, "istio-system"))
            gateway = _all_on(ca, store, B, "istio-system")
            for revision in (B, A, B):  # the upgrade, the rollback, forward again
                meshpilot("tag", "set", "default", "--revision", revision, "--overwrite", *common)
                restart("web", "shop", 2)
                restart("istio-ingressgateway", "istio-system", 1)
                moved = _all_on(ca, store, revision, "shop")
                # the gateway is B's Deployment now: restarted, it stays on B
                restarted = _all_on(ca, store, B, "istio-system")
                assert len(moved) == 2 and len(restarted) == 1 and restarted != gateway
                gateway = restarted
                print(f"shop on {revision}: {sorted(moved)}; gateway on {B}: {sorted(gateway)}")
            removed = meshpilot("uninstall", "--revision", A, "-y", "--ca-dir", str(ca), *common)
            assert removed.splitlines()[-1] == "\u2714 Uninstall complete"
            assert {r.revision for r in live_records(ca)} == {B}
            time.sleep(2)  # traffic goes on after A is gone
        print(f"requests sent through the gateway: {load.sent}, failed: {len(load.failures)}")
        if load.failures:  # when each failed, beside the gateway pods' comings and goings
            print("\n".join(sorted(load.failures + [line for line in lines.rest().splitlines()
                                                     if "istio-system/" in line])))  # fmt: skip
        assert load.sent >= 200
    finally:
        run.terminate()
        run.wait(timeout=60)
        err = run.stderr.read() if run.stderr else ""
        print(f"meshpilot run's errors:\n{err}")
    assert run.returncode == 0, lines.rest() + err
    assert not leftovers(cluster)
    assert load.failures == [], load.failures[:20]
