"""`meshpilot run` as a user runs it, against `meshpilot discovery` on a store: Deployments
get their sidecars by injection (namespace label), talk mTLS with SPIFFE identities, a
held app reaches a mesh service at its first line, and `meshpilot rollout restart` under
continuous load replaces every pod with no failed request."""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.e2e.netns_probe import PYTHON, host_support_or_fail, leftovers, new_cluster_name

import meshpilot.demo
from meshpilot.demo.options import free_port
from meshpilot.demo.processes import ControlPlane
from meshpilot.runtime.run.access import MESHPILOT_ARGV

APP = Path(meshpilot.demo.__file__).with_name("app.py")
CALLER_ID = "spiffe://cluster.local/ns/shop/sa/caller"
READY = re.compile(r"^pod shop/(\S+) ready at (\S+) \((.*)\), logs in (\S+)$")
STOPPED = re.compile(r"^pod shop/web-\S+ stopped$")
# The held app's first line: a mesh service over its sidecar, or exit 1.
FIRST_LINE = (
    "import sys, time, urllib.request; "
    "answer = urllib.request.urlopen('http://web.shop:8080/', timeout=5).read().decode(); "
    "open(sys.argv[1], 'w').write(answer); time.sleep(3600)"
)
# A bounded load: `rps` requests a second from a thread pool until stdin closes (or 90 s),
# then one JSON line: how many were sent, the failures, the distinct answers.
LOAD = textwrap.dedent("""
    import concurrent.futures, json, sys, threading, time, urllib.request
    url, rps = sys.argv[1], int(sys.argv[2])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    def one():
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except Exception as exc:
            return 0, f"{time.time():.2f} {exc!r}"
    sent, results = 0, []
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        end = time.monotonic() + 90
        while not stop.is_set() and time.monotonic() < end:
            results.append(pool.submit(one)); sent += 1
            time.sleep(1 / rps)
    answers = [f.result() for f in results]
    print(json.dumps({"sent": sent, "failed": [a for a in answers if a[0] != 200][:50],
                      "failures": sum(a[0] != 200 for a in answers)}))
""")


def workloads(python: str, out: Path) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Namespace
        metadata: {{name: shop, labels: {{istio-injection: enabled}}}}
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: web, namespace: shop}}
        spec:
          clusterIP: 10.96.0.10
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
                command: [{python}, {APP}, http, --service, web, --version, v1]
                args: [--pod, $(POD_NAME), --port, "8080"]
                env:
                - name: POD_NAME
                  valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
                ports: [{{containerPort: 8080}}]
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: caller, namespace: shop}}
        spec:
          selector: {{matchLabels: {{app: caller}}}}
          template:
            metadata:
              labels: {{app: caller}}
              annotations:
                proxy.istio.io/config: '{{"holdApplicationUntilProxyStarts": true}}'
            spec:
              serviceAccountName: caller
              containers:
              - name: caller
                command: [{python}, -c, "{FIRST_LINE}", {out}]
        """)


class StoreControlPlane(ControlPlane):
    """The demo's control plane process, serving a live store instead of files."""

    @property
    def argv(self) -> list[str]:
        argv = super().argv
        argv[argv.index("-f") : argv.index("-f") + 2] = ["--store", str(self.config)]
        return [*argv, "--webhook-port", "-1"]


@pytest.fixture
def control(tmp_path: Path) -> Iterator[ControlPlane]:
    host_support_or_fail()
    # Pods' Envoys (each its own UID, group 1337) reach the sockets: a path they may cross.
    sockets = Path(tempfile.mkdtemp(prefix="mprun-sock-"))
    sockets.chmod(0o711)
    plane = StoreControlPlane(
        config=tmp_path / "store", socket=sockets / "xds.sock",
        log=tmp_path / "discovery.log", xds_port=free_port(), monitoring_port=free_port(),
        ca_dir=tmp_path / "ca", root_cert=tmp_path / "root-cert.pem",
        secure_socket=sockets / "secure.sock", debounce="50ms",
    )  # fmt: skip
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(sockets)


def meshpilot(*args: str, timeout: float = 30) -> str:
    result = subprocess.run([*MESHPILOT_ARGV, *args], capture_output=True, text=True,
                            timeout=timeout, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


class Lines:
    """`meshpilot run`'s output lines, read by a thread (all kept in `seen`)."""

    def __init__(self, run: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert run.stdout is not None
        stdout = run.stdout
        threading.Thread(
            target=lambda: [self.queue.put(f"{time.time():.2f} {x}") for x in stdout], daemon=True
        ).start()

    def ready(self, count: int, timeout: float = 40) -> list[str]:
        """The next `count` "ready" lines."""
        return self.next(READY, count, timeout)

    def next(self, pattern: re.Pattern[str], count: int, timeout: float = 40) -> list[str]:
        """The next `count` lines matching `pattern` (timestamps stripped)."""
        found: list[str] = []
        deadline = time.monotonic() + timeout
        while len(found) < count:
            try:
                line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {count} {pattern.pattern}: {''.join(self.seen)}"
                ) from None
            self.seen.append(line)
            text = line.strip().split(" ", 1)[1]
            if pattern.match(text):
                found.append(text)
        return found

    def rest(self) -> str:
        while not self.queue.empty():
            self.seen.append(self.queue.get())
        return "".join(self.seen)


def test_run_injects_holds_and_restarts_without_a_failed_request(
    tmp_path: Path, control: ControlPlane
) -> None:
    cluster = new_cluster_name()
    first_line = tmp_path / "first-line.txt"
    files = tmp_path / "workloads.yaml"
    files.write_text(workloads(PYTHON, first_line))  # a python `nobody` may run
    store = str(control.config)
    run = subprocess.Popen(
        [*MESHPILOT_ARGV, "run", "-f", str(files), "--store", store, "--cluster", cluster,
         "--secure-uds", str(control.secure_socket), "--ca-dir", str(control.ca_dir),
         "--drain", "1.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = Lines(run)
    try:
        started = lines.ready(3)
        assert all("(sidecar injected), logs in /" in line for line in started), started
        # Hold: the app's first line got through its sidecar, over mTLS, to a web pod.
        deadline = time.monotonic() + 10
        while not first_line.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        logs = {str(p): p.read_text() for p in Path("/tmp").glob(f"meshpilot-{cluster}-*/*/*.log")}
        assert first_line.exists(), logs
        answer = first_line.read_text().strip()
        assert answer.startswith("web v1 pod=web-") and answer.endswith(f"caller={CALLER_ID}")
        caller = next(READY.match(line).group(1) for line in started if "caller-" in line)  # type: ignore[union-attr]
        netns = f"mp-{cluster}-shop-{caller}"
        load = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-c", LOAD,
             "http://web.shop:8080/", "20"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(1)
        assert meshpilot("rollout", "restart", "deployment/web", "-n", "shop", "--store", store) \
            == "deployment.apps/web restarted\n"  # fmt: skip
        replaced = lines.ready(2)
        assert {READY.match(line).group(1) for line in replaced}.isdisjoint(  # type: ignore[union-attr]
            READY.match(line).group(1)
            for line in started  # type: ignore[union-attr]
        )
        status = meshpilot("rollout", "status", "deployment/web", "-n", "shop", "--store", store,
                           "--timeout", "30")  # fmt: skip
        assert status.splitlines()[-1] == 'deployment "web" successfully rolled out'
        time.sleep(1)
        out, err = load.communicate("", timeout=30)
        report = json.loads(out)
        print(f"requests sent during the rollout: {report['sent']}, failed: {report['failures']}")
        assert report["sent"] >= 100 and report["failures"] == 0, (report, err)
        (last_old,) = lines.next(STOPPED, 1)  # the rollout's last old pod (after the status)
        assert last_old.split()[1].removeprefix("shop/") in {
            READY.match(r).group(1) for r in started
        }  # type: ignore[union-attr]
        # Scaling: 2 -> 1 replicas in the store, one pod goes (the template is unchanged).
        manifest = yaml.safe_load(meshpilot("get", "deployment", "web", "-n", "shop", "--store",
                                            store, "-o", "yaml"))  # fmt: skip
        manifest["spec"]["replicas"] = 1
        (tmp_path / "scaled.yaml").write_text(yaml.safe_dump(manifest))
        meshpilot("apply", "-f", str(tmp_path / "scaled.yaml"), "--store", store)
        (gone,) = lines.next(STOPPED, 1)
        assert gone.split()[1].removeprefix("shop/") in {READY.match(r).group(1) for r in replaced}  # type: ignore[union-attr]
    finally:
        run.terminate()
        run.wait(timeout=60)
        err = run.stderr.read() if run.stderr else ""
        print(f"meshpilot run's errors:\n{err}")
    output = lines.rest()
    assert run.returncode == 0, output + err
    assert output.count(" stopped\n") == 5, output  # 2 replaced, 1 scaled down, 2 at exit
    assert not leftovers(cluster)
    pods = subprocess.run([*MESHPILOT_ARGV, "get", "pods", "-n", "shop", "--store", store],
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    assert (pods.stdout, pods.stderr) == ("", "No resources found in shop namespace.\n")
