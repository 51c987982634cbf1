"""`pilot-agent wait`: block until the proxy's readiness endpoint answers 200.

The injected istio-proxy runs it as a postStart hook when holdApplicationUntilProxyStarts is
on: the kubelet starts the next container (the app) only once the hook returns, so the app
never runs before its sidecar can carry traffic.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_READY_URL", "WaitOptions", "WaitResult", "wait_ready"]

DEFAULT_READY_URL = "http://localhost:15021/healthz/ready"
# Never through an HTTP proxy of the environment: the URL is the pod's own loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class WaitOptions:
    url: str = DEFAULT_READY_URL
    timeout_s: float = 60.0
    period_s: float = 0.5
    request_timeout_s: float = 0.5


@dataclass(frozen=True, slots=True)
class WaitResult:
    ready: bool
    attempts: int
    last_error: str = ""


def _probe(url: str, timeout: float) -> str:
    """ "" when the URL answers 200, else what went wrong."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return "" if response.status == 200 else f"HTTP status code {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP status code {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason)


def wait_ready(options: WaitOptions, clock: Callable[[], float] = time.monotonic) -> WaitResult:
    """Poll every `period_s` until a 200 or `timeout_s` has passed."""
    deadline = clock() + options.timeout_s
    attempts = 0
    while True:
        attempts += 1
        error = _probe(options.url, options.request_timeout_s)
        if not error:
            return WaitResult(True, attempts)
        if clock() + options.period_s > deadline:
            return WaitResult(False, attempts, error)
        time.sleep(options.period_s)
