"""The CA's two entry points fed bytes no client should send: the gRPC call (15012's
CreateCertificate, here on a loopback port) answers INVALID_ARGUMENT in one log line, and
the HTTP/1.1 protocol behind the CA port's Envoy (a real Unix socket) answers every request
with a status, whatever its bytes, and keeps serving. Derandomized and bounded."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import CREATE_CERTIFICATE, IstioCertificateRequest
from meshpilot.security.ca_http import CaHttpProtocol
from meshpilot.security.csr_service import CsrService
from meshpilot.security.tokens import TokenAuthority
from tests.unit.security.pki import workload_csr


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Ca:
    grpc_port: int
    socket_path: str
    token: str
    log: Records


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ca]:
    tmp = tmp_path_factory.mktemp("ca")
    authority = CertificateAuthority.open(tmp / "ca")
    tokens = TokenAuthority.open(tmp / "ca")
    service = CsrService(authority, tokens)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    path = str(tmp / "ca.sock")

    async def start() -> tuple[grpc.aio.Server, asyncio.Server, int]:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((service.handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        http = await asyncio.get_running_loop().create_unix_server(
            lambda: CaHttpProtocol(service), path
        )
        return server, http, port

    server, http, port = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    handle = Ca(port, path, tokens.issue("default", "reviews", "reviews-v1"), Records())
    logging.getLogger().addHandler(handle.log)
    try:
        yield handle
    finally:
        logging.getLogger().removeHandler(handle.log)

        async def stop() -> None:
            http.close()
            await server.stop(0)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def grpc_call(ca: Ca, raw: bytes) -> tuple[grpc.StatusCode, str]:
    with grpc.insecure_channel(f"127.0.0.1:{ca.grpc_port}") as channel:
        call = channel.unary_unary(CREATE_CERTIFICATE, lambda b: b, lambda b: b)
        try:
            call(raw, timeout=10, metadata=[("authorization", f"Bearer {ca.token}")])
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def test_grpc_bytes_that_are_not_a_request_are_invalid_argument(ca: Ca) -> None:
    start = len(ca.log.records)
    for raw in (b"\xff\xff", b"\x0a\x02\xc3\x28", b"\x10" + b"\xff" * 11):
        assert grpc_call(ca, raw) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "the request is not an IstioCertificateRequest",
        )
    records = ca.log.records[start:]
    assert len(records) == 3, [r.getMessage() for r in records]  # one line per call
    assert all(r.getMessage().endswith("not an IstioCertificateRequest") for r in records)
    assert not [r for r in records if r.exc_info]
    good = IstioCertificateRequest(csr=workload_csr("default", "reviews"), validity_duration=60)
    assert grpc_call(ca, good.SerializeToString())[0] == grpc.StatusCode.OK


def http_exchange(path: str, raw: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _frame(message: bytes) -> bytes:
    return b"\0" + len(message).to_bytes(4, "big") + message


@st.composite
def http_requests(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from([b"POST", b"GET", b"", b"POST POST"]))
    path = draw(st.sampled_from([CREATE_CERTIFICATE.encode(), b"/", b"/x"]))
    body = draw(
        st.sampled_from([b"", _frame(b""), _frame(b"\xff\xff"), b"\0\0\0\0\x09abc"])
        | st.binary(max_size=40).map(_frame)
        | st.binary(max_size=40)
    )
    length = draw(
        st.sampled_from(
            [b"%d" % len(body), b"-1", b"x", b"99999999999", b"0", b"%d" % (len(body) + 3)]
        )
    )
    framing = draw(st.sampled_from(["length", "chunked", "bad-chunk", "none"]))
    if framing == "length":
        head = b"content-length: " + length + b"\r\n"
    elif framing == "chunked":
        head = b"transfer-encoding: chunked\r\n"
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    elif framing == "bad-chunk":
        head, body = b"transfer-encoding: chunked\r\n", b"zz\r\n" + body
    else:
        head = b""
    auth = draw(
        st.sampled_from(
            [b"authorization: Bearer nope\r\n", b"", b'x-forwarded-client-cert: Cert="%ZZ"\r\n']
        )
    )
    return method + b" " + path + b" HTTP/1.1\r\n" + head + auth + b"\r\n" + body


@settings(
    max_examples=150,
    derandomize=True,
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(raw=http_requests())
def test_every_http_request_to_the_ca_port_gets_a_status(ca: Ca, raw: bytes) -> None:
    answer = http_exchange(ca.socket_path, raw)
    statuses = [part.split(b"\r\n", 1)[0] for part in answer.split(b"HTTP/1.1 ")[1:]]
    assert statuses, (raw, answer)
    assert set(statuses) <= {b"200 OK", b"400 Bad Request"}, (raw, answer)


def test_ca_port_serves_after_the_fuzzing_and_logged_no_traceback(ca: Ca, tmp_path: Path) -> None:
    message = IstioCertificateRequest(csr=workload_csr("default", "reviews"), validity_duration=60)
    body = _frame(message.SerializeToString())
    raw = (
        b"POST " + CREATE_CERTIFICATE.encode() + b" HTTP/1.1\r\ncontent-length: %d\r\n"
        b"authorization: Bearer %s\r\n\r\n%s" % (len(body), ca.token.encode(), body)
    )
    answer = http_exchange(ca.socket_path, raw)
    assert answer.startswith(b"HTTP/1.1 200 OK") and b"grpc-status: 0" in answer
    assert not [r for r in ca.log.records if r.exc_info or r.levelno >= logging.ERROR]
