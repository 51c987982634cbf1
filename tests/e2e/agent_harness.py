"""Running `meshpilot proxy` agents in tests: free ports, HTTP probes, process facts, cleanup."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from meshpilot.runtime.ports import free_ports
from meshpilot.settings import Ports

T = TypeVar("T")

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# The `proxy` click group, run the way `meshpilot proxy ...` runs it.
_PROXY_CLI = "from meshpilot.cli.proxy import proxy; proxy(prog_name='meshpilot proxy')"


def wait_for(check: Callable[[], T | bool | None], what: str, timeout: float = 15) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value  # type: ignore[return-value]
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for: {what}")


def http_get(port: int, path: str, timeout: float = 2) -> tuple[int | None, str]:
    """(status, body), or (None, error) when nothing answers."""
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        return None, str(exc)


def listening_addresses(port: int) -> set[str]:
    """IPv4 addresses with a TCP socket listening on `port` in this network namespace."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, port_hex = local.partition(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def process_ids(pid: int | None) -> tuple[int, int]:
    """(real UID, real GID) of a process, from /proc/<pid>/status."""
    assert pid is not None
    uid = gid = -1
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
        elif line.startswith("Gid:"):
            gid = int(line.split()[1])
    return uid, gid


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _is_envoy(pid: int) -> bool:
    try:
        return b"envoy" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False


@dataclass
class Agent:
    proc: subprocess.Popen[bytes]
    ports: Ports
    discovery_port: int
    work_dir: Path
    log: Path
    envoys_seen: set[int] = field(default_factory=set)

    def envoy_pid(self) -> int | None:
        pids = [p for p in children(self.proc.pid) if _is_envoy(p)]
        self.envoys_seen.update(pids)
        return pids[0] if pids else None

    def stop(self) -> None:
        self.envoy_pid()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.envoys_seen:
            if _is_envoy(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


class AgentFactory(Protocol):
    def __call__(self, kind: str, *args: str, discovery_port: int | None = None) -> Agent: ...


def agent_factory(tmp_path: Path, drain: float) -> Iterator[AgentFactory]:
    """Generator behind the `start_agent` fixture: start agents, stop them all afterwards."""
    started: list[Agent] = []
    # Envoy may run as the proxy UID: its working directory must be reachable by it, which
    # pytest's private tmp_path is not.
    work_root = Path(tempfile.mkdtemp(prefix="meshpilot-e2e-agent-"))
    work_root.chmod(0o755)

    def start(kind: str, *args: str, discovery_port: int | None = None) -> Agent:
        admin, status, health, prometheus, unused = free_ports(5)
        ports = Ports(envoy_admin=admin, agent_status=status, health=health, prometheus=prometheus)
        work_dir = work_root / f"agent-{len(started)}"
        log = tmp_path / f"agent-{len(started)}.log"
        discovery = discovery_port or unused
        command = [
            sys.executable, "-c", _PROXY_CLI, kind,
            *(["--pod", "demo-1.default"] if "--pod" not in args else []),
            "--ip", "127.0.0.1",
            "--discovery-address", f"127.0.0.1:{discovery}",
            "--admin-port", str(admin), "--status-port", str(status),
            "--health-port", str(health), "--prometheus-port", str(prometheus),
            "--concurrency", "1", "--drain-time-s", "1",
            "--termination-drain-duration", f"{drain}s",
            "--work-dir", str(work_dir), "--log-level", "warning",
            *args,
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        agent = Agent(proc, ports, discovery, work_dir, log)
        started.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in started:
            agent.stop()
        shutil.rmtree(work_root, ignore_errors=True)
