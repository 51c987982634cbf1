"""The monitoring port's routes: read-only GET and HEAD by exact path (debug API, /metrics).

The wire layer is meshpilot.http1; this module only maps paths to handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from meshpilot.http1 import Request as HttpRequest
from meshpilot.http1 import Response as HttpResponse
from meshpilot.http1 import serve

__all__ = ["HttpRequest", "HttpResponse", "HttpServer", "Route"]

Route = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpServer:
    def __init__(self, routes: Mapping[str, Route]) -> None:
        self.routes = dict(routes)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await serve(self._route, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _route(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponse.text("method not allowed\n", 405)
        route = self.routes.get(request.path)
        if route is None:
            return HttpResponse.text(f"no such path: {request.path}\n", 404)
        return await route(request)
