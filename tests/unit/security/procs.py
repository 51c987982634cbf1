"""Processes of the CA tests: the `meshpilot` command and loopback ports."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "discovery exited early"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"port {port} never opened")


def children(pid: int) -> list[int]:
    """The processes `pid` started (e.g. discovery's front Envoy)."""
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as an operator stops it; SIGKILL if it is still there after 15 s."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
