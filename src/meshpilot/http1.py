"""A small HTTP/1.1 server on asyncio streams: one request per connection, then close
(kept alive on request: the injection webhook, which kube-apiserver calls for every pod).

The monitoring port (debug API, /metrics), the GitOps API (a webhook and a handful of JSON
calls) and the agent's status port are loopback services with few, small requests, so the
standard library's streams are enough; no web framework is pulled in. They share this wire
layer and keep their own routing.

Every request that reaches the server gets a status line, whatever its bytes:

    a request the server cannot read        400 (bad request line, header, Content-Length,
                                            a body shorter than announced), 408 (too slow),
                                            411 (Transfer-Encoding: send Content-Length),
                                            413 (body over the limit), 431 (head over 64 KiB)
    a handler raising HttpError             its status and message (BadRequest: 400, ...)
    a body that is not JSON, or too deep    400 (Request.json)
    a body of the wrong shape               400 naming the field (Request.model)
    anything else a handler raises          500, logged in one line; the client sees no detail
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self, TypeVar
from urllib.parse import parse_qs

from pydantic import BaseModel, ValidationError

from meshpilot import bounded_json
from meshpilot.errors import MeshpilotError

__all__ = [
    "MAX_JSON_DEPTH",
    "BadRequest",
    "HttpError",
    "PayloadTooLarge",
    "Request",
    "Response",
    "UnsupportedMediaType",
    "field_errors",
    "parse_json",
    "serve",
    "validate",
]

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
MAX_JSON_DEPTH = 64  # deeper JSON is refused: no request body of ours nests half as deep
_HEAD_TIMEOUT_S = 10
_BODY_TIMEOUT_S = 30
_LINGER_S = 1.0
_LINGER_BYTES = 1024 * 1024
# RFC 9110 token characters: what a method may be made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/1\.[01]")

M = TypeVar("M", bound=BaseModel)


class HttpError(MeshpilotError):
    """A request the server refuses: answered with `status` and the message, never a 500."""

    status = 400

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class BadRequest(HttpError):
    status = 400


class PayloadTooLarge(HttpError):
    status = 413


class UnsupportedMediaType(HttpError):
    status = 415


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
        """The body as JSON (`{}` when empty); BadRequest when it is not JSON or nests
        deeper than MAX_JSON_DEPTH."""
        return parse_json(self.body or b"{}")

    def model(self, model: type[M], what: str = "request body") -> M:
        """The JSON body validated as `model`; BadRequest naming the first wrong fields."""
        return validate(model, self.json(), what)


def parse_json(raw: bytes, what: str = "request body") -> Any:
    """JSON from bytes; BadRequest when it is not JSON or nests deeper than MAX_JSON_DEPTH."""
    try:
        return bounded_json.loads(raw, MAX_JSON_DEPTH)
    except bounded_json.JSONDepthError:
        raise BadRequest(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # (UnicodeDecodeError included)
        raise BadRequest(f"{what} is not JSON: {exc}") from None


def validate(model: type[M], data: Any, what: str = "request body") -> M:
    """`data` as `model`; BadRequest naming the first wrong fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(f"{what}: {field_errors(exc)}") from None


def field_errors(exc: ValidationError, limit: int = 3) -> str:
    """`field 'a.b': message; ...` for the first `limit` errors of a validation."""
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error["loc"])
        parts.append(f"field {where!r}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Response:
    """An answer. `headers`: extra ones (Location, Set-Cookie, ...). `stream`: a body sent
    chunk by chunk as it is produced (server-sent events), ended by closing the connection;
    `body` is then ignored."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def text(cls, text: str, status: int = 200) -> Self:
        return cls(status, text.encode())

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Self:
        return cls(status, json.dumps(data, indent=2).encode() + b"\n", "application/json")


Handler = Callable[[Request], Awaitable[Response]]
# What the server answers itself: refusals of bad requests, HttpError's, the 500.
Refusal = Callable[[str, int], Response]


def _text_refusal(message: str, status: int) -> Response:
    return Response.text(message + "\n", status)


async def serve(
    handler: Handler,
    host: str,
    port: int,
    *,
    max_body: int = 0,
    refuse: Refusal | None = None,
    tls: ssl.SSLContext | None = None,
    keep_alive: bool = False,
    unix_path: str | None = None,
) -> asyncio.Server:
    """Listen on host:port; every request is answered (see the module docstring).

    `max_body` 0 refuses any request body (read-only services); `tls` serves HTTPS;
    `unix_path` listens on that Unix socket instead of host:port;
    `keep_alive` keeps an HTTP/1.1 connection open for the next request (a busy caller
    then pays one TLS handshake per connection, not per request) until the client asks to
    close, a request is refused, or it stays idle for the head timeout."""
    refusal: Refusal = refuse or _text_refusal

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, idle: bool) -> bool:
        """Answer one request; True when the connection stays open for another."""
        method, keep = "GET", False
        try:
            head = await _read_head(reader, idle)
            if head is None:
                return False  # the client closed (or stayed idle) without sending anything
            method = head.method  # (a refused HEAD request gets no body either)
            keep = keep_alive and head.keep_alive
            request = await _read_body(reader, head, max_body)
        except HttpError as exc:
            response, keep = refusal(str(exc), exc.status), False
        except Exception as exc:  # a bug in reading: still an answer, and one log line
            _log_failure("reading a request", exc)
            response, keep = refusal("internal error (see the server log)", 500), False
        else:
            response = await _answer(handler, request, refusal)
        keep = keep and response.stream is None  # a stream ends when the connection does
        writer.write(_head(response, close=not keep))
        if response.stream is not None and method != "HEAD":
            await _send_stream(writer, response.stream)
        elif method != "HEAD":
            writer.write(response.body)
        await writer.drain()
        if not keep:
            await _linger(reader, writer)
        return keep

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            idle = False
            while await one(reader, writer, idle):
                idle = True
        except ConnectionError:
            pass  # the client went away: nobody to answer
        finally:
            writer.close()

    if unix_path is not None:  # a local socket: host and port are not used
        return await asyncio.start_unix_server(handle, unix_path, limit=MAX_HEAD)
    if tls is None:
        return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
    return await asyncio.start_server(
        handle, host, port, limit=MAX_HEAD, ssl=tls, ssl_handshake_timeout=_HEAD_TIMEOUT_S
    )


async def _send_stream(writer: asyncio.StreamWriter, chunks: AsyncIterator[bytes]) -> None:
    """Each chunk as soon as it is produced; a client that went away ends the stream (the
    write fails: ConnectionError)."""
    async for chunk in chunks:
        writer.write(chunk)
        await writer.drain()


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After the answer (every connection closes after one): end our side, then read what
    the client still sends, a refused body or bytes past the request, for a bounded amount
    and time before closing. Closing with unread bytes resets the connection, and a reset
    can discard the answer before the client reads it."""
    if writer.can_write_eof():  # (TLS cannot half-close: the linger alone then)
        writer.write_eof()
    left = _LINGER_BYTES
    try:
        async with asyncio.timeout(_LINGER_S):
            while left > 0 and (chunk := await reader.read(min(left, 65536))):
                left -= len(chunk)
    except TimeoutError:
        pass


@dataclass(frozen=True, slots=True)
class _Head:
    method: str
    target: str
    headers: dict[str, str]
    keep_alive: bool = False  # HTTP/1.1 without `Connection: close`


async def _read_head(reader: asyncio.StreamReader, idle: bool = False) -> _Head | None:
    """The request line and headers, None when the client sent nothing at all (or, on a
    kept-alive connection, nothing in time); HttpError when they cannot be read."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=_HEAD_TIMEOUT_S)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequest("bad request: incomplete request head") from None
    except asyncio.LimitOverrunError:
        raise HttpError("request head too large", 431) from None
    except TimeoutError:
        if idle:
            return None
        raise HttpError("request head not received in time", 408) from None
    lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, version = _request_line(lines[0])
    headers = _headers(lines[1:])
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    return _Head(method, target, headers, version == "HTTP/1.1" and "close" not in tokens)


async def _read_body(reader: asyncio.StreamReader, head: _Head, limit: int) -> Request:
    """The whole request; HttpError when its body cannot be read or is refused."""
    length = _content_length(head.headers, limit)
    body = b""
    if length:
        try:
            body = await asyncio.wait_for(reader.readexactly(length), timeout=_BODY_TIMEOUT_S)
        except asyncio.IncompleteReadError as exc:
            raise BadRequest(
                f"request body has {len(exc.partial)} bytes, Content-Length said {length}"
            ) from None
        except TimeoutError:
            raise HttpError("request body not received in time", 408) from None
    path, _, query = head.target.partition("?")
    path = path.partition("#")[0]
    return Request(head.method, path, head.headers, _query(query), body)


def _request_line(line: str) -> tuple[str, str, str]:
    parts = line.split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _VERSION.fullmatch(parts[2]):
        raise BadRequest("bad request")
    method, target = parts[0].upper(), parts[1]
    if not target.startswith("/"):
        raise BadRequest("bad request: the target must be a path")
    return method, target, parts[2]


def _headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest(f"bad request: malformed header line {line[:40]!r}")
        name = name.lower()
        value = value.strip()
        if name == "content-length" and headers.get(name, value) != value:
            raise BadRequest("bad Content-Length: given twice with different values")
        headers[name] = value
    return headers


def _content_length(headers: Mapping[str, str], limit: int) -> int:
    if "transfer-encoding" in headers:
        raise HttpError("Transfer-Encoding is not supported: send a Content-Length", 411)
    text = headers.get("content-length", "0")
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise BadRequest(f"bad Content-Length {text[:20]!r}: expected a number of bytes")
    length = int(text)
    if length > limit:
        raise PayloadTooLarge("request body too large")
    return length


def _query(text: str) -> dict[str, list[str]]:
    try:
        return parse_qs(text, max_num_fields=100)
    except ValueError:
        raise BadRequest("bad request: more than 100 query parameters") from None


async def _answer(handler: Handler, request: Request, refusal: Refusal) -> Response:
    try:
        response = await handler(request)
    except HttpError as exc:
        return refusal(str(exc), exc.status)
    except Exception as exc:  # a bad request must never take the server down
        _log_failure(f"{request.method} {request.path[:200]}", exc)
        return refusal("internal error (see the server log)", 500)
    try:
        HTTPStatus(response.status)
    except ValueError:
        log.error("%s %s: the handler answered status %s", request.method, request.path[:200],
                  response.status)  # fmt: skip
        return refusal("internal error (see the server log)", 500)
    return response


def _log_failure(what: str, exc: Exception) -> None:
    """One line: the exception and where it was raised (no traceback per request)."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    log.error("%s failed: %s: %s (%s:%s)", what, type(exc).__name__, exc, where.filename,
              where.lineno)  # fmt: skip


def _head(response: Response, close: bool = True) -> bytes:
    reason = HTTPStatus(response.status).phrase
    lines = [f"HTTP/1.1 {response.status} {reason}", f"Content-Type: {response.content_type}"]
    if response.stream is None:
        lines.append(f"Content-Length: {len(response.body)}")
    for name, value in response.headers:
        if "\r" in name + value or "\n" in name + value:
            raise ValueError(f"header {name!r}: line breaks are not allowed")
        lines.append(f"{name}: {value}")
    lines.append(f"Connection: {'close' if close else 'keep-alive'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
