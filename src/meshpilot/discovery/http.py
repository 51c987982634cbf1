"""A small HTTP/1.1 server on asyncio for the monitoring port (GET and HEAD only).

The debug API and /metrics are a handful of read-only GETs on a loopback port, so the
standard library's asyncio streams are enough; no web framework is pulled in for them.
Each connection serves one request and closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

__all__ = ["HttpRequest", "HttpResponse", "HttpServer", "Route"]

log = logging.getLogger(__name__)

_MAX_HEAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: Mapping[str, list[str]] = field(default_factory=dict)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"

    @classmethod
    def text(cls, text: str, status: int = 200) -> HttpResponse:
        return cls(status, text.encode())


Route = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpServer:
    def __init__(self, routes: Mapping[str, Route]) -> None:
        self.routes = dict(routes)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._handle, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            response, method = await self._respond(head)
            reason = HTTPStatus(response.status).phrase
            writer.write(
                f"HTTP/1.1 {response.status} {reason}\r\n"
                f"Content-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            if method != "HEAD":
                writer.write(response.body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _respond(self, head: bytes) -> tuple[HttpResponse, str]:
        if len(head) > _MAX_HEAD:
            return HttpResponse.text("request too large\n", 431), "GET"
        try:
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except ValueError:
            return HttpResponse.text("bad request\n", 400), "GET"
        if method not in ("GET", "HEAD"):
            return HttpResponse.text("method not allowed\n", 405), method
        url = urlsplit(target)
        route = self.routes.get(url.path)
        if route is None:
            return HttpResponse.text(f"no such path: {url.path}\n", 404), method
        request = HttpRequest(method, url.path, parse_qs(url.query))
        try:
            return await route(request), method
        except Exception as exc:  # a debug page must never take the process down
            log.exception("GET %s failed", target)
            return HttpResponse.text(f"internal error: {exc}\n", 500), method
