"""The GitOps API's routing on meshpilot.http1: GET and POST with JSON bodies and request
headers, path patterns with `{}` segments, and Argo CD's error shape for every refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Self
from urllib.parse import unquote

from meshpilot import http1
from meshpilot.http1 import Request

__all__ = ["Request", "Response", "Router", "serve"]

_MAX_BODY = 8 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB; ours are small


class Response(http1.Response):
    __slots__ = ()

    @classmethod
    def error(cls, message: str, status: int) -> Self:
        """Argo CD's API error shape: {"error", "message", "code"}."""
        body = {"error": message, "message": message, "code": status}
        return cls(status, json.dumps(body, indent=2).encode() + b"\n", "application/json")


Handler = Callable[[Request, list[str]], Awaitable[http1.Response]]


class Router:
    """Routes by method and path pattern; `{}` segments are passed to the handler."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, list[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, pattern.strip("/").split("/"), handler))

    async def dispatch(self, request: Request) -> http1.Response:
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
    return await http1.serve(router.dispatch, host, port, max_body=_MAX_BODY, refuse=Response.error)
