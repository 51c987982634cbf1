"""A small HTTP/1.1 server on asyncio streams: one request per connection, then close.

The monitoring port (debug API, /metrics) and the GitOps API (a webhook and a handful of
JSON calls) are loopback services with few, small requests, so the standard library's
streams are enough; no web framework is pulled in. Both share this wire layer and keep
their own routing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from meshpilot import bounded_json

__all__ = ["Request", "Response", "serve"]

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
_HEAD_TIMEOUT_S = 10
_BODY_TIMEOUT_S = 30


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
        return bounded_json.loads(self.body or b"{}")


@dataclass(frozen=True, slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"

    @classmethod
    def text(cls, text: str, status: int = 200) -> Self:
        return cls(status, text.encode())

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Self:
        return cls(status, json.dumps(data, indent=2).encode() + b"\n", "application/json")


Handler = Callable[[Request], Awaitable[Response]]
# What the server answers itself, before any handler runs (bad request line, oversize body).
Refusal = Callable[[str, int], Response]


async def serve(
    handler: Handler, host: str, port: int, *, max_body: int = 0, refuse: Refusal | None = None
) -> asyncio.Server:
    """Listen on host:port; a handler's exception becomes a 500 and is logged, never fatal.

    `max_body` 0 refuses any request body (read-only services)."""
    refusal: Refusal = refuse or (lambda message, status: Response.text(message + "\n", status))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader, max_body, refusal)
            if isinstance(request, Response):
                response, method = request, "GET"
            else:
                response, method = await _answer(handler, request, refusal), request.method
            writer.write(_head(response))
            if method != "HEAD":
                writer.write(response.body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)


async def _read_request(
    reader: asyncio.StreamReader, limit: int, refusal: Refusal
) -> Request | Response:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=_HEAD_TIMEOUT_S)
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _ = lines[0].split(" ", 2)
    except ValueError:
        return refusal("bad request", 400)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return refusal("bad Content-Length", 400)
    if length > limit:
        return refusal("request body too large", 413)
    body = b""
    if length:
        body = await asyncio.wait_for(reader.readexactly(length), timeout=_BODY_TIMEOUT_S)
    url = urlsplit(target)
    return Request(method.upper(), url.path, headers, parse_qs(url.query), body)


async def _answer(handler: Handler, request: Request, refusal: Refusal) -> Response:
    try:
        return await handler(request)
    except Exception:  # a bad request must never take the server down
        log.exception("%s %s failed", request.method, request.path)
        return refusal("internal error (see the server log)", 500)


def _head(response: Response) -> bytes:
    reason = HTTPStatus(response.status).phrase
    return (
        f"HTTP/1.1 {response.status} {reason}\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"Content-Length: {len(response.body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
