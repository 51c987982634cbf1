"""The CA's HTTP/1.1 protocol (what the CA port's Envoy speaks to discovery), on a real Unix
socket: bodies chunked or sized, split across reads or several per read, refusals as
trailers-only answers, and requests it cannot read closed with a 400."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
    IstioCertificateRequest,
    IstioCertificateResponse,
)
from meshpilot.security.ca_http import CaHttpProtocol, chain_answer
from meshpilot.security.csr_service import CsrService
from meshpilot.security.tokens import TokenAuthority
from tests.unit.security.pki import workload_csr


def _frame(csr: str) -> bytes:
    message: bytes = IstioCertificateRequest(csr=csr, validity_duration=3600).SerializeToString()
    return b"\0" + len(message).to_bytes(4, "big") + message


def _head(token: str, extra: bytes) -> bytes:
    return (
        b"POST " + CREATE_CERTIFICATE.encode() + b" HTTP/1.1\r\nhost: ca\r\n"
        b"content-type: application/grpc\r\nte: trailers\r\n"
        b"authorization: Bearer " + token.encode() + b"\r\n" + extra + b"\r\n"
    )


def _chunked(body: bytes) -> bytes:
    half = len(body) // 2
    return b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])


def test_requests_split_pipelined_chunked_and_refused(tmp_path: Path) -> None:
    ca = CertificateAuthority.open(tmp_path / "ca")
    tokens = TokenAuthority.open(tmp_path / "ca")
    token = tokens.issue("default", "reviews", "reviews-v1")
    sized = _frame(workload_csr("default", "reviews"))
    chunked = _chunked(_frame(workload_csr("default", "reviews")))
    foreign = _frame(workload_csr("prod", "reviews"))

    async def main() -> list[bytes]:
        path = str(tmp_path / "ca.sock")
        service = CsrService(ca, tokens)
        server = await asyncio.get_running_loop().create_unix_server(
            lambda: CaHttpProtocol(service), path
        )
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            first = _head(token, b"transfer-encoding: chunked\r\n") + chunked
            for piece in (first[:50], first[50:700], first[700:]):  # split across reads
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.01)
            # Two requests in one write: a sized one, then one for another identity.
            writer.write(
                _head(token, b"content-length: %d\r\n" % len(sized))
                + sized
                + _head(token, b"content-length: %d\r\n" % len(foreign))
                + foreign
            )
            writer.write(b"GET / HTTP/1.1\r\n\r\n")  # not what Envoy sends
            await writer.drain()
            answers = (await asyncio.wait_for(reader.read(), 10)).split(b"HTTP/1.1 ")[1:]
            writer.close()
            return answers
        finally:
            server.close()

    answers = asyncio.run(main())
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"200 OK"] * 3 + [b"400 Bad Request"]
    for ok in answers[:2]:
        assert b"BEGIN CERTIFICATE" in ok and ok.endswith(b"\r\n0\r\ngrpc-status: 0\r\n\r\n")
    assert b"grpc-status: 7\r\n" in answers[2]
    assert (
        b"grpc-message: CSR refused: the CSR asks for URI:spiffe://cluster.local/ns/prod"
        in (answers[2])
    )


def test_header_names_any_case_and_the_first_authorization_counts(tmp_path: Path) -> None:
    """As on 15012 (grpc metadata: the first authorization value is the credential)."""
    ca = CertificateAuthority.open(tmp_path / "ca")
    tokens = TokenAuthority.open(tmp_path / "ca")
    good = tokens.issue("default", "reviews", "reviews-v1")
    body = _frame(workload_csr("default", "reviews"))

    def request(*auth: str) -> bytes:
        lines = b"".join(b"AUTHORIZATION:  Bearer %s \r\n" % a.encode() for a in auth)
        return (
            b"POST " + CREATE_CERTIFICATE.encode() + b" HTTP/1.1\r\nHost: ca\r\n" + lines
            + b"Content-Length: %d\r\n\r\n" % len(body) + body
        )  # fmt: skip

    async def main() -> list[bytes]:
        path = str(tmp_path / "ca.sock")
        service = CsrService(ca, tokens)
        server = await asyncio.get_running_loop().create_unix_server(
            lambda: CaHttpProtocol(service), path
        )
        try:
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(request(good, "forged") + request("forged", good) + request())
            writer.write_eof()
            answers = (await asyncio.wait_for(reader.read(), 10)).split(b"HTTP/1.1 ")[1:]
            writer.close()
            return answers
        finally:
            server.close()

    first_good, first_forged, none = asyncio.run(main())
    assert b"grpc-status: 0\r\n" in first_good and b"BEGIN CERTIFICATE" in first_good
    assert b"grpc-status: 16\r\n" in first_forged and b"not a JWT" in first_forged
    assert b"grpc-status: 16\r\n" in none and b"no credential" in none


@pytest.mark.parametrize("leaf_size", [1, 127, 128, 16383, 16384, 70000])
def test_answer_carries_exactly_what_protobuf_encodes(leaf_size: int) -> None:
    tails: dict[tuple[str, ...], bytes] = {}
    for tail in [(), ("root",), ("intermediate\n" * 50, "root\n" * 9)]:
        chain = ("L" * leaf_size, *tail)
        answer = chain_answer(chain, tails)
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"transfer-encoding: chunked" in head
        size_line, _, rest = rest.partition(b"\r\n")
        frame = rest[: int(size_line, 16)]
        assert rest[len(frame) :] == b"\r\n0\r\ngrpc-status: 0\r\n\r\n"
        expected = IstioCertificateResponse(cert_chain=chain).SerializeToString()
        assert frame == b"\0" + len(expected).to_bytes(4, "big") + expected
        assert tuple(IstioCertificateResponse.FromString(frame[5:]).cert_chain) == chain
    assert len(tails) == 3
    for i in range(20):  # a CA replaced many times: the remembered tails stay few
        chain_answer(("leaf", f"root {i}"), tails)
    assert len(tails) <= 8
