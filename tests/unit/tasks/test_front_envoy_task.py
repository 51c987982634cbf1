"""`meshpilot discovery` with its CA: a front Envoy (the TLS port 15012) that keeps dying past
its own restart budget is no longer gone for good behind a /ready of 200. The failure is
reported (/ready 503 naming it, /debug/tasks, /metrics) and Envoy is started again; once it
serves, discovery is ready again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from meshpilot.runtime.ports import free_port
from tests.conftest import REPO
from tests.unit.security.procs import MESHPILOT, children
from tests.unit.tasks.probes import get as _get
from tests.unit.tasks.probes import until as _until

pytestmark = pytest.mark.envoy


def _serves(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_front_envoy_past_its_restart_budget_is_reported_and_started_again(
    tmp_path: Path,
) -> None:
    monitoring, secure = free_port(), free_port()
    argv = [MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
            "--xds-port", "0", "--monitoring-port", str(monitoring),
            "--secure-port", str(secure), "--ca-dir", str(tmp_path / "ca")]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        _until(lambda: _get(monitoring, "/ready")[0] == 200 if _serves(monitoring) else False,
               "discovery ready")  # fmt: skip
        killed: set[int] = set()
        for _ in range(6):  # its own budget: 5 restarts (0.2 s ... 5 s apart)
            envoy = _until(lambda: [p for p in children(proc.pid) if p not in killed],
                           "a front Envoy")[0]  # fmt: skip
            _until(lambda: _serves(secure), "the front Envoy serving")
            os.kill(envoy, signal.SIGKILL)
            killed.add(envoy)
        _, body = _until(lambda: (r := _get(monitoring, "/ready"))[0] == 503 and r, "/ready 503")
        assert body == (
            "not ready\ntask front-envoy restarting: OSError: the front Envoy keeps exiting "
            "(last status -9)\n"
        )
        tasks = json.loads(_get(monitoring, "/debug/tasks")[1])
        front = next(t for t in tasks["tasks"] if t["name"] == "front-envoy")
        assert front["failures"] == 1
        assert (
            'meshpilot_task_failures_total{task="front-envoy"} 1\n'
            in (_get(monitoring, "/metrics")[1])
        )
        # started again by the supervisor: serving, then ready once it has stayed up 1 s
        _until(lambda: _get(monitoring, "/ready") == (200, "ok\n"), "ready again")
        assert _serves(secure)
        assert [p for p in children(proc.pid) if p not in killed]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    log = err.decode()
    assert proc.returncode == 0, log
    assert (
        "discovery: task front-envoy failed (failure 1), restarting in 0.5s: OSError: "
        "the front Envoy keeps exiting (last status -9)"
    ) in log
