"""Without --work-dir the agent works in `meshpilot-proxy-<pod>-*` in the temporary
directory. An agent killed with -9 cannot remove it: the next agent to start does, and
leaves a running agent's directory alone. Real `meshpilot proxy sidecar` processes with
their Envoy, in a temporary directory of the test's own (TMPDIR; 0755, since Envoy may run
as the proxy UID)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from meshpilot.runtime.ports import free_ports
from tests.unit.security.procs import stop as stop_process

_PROXY_CLI = "from meshpilot.cli.proxy import proxy; proxy(prog_name='meshpilot proxy')"


class Agents:
    def __init__(self, logs: Path) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="meshpilot-test-agents-"))
        self.tmp.chmod(0o755)
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, pod: str) -> tuple[subprocess.Popen[bytes], Path]:
        """An agent for `pod`, once its working directory holds the bootstrap."""
        admin, status, health, prometheus, discovery = free_ports(5)
        command = [
            sys.executable, "-c", _PROXY_CLI, "sidecar", "--pod", f"{pod}.default",
            "--ip", "127.0.0.1", "--discovery-address", f"127.0.0.1:{discovery}",
            "--admin-port", str(admin), "--status-port", str(status),
            "--health-port", str(health), "--prometheus-port", str(prometheus),
            "--concurrency", "1", "--log-level", "warning", "--agent-log-level", "info",
        ]  # fmt: skip
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        with (self.logs / f"{pod}.log").open("wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, self.log(pod)
            found = list(self.tmp.glob(f"meshpilot-proxy-{pod}-*/envoy-rev.json"))
            if found:
                return proc, found[0].parent
            time.sleep(0.05)
        raise AssertionError(f"no working directory for {pod}: {self.log(pod)}")

    def log(self, pod: str) -> str:
        return (self.logs / f"{pod}.log").read_text()

    def dirs(self) -> set[Path]:
        return set(self.tmp.glob("meshpilot-proxy-*"))

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc)
        # An agent killed while it starts its Envoy can leave that Envoy behind (its death
        # signal is armed after the fork): whatever still runs in our directories goes too.
        for cwd in Path("/proc").glob("[0-9]*/cwd"):
            with contextlib.suppress(OSError):
                if cwd.resolve().is_relative_to(self.tmp):
                    os.kill(int(cwd.parent.name), signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    running = Agents(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_a_killed_agents_work_dir_goes_at_the_next_agent_start(agents: Agents) -> None:
    running, running_dir = agents.start("running")
    killed, killed_dir = agents.start("killed")
    killed.kill()  # SIGKILL: no cleanup runs; its Envoy dies with it (PDEATHSIG)
    killed.wait()
    time.sleep(0.2)
    assert killed_dir.is_dir()  # left behind

    _, new_dir = agents.start("new")
    assert running.poll() is None
    assert agents.dirs() == {running_dir, new_dir}
    log = agents.log("new")
    assert f"removed 1 directories of processes that are gone: {killed_dir}" in log

    running.send_signal(signal.SIGTERM)  # a normal stop removes its own directory
    assert running.wait(timeout=20) == 0, agents.log("running")
    assert agents.dirs() == {new_dir}
