"""The shared HTTP/1.1 wire layer: what a client sees for good and bad requests."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from pydantic import BaseModel

from meshpilot.discovery.http import HttpRequest, HttpResponse, HttpServer
from meshpilot.gitops.server.http import Request, Response, Router, serve
from meshpilot.http1 import UnsupportedMediaType


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


async def _exchange_half_closed(port: int, raw: bytes) -> tuple[str, bytes]:
    """Send `raw`, then end the request stream (as a client that sent all it had)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    writer.write_eof()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode().split("\r\n")[0], body


def _post(path: bytes, body: bytes, *headers: bytes) -> bytes:
    extra = b"".join(h + b"\r\n" for h in headers)
    return b"POST %s HTTP/1.1\r\nContent-Length: %d\r\n%s\r\n%s" % (path, len(body), extra, body)


def test_client_errors_get_4xx_with_the_reason(caplog: pytest.LogCaptureFixture) -> None:
    class Flag(BaseModel):
        enabled: bool

    async def model(request: Request, args: list[str]) -> Response:
        return Response.json({"enabled": request.model(Flag).enabled})

    async def refuse(request: Request, args: list[str]) -> Response:
        raise UnsupportedMediaType("expected application/json")

    async def broken(request: Request, args: list[str]) -> Response:
        raise RuntimeError("secret detail")

    async def run() -> None:
        router = Router()
        router.add("POST", "/model", model)
        router.add("POST", "/refuse", refuse)
        router.add("POST", "/broken", broken)
        server = await serve(router, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cases: list[tuple[bytes, str, bytes]] = [
            (b"POST /model HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400", b"Content-Length"),
            (b"POST /model HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n", "400", b"Content-Length"),
            (b"POST /model HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", "413", b"large"),
            (
                b"POST /model HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                "400",
                b"twice",
            ),
            (
                b"POST /model HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                "411",
                b"Content-Length",
            ),
            (b"POST /model HTTP/1.1\r\nno colon here\r\n\r\n", "400", b"malformed header"),
            (b"GET http://x/ HTTP/1.1\r\n\r\n", "400", b"path"),
            (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", "431", b"too large"),
            (_post(b"/model", b"[]"), "400", b"valid dictionary"),
            (_post(b"/model", b'{"enabled": "maybe"}'), "400", b"field 'enabled'"),
            (_post(b"/model", b"{nope"), "400", b"not JSON"),
            (_post(b"/model", b"\xff\xfe"), "400", b"not JSON"),
            (_post(b"/model", b"[" * 100_000 + b"]" * 100_000), "400", b"deeper than 64"),
            (_post(b"/model", b"[" * 5_000 + b"]" * 5_000), "400", b"deeper than 64"),
            (_post(b"/model", b'{"a":' * 65 + b"1" + b"}" * 65), "400", b"deeper than 64"),
            (_post(b"/refuse", b"{}"), "415", b"expected application/json"),
        ]
        try:
            for raw, code, reason in cases:
                status, body = await _exchange(port, raw)
                assert status.split(" ")[1] == code, (raw[:60], status, body)
                assert reason in body, (raw[:60], body)
                assert json.loads(body)["code"] == int(code)
            # A body shorter than its Content-Length, the client done sending.
            status, body = await _exchange_half_closed(
                port, b"POST /model HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}"
            )
            assert status == "HTTP/1.1 400 Bad Request"
            assert b"2 bytes, Content-Length said 10" in body
            # A head cut off before its end: still an answer.
            status, _ = await _exchange_half_closed(port, b"GET / HTTP/1.1\r\nHost: x")
            assert status == "HTTP/1.1 400 Bad Request"
            assert await _exchange(port, _post(b"/model", b'{"enabled": true}')) == (
                "HTTP/1.1 200 OK",
                b'{\n  "enabled": true\n}\n',
            )
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="meshpilot.http1"):
                status, body = await _exchange(port, _post(b"/broken", b"{}"))
            assert status == "HTTP/1.1 500 Internal Server Error"
            assert b"secret detail" not in body
            (record,) = caplog.records  # one line, no traceback
            assert record.exc_info is None
            assert "POST /broken failed: RuntimeError: secret detail" in record.getMessage()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())
