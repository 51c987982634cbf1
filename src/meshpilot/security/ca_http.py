"""The CA's call as the front Envoy forwards it: gRPC over HTTP/1.1 on a Unix socket.

    Envoy (TLS, HTTP/2) ──HTTP/1.1, keep-alive──► this server ──► CsrService.issue()

    request   POST /istio.v1.auth.IstioCertificateService/CreateCertificate
              content-type: application/grpc, authorization: Bearer <token>,
              body: one gRPC frame (content-length or chunked)
    answer    200, application/grpc, chunked: one frame, then the trailer grpc-status: 0;
              a refusal is a trailers-only answer: grpc-status and grpc-message as headers

Envoy turns the HTTP/1.1 trailers back into HTTP/2 trailers (the cluster enables them), so
the caller sees the same status codes and messages as grpc.aio's CA. Identity is proven
here, by the token the caller sent, or else by the client certificate Envoy verified
against the mesh roots and passes on as x-forwarded-client-cert (Envoy replaces whatever a
caller sends under that name; only Envoy reaches the socket: 0600 in a 0700 directory).
x-meshpilot-peer, the caller's address, only goes into refusal logs. One asyncio protocol
per Envoy connection, parsing in place: no streams, no tasks per call; the connections
share a read buffer and their answers leave together at the end of a loop iteration
(ServerIo). Per call, only the headers the CA reads are looked up (the first authorization
counts, as on grpc.aio), and the answer's message is the new leaf's field in front of the
CA's part, encoded once per chain.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, NamedTuple
from urllib.parse import unquote_to_bytes

from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
    IstioCertificateRequest,
    IstioCertificateResponse,
)
from meshpilot.security.csr_service import CaRefusal, CsrService
from meshpilot.xds.grpc_service import PEER_HEADER

__all__ = ["CaHttpProtocol", "ServerIo", "chain_answer", "grpc_message"]

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024  # a CSR request is about 1 KB
_MAX_PENDING = MAX_HEAD + 2 * MAX_BODY  # unparsed bytes of one connection, at most
_PATH = CREATE_CERTIFICATE.encode()
_XFCC_CERT = re.compile(rb'(?:^|;)Cert="([^"]*)"')
_PEER_CERT = "x509_pem_cert"  # the key grpc's auth_context gives a client certificate
_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"
# gRPC status codes (grpc.StatusCode values are tuples; the wire wants the number).
_INVALID_ARGUMENT, _UNIMPLEMENTED, _INTERNAL = 3, 12, 13


class _BadRequest(Exception):
    """The bytes are not an HTTP/1.1 request Envoy would send: the connection is closed."""


class ServerIo:
    """What the connections of one server share: a read buffer and the answers waiting.

    Reads land in one scratch buffer (asyncio's plain protocols receive into a fresh
    256 KiB bytes object per read, an allocation per request). Answers are
    held until the loop has read every request that arrived with them, then written
    together: Envoy wakes once per batch instead of once per answer and sends the batch
    to its callers in fewer TLS records and system calls: less CPU per certificate."""

    def __init__(self, scratch_size: int = 64 * 1024) -> None:
        self.scratch = memoryview(bytearray(scratch_size))
        self.tails: dict[tuple[str, ...], bytes] = {}  # see chain_answer
        self._pending: list[tuple[asyncio.Transport, bytes, bool]] = []

    def put(self, transport: asyncio.Transport, answer: bytes, close: bool = False) -> None:
        if not self._pending:
            # Runs after the handlers of the events of this loop iteration.
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append((transport, answer, close))

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for transport, answer, close in pending:
            if transport.is_closing():
                continue  # Envoy went away: nobody to answer
            transport.write(answer)
            if close:
                transport.close()


class CaHttpProtocol(asyncio.BufferedProtocol):
    """One Envoy connection; requests are answered in order as they complete."""

    def __init__(self, service: CsrService, io: ServerIo | None = None) -> None:
        self._service = service
        self._io = io or ServerIo()
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._io.scratch  # copied out in buffer_updated, before the next read

    def buffer_updated(self, nbytes: int) -> None:
        transport = self._transport
        assert transport is not None
        if self._refused:
            return  # a 400 is on its way: nothing more is read
        self._buffer += self._io.scratch[:nbytes]
        try:
            while (request := _take_request(self._buffer)) is not None:
                self._io.put(transport, self._answer_safely(request))
            if len(self._buffer) > _MAX_PENDING:
                raise _BadRequest("request too large")  # (e.g. a chunk size line without end)
        except _BadRequest as exc:
            self._refuse(str(exc))

    def eof_received(self) -> bool:
        """The caller stopped sending: the connection closes after the answers on their way,
        and a request cut short is answered 400."""
        if self._refused:
            return True  # (closed once the 400 is written)
        if self._buffer.strip():
            self._refuse("the request ended before it was complete")
        else:
            assert self._transport is not None
            self._io.put(self._transport, b"", close=True)
        return True

    def _refuse(self, reason: str) -> None:
        assert self._transport is not None
        log.warning("CA port: closing a connection from the front Envoy: %s", reason)
        self._refused = True
        self._io.put(self._transport, _BAD_REQUEST, close=True)

    def _answer_safely(self, request: _Request) -> bytes:
        try:
            return self._answer(request)
        except Exception as exc:  # a bug must cost one call, not the connection
            log.error("CA port: answering a call failed: %s: %s", type(exc).__name__, exc)
            return _refusal(_INTERNAL, "the CA failed to answer")

    def _answer(self, request: _Request) -> bytes:
        path, head, low, body = request
        if path != _PATH:
            return _refusal(_UNIMPLEMENTED, f"unknown method {path.decode(errors='replace')}")
        if len(body) < 5 or body[0] != 0 or int.from_bytes(body[1:5], "big") != len(body) - 5:
            return _refusal(_INTERNAL, "expected one uncompressed gRPC message")
        try:
            message = IstioCertificateRequest.FromString(body[5:])
        except Exception:  # protobuf's DecodeError, or a field of the wrong type
            return _refusal(_INVALID_ARGUMENT, "the request is not an IstioCertificateRequest")
        token = _header(head, low, b"authorization")
        metadata = [("authorization", token.decode("latin-1"))] if token is not None else []
        try:
            proof = _client_cert(head, low)
            chain = self._service.issue(message, metadata, proof, _peer(head, low))
        except CaRefusal as refusal:
            return _refusal(refusal.code.value[0], refusal.message)
        return chain_answer(chain, self._io.tails)


def _client_cert(head: bytes, low: bytes) -> Any:
    """The caller's certificate as the front Envoy verified it (asked only without a
    token): Envoy drops any x-forwarded-client-cert a caller sends and sets its own, with
    the PEM URL-encoded, and only Envoy reaches this socket."""

    def auth_context() -> dict[str, list[bytes]]:
        found = _XFCC_CERT.search(_header(head, low, b"x-forwarded-client-cert") or b"")
        return {_PEER_CERT: [unquote_to_bytes(found.group(1))]} if found else {}

    return auth_context


def _peer(head: bytes, low: bytes) -> Any:
    def peer() -> str:
        # The connection's address, set by the front Envoy (x-meshpilot-peer); logs only.
        address = _header(head, low, PEER_HEADER.encode()) or b""
        return f"{address.decode('latin-1') or 'unknown'} (via the front Envoy)"

    return peer


_OK_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\ntransfer-encoding: chunked\r\n\r\n"
)
_OK_END = b"\r\n0\r\ngrpc-status: 0\r\n\r\n"
_MAX_TAILS = 8  # CA chains remembered (a plugged-in CA may be replaced, rarely)


def chain_answer(chain: tuple[str, ...], tails: dict[tuple[str, ...], bytes]) -> bytes:
    """The 200 answer carrying IstioCertificateResponse(cert_chain=chain), its message
    bytes equal to protobuf's: only the leaf's field is encoded per call, the CA's part of
    the chain (the same in every answer) once, in `tails`."""
    tail = tails.get(chain[1:])
    if tail is None:
        if len(tails) >= _MAX_TAILS:
            tails.clear()
        tail = IstioCertificateResponse(cert_chain=chain[1:]).SerializeToString()
        tails[chain[1:]] = tail
    leaf = chain[0].encode()
    field = b"\n" + _varint(len(leaf))  # field 1, length-delimited
    size = len(field) + len(leaf) + len(tail)
    frame_head = b"%x\r\n\0" % (size + 5) + size.to_bytes(4, "big")
    return b"".join((_OK_HEAD, frame_head, field, leaf, tail, _OK_END))


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _refusal(code: int, message: str) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\n"
        b"grpc-status: %d\r\ngrpc-message: %s\r\ncontent-length: 0\r\n\r\n"
        % (code, grpc_message(message))
    )


def grpc_message(text: str) -> bytes:
    """gRPC's grpc-message encoding: printable ASCII except '%' as is, the rest %XX."""
    return b"".join(
        bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in text.encode()
    )


class _Request(NamedTuple):
    path: bytes
    head: bytes  # the header lines, each after a CRLF
    low: bytes  # the same, lowercased: header names are found in it
    body: bytes


def _header(head: bytes, low: bytes, name: bytes) -> bytes | None:
    """The first value of header `name` (lowercase), as 15012 takes the first metadata."""
    start = low.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


def _take_request(buffer: bytearray) -> _Request | None:
    """The next whole request, removed from `buffer`; None while it is incomplete. Only
    the headers the CA reads are looked up, in the head as it came (Envoy writes every
    header line as name: value; nothing in a value can hold a CRLF)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise _BadRequest("request head too large")
        return None
    line_end = buffer.find(b"\r\n", 0, end)
    line_end = end if line_end < 0 else line_end
    parts = bytes(buffer[:line_end]).split(b" ")
    if len(parts) != 3 or parts[0] != b"POST":
        raise _BadRequest("not a POST request line")
    head = bytes(buffer[line_end:end])
    low = head.lower()
    start = end + 4
    encoding = _header(head, low, b"transfer-encoding")
    if encoding is not None and encoding.lower() == b"chunked":
        taken = _chunked(buffer, start)
        if taken is None:
            return None
        body, stop = taken
    else:
        try:
            length = int(_header(head, low, b"content-length") or b"0")
        except ValueError:
            raise _BadRequest("bad content-length") from None
        if not 0 <= length <= MAX_BODY:
            raise _BadRequest("request body too large")
        if len(buffer) < start + length:
            return None
        body, stop = bytes(buffer[start : start + length]), start + length
    del buffer[:stop]
    return _Request(parts[1], head, low, body)


def _chunked(buffer: bytearray, pos: int) -> tuple[bytes, int] | None:
    """A chunked body starting at `pos`: (body, index after it) or None if incomplete."""
    body = bytearray()
    while True:
        eol = buffer.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(bytes(buffer[pos:eol]).split(b";", 1)[0], 16)
        except ValueError:
            raise _BadRequest("bad chunk size") from None
        if size < 0 or len(body) + size > MAX_BODY:
            raise _BadRequest("request body too large")
        if size == 0:
            # Trailers (none expected from Envoy), then the blank line.
            end = buffer.find(b"\r\n\r\n", eol)
            if end < 0:
                return None
            return bytes(body), end + 4
        if len(buffer) < eol + 2 + size + 2:
            return None
        body += buffer[eol + 2 : eol + 2 + size]
        pos = eol + 2 + size + 2
