"""One live demo mesh (`meshpilot.demo.mesh.DemoMesh`) for a test module: real
network-namespace pods with capture, real Envoys, `meshpilot discovery` over files.

`running_mesh()` is the body of a module-scoped fixture: it starts the mesh once (a cluster
name of its own, free control plane ports) and checks, once it is gone, that no namespace,
link or process of it remains. `assert_no_nacks()` runs after each test.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tests.e2e.netns_probe import host_support_or_fail, leftovers, new_cluster_name

from meshpilot.demo.mesh import DemoMesh, DemoOptions

T = TypeVar("T")


def running_mesh(secret_ttl: str = "24h", ui: bool = False) -> Iterator[DemoMesh]:
    host_support_or_fail()
    name = new_cluster_name()
    options = DemoOptions(
        cluster=name, xds_port=0, monitoring_port=0, secret_ttl=secret_ttl, ui=ui, ui_port=0
    )
    demo = DemoMesh(options)
    with demo:
        links = {pod.wiring.host_link for pod in demo.pods.values()}  # type: ignore[attr-defined]
        pids = mesh_pids(demo)
        yield demo
        pids |= mesh_pids(demo)
    assert leftovers(name, links) == [], "the demo mesh left these behind"
    assert [pid for pid in pids if alive(pid)] == [], "processes outlived the mesh"


def mesh_pids(demo: DemoMesh) -> set[int]:
    """The control plane, every pod process and every Envoy of the mesh."""
    pids = {p.popen.pid for pod in demo.pods.values() for p in pod.processes}
    pids |= {pid for name in demo.pods if (pid := demo.envoy_pid(name))}
    if demo.control is not None and demo.control.proc is not None:
        pids.add(demo.control.proc.pid)
    if demo.web_ui is not None and demo.web_ui.proc is not None:
        pids.add(demo.web_ui.proc.pid)
    return pids


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_no_nacks(demo: DemoMesh) -> None:
    """No Envoy NACKed anything (/debug/syncz)."""
    assert demo.control is not None
    assert demo.control.nacks() == [], "an Envoy rejected its configuration"


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 10) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(0.1)


class Traffic:
    """client.py sending requests for a while in the background, from inside a pod."""

    def __init__(self, mesh: DemoMesh, pod: str, url: str, seconds: float) -> None:
        assert mesh.workspace is not None
        argv = [mesh.python, str(mesh.workspace.client), "http", url]
        argv += ["--duration", str(seconds), "--interval", "0.01"]
        self.proc = subprocess.Popen(
            mesh.pods[pod].command(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def log(self, timeout: float = 30) -> list[tuple[float, int, str]]:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err.decode()
        data: dict[str, Any] = json.loads(out)
        return [(float(t), int(status), str(line)) for t, status, line in data["log"]]


def versions(counts: dict[str, int], app: str) -> dict[str, int]:
    """{'v1': n, ...} from client.py counts of `<status> <app> <version> ...` answers; any
    other answer is kept whole, so that a test sees it."""
    out: dict[str, int] = {}
    for answer, n in counts.items():
        words = answer.split()
        key = words[2] if answer.startswith(f"200 {app} ") else answer
        out[key] = out.get(key, 0) + n
    return out
