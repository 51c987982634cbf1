"""The shared HTTP/1.1 wire layer: what a client sees for good and bad requests."""

from __future__ import annotations

import asyncio

from meshpilot.discovery.http import HttpRequest, HttpResponse, HttpServer
from meshpilot.gitops.server.http import Request, Response, Router, serve


async def _exchange(port: int, raw: bytes) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode().split("\r\n")[0], body


def test_monitoring_routes_get_and_head_only() -> None:
    async def hello(request: HttpRequest) -> HttpResponse:
        return HttpResponse.text(f"hello {request.param('name')}\n")

    async def broken(request: HttpRequest) -> HttpResponse:
        raise RuntimeError("secret detail")

    async def run() -> None:
        server = HttpServer({"/hello": hello, "/broken": broken})
        port = await server.start("127.0.0.1", 0)
        try:
            assert await _exchange(port, b"GET /hello?name=x HTTP/1.1\r\n\r\n") == (
                "HTTP/1.1 200 OK",
                b"hello x\n",
            )
            assert await _exchange(port, b"HEAD /hello HTTP/1.1\r\n\r\n") == (
                "HTTP/1.1 200 OK",
                b"",
            )
            status, _ = await _exchange(port, b"POST /hello HTTP/1.1\r\n\r\n")
            assert status == "HTTP/1.1 405 Method Not Allowed"
            status, _ = await _exchange(port, b"GET /nope HTTP/1.1\r\n\r\n")
            assert status == "HTTP/1.1 404 Not Found"
            status, body = await _exchange(port, b"GET /broken HTTP/1.1\r\n\r\n")
            assert status == "HTTP/1.1 500 Internal Server Error"
            assert b"secret detail" not in body  # the log has it, the client does not
            status, _ = await _exchange(
                port, b"GET /hello HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde"
            )
            assert status == "HTTP/1.1 413 Request Entity Too Large"
        finally:
            await server.stop()

    asyncio.run(run())


def test_gitops_api_errors_have_argo_cd_shape() -> None:
    async def echo(request: Request, args: list[str]) -> Response:
        return Response.json({"app": args[0], "body": request.json()})

    async def run() -> None:
        router = Router()
        router.add("POST", "/api/v1/applications/{}/sync", echo)
        server = await serve(router, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            payload = b'{"prune": true}'
            status, body = await _exchange(
                port,
                b"POST /api/v1/applications/web/sync HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s"
                % (len(payload), payload),
            )
            assert status == "HTTP/1.1 200 OK"
            assert b'"app": "web"' in body and b'"prune": true' in body
            status, body = await _exchange(
                port, b"GET /api/v1/applications/web/sync HTTP/1.1\r\n\r\n"
            )
            assert status == "HTTP/1.1 405 Method Not Allowed"
            assert b'"code": 405' in body
            status, body = await _exchange(port, b"garbage\r\n\r\n")
            assert status == "HTTP/1.1 400 Bad Request" and b'"error": "bad request"' in body
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())
