"""HTTP GET on a loopback port and polling, for the task-supervision tests."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any


def get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of GET http://127.0.0.1:<port><path>, error statuses included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def until(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    """The first true value of `check()`, polled every 50 ms; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")
