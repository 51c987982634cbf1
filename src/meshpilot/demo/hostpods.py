"""The fallback when network-namespace pods are impossible (not root, or no iproute2 /
iptables): "pods" that are only an address on the host's loopback (127.0.0.2, .3, ...)
and the processes started for them, with the interface of runtime.Cluster and runtime.Pod
that the demo uses.

Nothing is captured: a sidecar runs with interceptionMode NONE, so its outbound listeners
bind 127.0.0.1:<service port> and apps call those with the service's name as Host. Every
process is started in its own session, stopped (SIGTERM, then SIGKILL) on close, and gets
SIGTERM should the demo die without closing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Address
from pathlib import Path

from meshpilot.demo.processes import DemoError, die_with_parent, tail
from meshpilot.runtime.pod import PodProcess, PodSpec, RunAs, spawn_logged

__all__ = ["HostPod", "HostPods"]

FIRST_ADDRESS = IPv4Address("127.0.0.2")  # 127.0.0.1 is the sidecar's


class HostPod:
    def __init__(self, spec: PodSpec, ip: IPv4Address, workdir: Path, grace: float) -> None:
        self.spec = spec
        self.ip = ip
        self.workdir = workdir
        self.grace = grace
        self.netns = ""  # none: the host's
        self.processes: list[PodProcess] = []

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def proxy_user(self) -> RunAs:
        """Everything here runs as the demo's user, the proxy too."""
        return RunAs(os.getuid(), os.getgid())

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.spec.app:
            self.spawn("app", self.spec.app)

    def command(
        self, argv: Sequence[str], run_as: RunAs | None = None, env: Mapping[str, str] | None = None
    ) -> list[str]:
        return list(argv)  # no namespace, no user change: everything runs as the demo's user

    def spawn(
        self,
        role: str,
        argv: Sequence[str],
        run_as: RunAs | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> PodProcess:
        try:
            process = spawn_logged(role, argv, self.workdir, cwd, preexec_fn=die_with_parent)
        except OSError as exc:
            raise DemoError(f"{self.key}: cannot start {role}: {exc}") from exc
        self.processes.append(process)
        return process

    def start_sidecar(
        self, argv: Sequence[str], run_as: RunAs | None = None, env: Mapping[str, str] | None = None
    ) -> PodProcess:
        return self.spawn("sidecar", argv, cwd=self.workdir)

    def exec(
        self,
        argv: Sequence[str],
        run_as: RunAs | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )

    def wait_listening(self, port: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((str(self.ip), port), 0.5):
                return
            for process in self.processes:
                if not process.running:
                    raise DemoError(f"{self.key}: {process.role} exited: {tail(process.log)}")
            time.sleep(0.05)
        raise DemoError(f"{self.key}: nothing listens on {self.ip}:{port} after {timeout:g}s")

    def stop(self) -> None:
        for process in reversed(self.processes):
            _terminate(process, self.grace)
        self.processes.clear()


def _terminate(process: PodProcess, grace: float) -> None:
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not process.running:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.popen.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=grace)
    finally:
        process.log_file.close()


class HostPods:
    """Stands in for runtime.Cluster: add, remove and close "pods" on the loopback."""

    def __init__(self, workdir: Path, grace: float = 2.0) -> None:
        self.grace = grace
        self.pods: dict[str, HostPod] = {}
        self.base = workdir  # created by start(), removed by close()
        self.workdir: Path | None = None
        self._next = FIRST_ADDRESS

    def start(self) -> None:
        self.base.mkdir(mode=0o700)
        self.workdir = self.base

    def add_pod(self, spec: PodSpec) -> HostPod:
        if self.workdir is None:
            raise DemoError("host pods are not started")
        ip = IPv4Address(spec.ip) if spec.ip else self.allocate()
        pod = HostPod(spec, ip, self.workdir / spec.key, self.grace)
        self.pods[spec.key] = pod
        try:
            pod.start()
        except BaseException:
            del self.pods[spec.key]
            pod.stop()
            raise
        return pod

    def allocate(self) -> IPv4Address:
        used = {pod.ip for pod in self.pods.values()}
        while self._next in used:
            self._next += 1
        address, self._next = self._next, self._next + 1
        return address

    def remove_pod(self, key: str) -> None:
        self.pods.pop(key).stop()

    def close(self) -> None:
        for key in reversed(list(self.pods)):
            self.remove_pod(key)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
