"""A small async client for Envoy's admin API on 127.0.0.1 (stats, drain, health, quit).

Requests run in a worker thread with urllib (no proxy from the environment, short timeouts),
so the event loop never blocks on a hung Envoy.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from meshpilot.errors import EnvoyError

__all__ = ["AdminResponse", "EnvoyAdmin", "parse_stats"]

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class AdminResponse:
    status: int
    body: str


class EnvoyAdmin:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout

    async def get(self, path: str) -> AdminResponse:
        return await asyncio.to_thread(self._request, "GET", path)

    async def post(self, path: str) -> AdminResponse:
        return await asyncio.to_thread(self._request, "POST", path)

    async def stats(self, filter_regex: str) -> dict[str, int]:
        """Counters and gauges whose names match `filter_regex` (Envoy's /stats?filter=)."""
        response = await self.get(f"/stats?filter={urllib.parse.quote(filter_regex)}")
        if response.status != 200:
            raise EnvoyError(f"Envoy admin /stats answered {response.status}")
        return parse_stats(response.body)

    def _request(self, method: str, path: str) -> AdminResponse:
        request = urllib.request.Request(
            self.base + path, method=method, data=b"" if method == "POST" else None
        )
        try:
            with _OPENER.open(request, timeout=self.timeout) as reply:
                return AdminResponse(reply.status, reply.read().decode(errors="replace"))
        except urllib.error.HTTPError as exc:
            return AdminResponse(exc.code, exc.read().decode(errors="replace"))
        except (OSError, urllib.error.URLError) as exc:
            raise EnvoyError(f"Envoy admin {self.base}{path} unreachable: {exc}") from exc


def parse_stats(text: str) -> dict[str, int]:
    """`name: value` lines of Envoy's text stats; histograms and non-integers are skipped."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep and value.strip().isdigit():
            values[name.strip()] = int(value)
    return values
