"""`meshpilot discovery -f DIR` keeps watching after a file it cannot load: the file's
problem is a diagnostic on /debug/configz, the server stays ready, later edits of other
files are served, and fixing the file serves it (issue 18 item 5)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meshpilot.runtime.ports import free_port
from tests.conftest import REPO
from tests.unit.security.procs import MESHPILOT
from tests.unit.tasks.probes import get as _get
from tests.unit.tasks.probes import until as _until

CANARY = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings-canary, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
"""

FIXED = """apiVersion: v1
kind: Service
metadata: {name: abc, namespace: default}
spec:
  ports: [{name: http, port: 9080}]
"""


def _configz(port: int) -> dict[str, Any]:
    status, body = _get(port, "/debug/configz")
    assert status == 200
    data: dict[str, Any] = json.loads(body)
    return data


def _served(port: int, kind: str, name: str) -> bool:
    return any(
        o["kind"] == kind and o["name"] == name and not o["stale"]
        for o in _configz(port)["objects"]
    )


def _problems(port: int, file: Path) -> list[str]:
    return [d["text"] for d in _configz(port)["diagnostics"] if d["file"] == str(file)]


@pytest.fixture
def discovery(tmp_path: Path) -> Iterator[tuple[Path, int, subprocess.Popen[bytes]]]:
    config = tmp_path / "config"
    shutil.copytree(REPO / "examples" / "bookinfo", config)
    port = free_port()
    argv = [MESHPILOT, "discovery", "-f", str(config), "--xds-port", "0",
            "--monitoring-port", str(port), "--no-ca"]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        _until(lambda: _ready(port, proc), "discovery ready")
        yield config, port, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)


def _ready(port: int, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, "discovery exited early"
    try:
        return _get(port, "/ready")[0] == 200
    except OSError:
        return False


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        # PyYAML's int constructor raises ValueError out of the reader
        (b"apiVersion: v1\nkind: Service\nmetadata: {name: !!int abc}\n", "abc"),
        (b"apiVersion: v1\nkind: Service\nmetadata: {name: ab\xff}\n", "not UTF-8 text"),
    ],
    ids=["yaml-tag-raises", "not-utf8"],
)
def test_a_file_that_cannot_be_loaded_is_a_diagnostic_and_the_watch_goes_on(
    discovery: tuple[Path, int, subprocess.Popen[bytes]], content: bytes, problem: str
) -> None:
    config, port, proc = discovery
    bad = config / "bad.yaml"
    bad.write_bytes(content)
    shown = _until(lambda: _problems(port, bad), "the bad file's diagnostic on /debug/configz")
    # (the loader may name the line of the bad value; either way the file and the problem)
    assert all(text.startswith(f"{bad}:") and ": error: " in text for text in shown)
    assert problem in " ".join(shown)
    assert _get(port, "/ready") == (200, "ok\n")  # a bad file is a diagnostic, not a crash

    (config / "canary.yaml").write_text(CANARY)  # another file's edit is still served
    _until(lambda: _served(port, "VirtualService", "ratings-canary"), "the later edit served")
    assert _problems(port, bad) == shown

    bad.write_text(FIXED)  # fixing the file serves it and clears its problem
    _until(lambda: _served(port, "Service", "abc"), "the fixed file served")
    assert _problems(port, bad) == []
    tasks = json.loads(_get(port, "/debug/tasks")[1])
    watch = next(t for t in tasks["tasks"] if t["name"] == "config-watch")
    assert tasks["ready"] and watch["state"] == "running" and watch["failures"] == 0

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err.decode()
    assert "Internal error" not in err.decode()
    assert f"WARNING meshpilot.store.files: {bad}:" in err.decode()
