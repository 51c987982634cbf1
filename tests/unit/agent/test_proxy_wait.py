"""`meshpilot proxy wait` against a real HTTP server on loopback: ready, late, never."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")


class _Readiness(BaseHTTPRequestHandler):
    ready_at = 0.0  # monotonic time from which /healthz/ready answers 200

    def do_GET(self) -> None:
        ok = self.path == "/healthz/ready" and time.monotonic() >= self.ready_at
        self.send_response(200 if ok else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Readiness]]]:
    handler = type("Handler", (_Readiness,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/healthz/ready", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _wait(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [MESHPILOT, "proxy", "wait", *args], capture_output=True, text=True, check=False
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result, time.monotonic() - started


def test_returns_once_the_proxy_becomes_ready(server: tuple[str, type[_Readiness]]) -> None:
    url, handler = server
    handler.ready_at = time.monotonic() + 1.5
    result, took = _wait("--url", url, "--periodMillis", "100", "--timeoutSeconds", "10")
    assert result.returncode == 0, result.stderr
    assert "Waiting for Envoy proxy to be ready (timeout: 10 seconds)..." in result.stdout
    assert "Envoy is ready!" in result.stdout
    assert time.monotonic() >= handler.ready_at and took < 8


def test_times_out_with_the_last_error(server: tuple[str, type[_Readiness]]) -> None:
    url, handler = server
    handler.ready_at = float("inf")
    result, took = _wait("--url", url, "--periodMillis", "200", "--timeoutSeconds", "1")
    assert result.returncode == 1
    assert "timeout waiting for Envoy proxy to become ready" in result.stderr
    assert "Last error: HTTP status code 503" in result.stderr
    assert 0.8 < took < 6


def test_nothing_listening() -> None:
    result, _ = _wait("--url", "http://127.0.0.1:9/healthz/ready", "--timeoutSeconds", "1")
    assert result.returncode == 1 and "Connection refused" in result.stderr, result.stderr


def test_flags_of_pilot_agent_wait() -> None:
    result = subprocess.run(
        [MESHPILOT, "proxy", "wait", "--help"], capture_output=True, text=True, check=False
    )
    for flag in ("--timeoutSeconds", "--periodMillis", "--requestTimeoutMillis", "--url"):
        assert flag in result.stdout
    assert "http://localhost:15021/healthz/ready" in result.stdout
