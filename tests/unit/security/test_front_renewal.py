"""15012 through the front Envoy, as Istio serves it: a token, or the current certificate
(asked for, not required) proves the caller. Real Envoy, real TLS, real gRPC callers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import CREATE_CERTIFICATE, IstioCertificateRequest
from meshpilot.security.certs import key_pem, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.secure_server import SecureServer
from meshpilot.security.tokens import TokenAuthority
from tests.unit.security.grpc_client import channel, create_certificate, refused
from tests.unit.security.pki import TD, load_chain, uri, verify_client_chain, workload_csr


class Env:
    def __init__(self, tmp: Path) -> None:
        self.ca = CertificateAuthority.open(tmp / "ca")
        self.tokens = TokenAuthority.open(tmp / "ca")
        self.server = SecureServer(self.ca, self.tokens)

    def secure(self, client: tuple[bytes, bytes] | None = None) -> grpc.aio.Channel:
        return channel(self.server.port, self.ca.root_pem, client=client)


def run(tmp: Path, scenario: Callable[[Env], Awaitable[None]]) -> None:
    async def main() -> None:
        env = Env(tmp)
        await env.server.start("127.0.0.1", 0, front=True)
        try:
            assert env.server.front_envoy_pid is not None
            await scenario(env)
        finally:
            await env.server.stop(0)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_renewal_on_15012_with_the_current_certificate(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        key = new_key()
        token = env.tokens.issue("default", "reviews", "reviews-pod")
        async with env.secure() as chan:
            first = await create_certificate(chan, workload_csr("default", "reviews", key), token)
        client = (key_pem(key), "".join(first[:-1]).encode())
        async with env.secure(client) as chan:
            renewed = await create_certificate(chan, workload_csr("default", "reviews"))
            assert verify_client_chain(load_chain(renewed), env.ca.material.root) == [
                uri(f"spiffe://{TD}/ns/default/sa/reviews")
            ]
            code, details = await refused(
                create_certificate(chan, workload_csr("default", "admin"))
            )
        assert code == grpc.StatusCode.PERMISSION_DENIED and "ns/default/sa/reviews" in details

    run(tmp_path, scenario)


def test_a_foreign_certificate_fails_the_handshake(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        key = new_key()
        foreign = CertificateAuthority.open(tmp_path / "foreign")
        reviews = SpiffeId(TD, "default", "reviews")
        chain = foreign.sign(workload_csr("default", "reviews", key), reviews).chain_pem
        async with env.secure((key_pem(key), "".join(chain[:-1]).encode())) as chan:
            code, _ = await refused(create_certificate(chan, workload_csr("default", "reviews")))
        assert code == grpc.StatusCode.UNAVAILABLE

    run(tmp_path, scenario)


def test_a_caller_cannot_forge_the_certificate_header(tmp_path: Path) -> None:
    """Envoy drops a caller's own x-forwarded-client-cert before setting the real one: a
    caller with neither token nor certificate gets nothing, whatever it claims."""
    granted = CertificateAuthority.open(tmp_path / "other").sign(
        workload_csr("default", "reviews"), SpiffeId(TD, "default", "reviews")
    )
    forged = 'Hash=00;Cert="' + granted.chain_pem[0].replace("\n", "%0A") + '"'

    async def scenario(env: Env) -> None:
        async with env.secure() as chan:
            call = chan.unary_unary(
                CREATE_CERTIFICATE, request_serializer=IstioCertificateRequest.SerializeToString
            )
            request = IstioCertificateRequest(csr=workload_csr("default", "reviews"))
            code, details = await refused(
                call(request, metadata=[("x-forwarded-client-cert", forged)], timeout=10)
            )
        assert code == grpc.StatusCode.UNAUTHENTICATED and "no credential" in details

    run(tmp_path, scenario)
