"""A small HTTP/1.1 server on asyncio streams for the GitOps API: GET and POST with JSON
bodies, request headers, one request per connection. Loopback by default; the standard
library is enough for a webhook and a handful of JSON calls."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["Request", "Response", "Router", "serve"]

log = logging.getLogger(__name__)

_MAX_HEAD = 64 * 1024
_MAX_BODY = 8 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB; ours are small


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names
    query: Mapping[str, list[str]] = field(default_factory=dict)
    body: bytes = b""

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass(frozen=True, slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(data, indent=2).encode() + b"\n")

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode(), "text/plain; charset=utf-8")

    @classmethod
    def error(cls, message: str, status: int) -> Response:
        """Argo CD's API error shape: {"error", "message", "code"}."""
        return cls.json({"error": message, "message": message, "code": status}, status)


Handler = Callable[[Request, list[str]], Awaitable[Response]]


class Router:
    """Routes by method and path pattern; `{}` segments are passed to the handler."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, list[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, pattern.strip("/").split("/"), handler))

    async def dispatch(self, request: Request) -> Response:
        parts = [unquote(p) for p in request.path.strip("/").split("/")]
        allowed = False
        for method, pattern, handler in self._routes:
            if len(pattern) != len(parts):
                continue
            args = [p for p, q in zip(parts, pattern, strict=True) if q == "{}"]
            if all(q in ("{}", p) for p, q in zip(parts, pattern, strict=True)):
                if method != request.method:
                    allowed = True
                    continue
                return await handler(request, args)
        if allowed:
            return Response.error("method not allowed", 405)
        return Response.error(f"no such path: {request.path}", 404)


async def serve(router: Router, host: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            response = await _respond(router, reader)
            reason = HTTPStatus(response.status).phrase
            writer.write(
                f"HTTP/1.1 {response.status} {reason}\r\n"
                f"Content-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + response.body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=_MAX_HEAD)


async def _respond(router: Router, reader: asyncio.StreamReader) -> Response:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _ = lines[0].split(" ", 2)
    except ValueError:
        return Response.error("bad request", 400)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return Response.error("bad Content-Length", 400)
    if length > _MAX_BODY:
        return Response.error("request body too large", 413)
    body = await asyncio.wait_for(reader.readexactly(length), timeout=30) if length else b""
    url = urlsplit(target)
    request = Request(method.upper(), url.path, headers, parse_qs(url.query), body)
    try:
        return await router.dispatch(request)
    except Exception:  # a bad request must never take the server down
        log.exception("%s %s failed", method, url.path)
        return Response.error("internal error (see the server log)", 500)
