"""Pods on one machine with real namespaces, veth pairs and a bridge: traffic between them,
the sidecar hook, and teardown that leaves nothing behind (normal exit, exception, SIGTERM,
and a crashed run cleaned up by the next one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.e2e.netns_probe import (
    PYTHON,
    host_support_or_fail,
    leftovers,
    new_cluster_name,
    running_cluster,
)

from meshpilot.errors import MeshpilotError
from meshpilot.runtime.cluster import Cluster, ClusterConfig, ClusterError
from meshpilot.runtime.netns import list_netns
from meshpilot.runtime.pod import PROXY_USER, PodError, PodSpec, RunAs

HTTP_SERVER = (PYTHON, "-m", "http.server", "8080")
FETCH = (
    "import sys, urllib.request; "
    "print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())"
)


@pytest.fixture(scope="module", autouse=True)
def _host_support() -> None:
    host_support_or_fail()


def test_two_pods_talk_over_the_bridge(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from b\n")
    with running_cluster() as cluster:
        server = cluster.add_pod(PodSpec(name="b", labels={"app": "b"}))
        client = cluster.add_pod(PodSpec(name="a"))
        assert cluster.bridge is not None and server.ip != client.ip
        assert {server.ip, client.ip} <= set(cluster.bridge.subnet.hosts())
        server.spawn("app", [*HTTP_SERVER, "--bind", str(server.ip), "--directory", str(tmp_path)])
        server.wait_listening(8080)
        result = client.exec([PYTHON, "-c", FETCH, f"http://{server.ip}:8080/hello.txt"])
        assert result.returncode == 0, result.stderr
        assert result.stdout == "hello from b\n\n"
        assert set(list_netns()) >= {server.netns, client.netns}


def test_explicit_ip_and_pod_key(tmp_path: Path) -> None:
    with running_cluster() as cluster:
        subnet = cluster.bridge.subnet if cluster.bridge else None
        assert subnet is not None
        wanted = str(subnet.network_address + 42)
        pod = cluster.add_pod(PodSpec(name="fixed", namespace="shop", ip=wanted))
        assert str(pod.ip) == wanted and pod.key == "fixed.shop"
        with pytest.raises(MeshpilotError, match="already taken"):
            cluster.add_pod(PodSpec(name="other", ip=wanted))
        with pytest.raises(PodError, match="already exists"):
            cluster.add_pod(PodSpec(name="fixed", namespace="shop"))
        addr = pod.exec(["ip", "-4", "-o", "addr", "show", "eth0"]).stdout
        assert f"{wanted}/{subnet.prefixlen}" in addr


def test_sidecar_runs_inside_the_namespace_as_the_proxy_user() -> None:
    with running_cluster() as cluster:
        pod = cluster.add_pod(PodSpec(name="withsidecar"))
        sidecar = pod.start_sidecar(["sleep", "30"])
        _wait_for(lambda: "sleep" in Path(f"/proc/{sidecar.popen.pid}/comm").read_text())
        status = Path(f"/proc/{sidecar.popen.pid}/status").read_text()
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        assert uid_line.split()[1:] == [str(PROXY_USER.uid)] * 4
        netns_inode = os.stat(f"/run/netns/{pod.netns}").st_ino
        assert os.stat(f"/proc/{sidecar.popen.pid}/ns/net").st_ino == netns_inode
    assert sidecar.popen.poll() is not None, "teardown left the sidecar running"


def test_app_may_not_run_as_the_proxy_uid_under_capture() -> None:
    from meshpilot.capture.rules import CaptureConfig

    with pytest.raises(PodError, match="capture lets through"):
        PodSpec(name="bad", app=("true",), app_user=RunAs(1337, 1337), capture=CaptureConfig())


def test_teardown_after_an_exception() -> None:
    name = new_cluster_name()
    cluster = Cluster(ClusterConfig(name=name, stop_grace=1.0))
    with pytest.raises(RuntimeError, match="boom"), cluster:
        pod = cluster.add_pod(PodSpec(name="p", app=("sleep", "30")))
        links = {pod.wiring.host_link}
        raise RuntimeError("boom")
    assert leftovers(name, links) == []
    assert pod.processes == []


def test_a_name_in_use_is_refused() -> None:
    with running_cluster() as cluster:
        with pytest.raises(ClusterError, match="in use by process"):
            Cluster(ClusterConfig(name=cluster.name)).start()
        assert cluster.bridge is not None  # the refused one removed nothing of ours
        assert cluster.bridge.name in _link_names()


OWNER_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from meshpilot.runtime.cluster import Cluster, ClusterConfig
    from meshpilot.runtime.pod import PodSpec
    cluster = Cluster(ClusterConfig(name=sys.argv[1], stop_grace=1.0))
    with cluster:
        pod = cluster.add_pod(PodSpec(name="p", app=("sleep", "60")))
        print(pod.wiring.host_link, pod.processes[0].popen.pid, pod.workdir.parent, flush=True)
        if sys.argv[2] == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    """
)


@dataclass
class Owner:
    """A process owning a one-pod cluster."""

    proc: subprocess.Popen[str]
    link: str
    app_pid: int
    workdir: Path

    @classmethod
    def start(cls, name: str, mode: str) -> Owner:
        argv = [sys.executable, "-c", OWNER_SCRIPT, name, mode]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        link, app_pid, workdir = proc.stdout.readline().split()
        return cls(proc, link, int(app_pid), Path(workdir))

    def app_gone(self) -> bool:
        return not Path(f"/proc/{self.app_pid}").exists() or _is_zombie(self.app_pid)


def test_sigterm_tears_everything_down() -> None:
    name = new_cluster_name()
    owner = Owner.start(name, "wait")
    try:
        assert leftovers(name, {owner.link})  # it is up
        owner.proc.send_signal(signal.SIGTERM)
        assert owner.proc.wait(timeout=15) == 128 + signal.SIGTERM
    finally:
        owner.proc.kill()
    assert leftovers(name, {owner.link}) == []
    assert owner.app_gone() and not owner.workdir.exists()


def test_leftovers_of_a_crashed_run_are_removed_by_the_next() -> None:
    name = new_cluster_name()
    owner = Owner.start(name, "crash")
    assert owner.proc.wait(timeout=15) == -signal.SIGKILL
    assert leftovers(name, {owner.link}), "a SIGKILLed run cannot clean up"
    with running_cluster():  # any later cluster removes what has no live owner
        assert leftovers(name, {owner.link}) == []
        assert not owner.workdir.exists()
        _wait_for(owner.app_gone)


def _link_names() -> set[str]:
    from meshpilot.runtime.netns import list_links

    return {link.name for link in list_links()}


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
