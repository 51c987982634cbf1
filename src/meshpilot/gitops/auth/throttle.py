"""Failed logins per username, as Argo CD limits them (ARGOCD_SESSION_MAX_FAIL_COUNT 5 in
ARGOCD_SESSION_FAILURE_WINDOW_SECONDS 300): past the limit a login for that name is refused
without looking at the password, until the window has moved on. Memory is bounded."""

from __future__ import annotations

import threading
import time
from collections import deque

__all__ = ["LoginThrottle"]


class LoginThrottle:
    def __init__(self, max_failures: int = 5, window: float = 300.0, max_names: int = 10_000):
        self.max_failures = max_failures
        self.window = window
        self.max_names = max_names
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, username: str, now: float) -> deque[float]:
        times = self._failures.get(username, deque())
        while times and now - times[0] > self.window:
            times.popleft()
        return times

    def blocked(self, username: str) -> bool:
        with self._lock:
            return len(self._recent(username, time.monotonic())) >= self.max_failures

    def failed(self, username: str) -> None:
        now = time.monotonic()
        with self._lock:
            if username not in self._failures and len(self._failures) >= self.max_names:
                self._failures.pop(next(iter(self._failures)))  # the oldest name goes
            times = self._recent(username, now)
            times.append(now)
            self._failures[username] = times

    def succeeded(self, username: str) -> None:
        with self._lock:
            self._failures.pop(username, None)
