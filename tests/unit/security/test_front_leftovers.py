"""The front Envoy's socket directory (`meshpilot-front-*` in the temporary directory) of a
discovery killed with -9 is removed by the next discovery to start; a running discovery's
directory is left alone. Real `meshpilot discovery` processes, each with its front Envoy,
in a temporary directory of the test's own (TMPDIR)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from meshpilot.runtime.ports import free_port
from tests.conftest import REPO
from tests.unit.security.procs import MESHPILOT, children, wait_port
from tests.unit.security.procs import stop as stop_process


class Discoveries:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.root = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []
        self.envoys: list[int] = []

    def start(self) -> subprocess.Popen[bytes]:
        """A discovery whose secure port (front Envoy) is up."""
        secure, n = free_port(), len(self.procs)
        argv = [
            MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
            "--xds-port", "0", "--monitoring-port", "0", "--secure-port", str(secure),
            "--ca-dir", str(self.root / "ca"), "--root-cert-out", str(self.root / f"root{n}.pem"),
        ]  # fmt: skip
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        with (self.root / f"discovery{n}.log").open("wb") as log:
            proc = subprocess.Popen(argv, stderr=log, env=env)
        self.procs.append(proc)
        wait_port(secure, proc, timeout=60)
        self.envoys += children(proc.pid)
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.root / f"discovery{self.procs.index(proc)}.log").read_text()

    def front_dirs(self) -> set[str]:
        return {p.name for p in self.tmp.glob("meshpilot-front-*")}

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc)
        for pid in self.envoys:  # normally gone with their discovery (PDEATHSIG)
            with contextlib.suppress(OSError):
                if b"envoy" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def discoveries(tmp_path: Path) -> Iterator[Discoveries]:
    running = Discoveries(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_a_killed_discoverys_front_directory_goes_at_the_next_start(
    discoveries: Discoveries,
) -> None:
    running = discoveries.start()
    kept = discoveries.front_dirs()
    assert len(kept) == 1
    killed = discoveries.start()
    killed_dir = discoveries.front_dirs() - kept
    assert len(killed_dir) == 1
    killed.kill()  # SIGKILL: no cleanup runs
    killed.wait()
    time.sleep(0.2)
    assert discoveries.front_dirs() == kept | killed_dir  # left behind, sockets and all

    started = discoveries.start()
    assert running.poll() is None
    dirs = discoveries.front_dirs()
    assert not dirs & killed_dir
    assert kept <= dirs  # the running discovery's sockets stay
    assert len(dirs - kept) == 1  # the new discovery's own
    (name,) = killed_dir
    assert "removed 1 directories of processes that are gone" in discoveries.log(started)
    assert name in discoveries.log(started)

    for proc in (running, started):  # a normal stop removes its own directory
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, discoveries.log(proc)
    assert discoveries.front_dirs() == set()
