"""The CA port (15011): the CA behind a real Envoy that terminates TLS and HTTP/2, over real
gRPC from the caller's side. The caller must see exactly what 15012 answers: the chain for
the identity its token proves, the same status codes and messages for every refusal, no
token in any log line; and nothing reaching the CA's socket without a token gets a
certificate, whatever headers it sets."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from meshpilot.agent.ca_client import CaClient, CaError, CaSettings
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import CREATE_CERTIFICATE, IstioCertificateRequest
from meshpilot.security.ca_http import grpc_message
from meshpilot.security.secure_server import SecureServer
from meshpilot.security.tokens import TokenAuthority
from tests.unit.security.grpc_client import channel, create_certificate, refused
from tests.unit.security.pki import TD, load_chain, uri, verify_client_chain, workload_csr


class Env:
    def __init__(self, tmp: Path) -> None:
        self.ca = CertificateAuthority.open(tmp / "ca")
        self.tokens = TokenAuthority.open(tmp / "ca")
        self.server = SecureServer(self.ca, self.tokens)

    def token(self, namespace: str = "default", sa: str = "reviews") -> str:
        return self.tokens.issue(namespace, sa, f"{sa}-pod")

    def ca_port(self) -> grpc.aio.Channel:
        return channel(self.server.ca_port, self.ca.root_pem)


def run(tmp: Path, scenario: Callable[[Env], Awaitable[None]]) -> None:
    async def main() -> None:
        env = Env(tmp)
        await env.server.start("127.0.0.1", 0, ca_port=0)
        try:
            await scenario(env)
        finally:
            await env.server.stop(0)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_ca_port_signs_what_the_token_proves_and_refuses_like_15012(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens: list[str] = []

    async def scenario(env: Env) -> None:
        assert env.server.ca_port not in (0, env.server.port)
        tokens.append(env.token("team-a", "web"))
        async with env.ca_port() as chan:
            # Several calls in flight on one connection, as a loaded agent sends them.
            csrs = [workload_csr("team-a", "web") for _ in range(8)]
            chains = await asyncio.gather(
                *(create_certificate(chan, csr, tokens[0], ttl=3600) for csr in csrs)
            )
            for chain in chains:
                certs = load_chain(list(chain))
                assert certs[-1] == env.ca.material.root and len(certs) == 2
                assert verify_client_chain(certs, env.ca.material.root) == [
                    uri(f"spiffe://{TD}/ns/team-a/sa/web")
                ]
            refusals = [
                await refused(create_certificate(chan, workload_csr("team-b", "web"), tokens[0])),
                await refused(create_certificate(chan, workload_csr("team-a", "web"))),
                await refused(create_certificate(chan, "garbage", tokens[0])),
                await refused(create_certificate(chan, csrs[0], tokens[0] + "x")),
            ]
        # The same call on 15012 (grpc.aio) answers the same codes and messages.
        async with channel(env.server.port, env.ca.root_pem) as chan:
            same = [
                await refused(create_certificate(chan, workload_csr("team-b", "web"), tokens[0])),
                await refused(create_certificate(chan, workload_csr("team-a", "web"))),
                await refused(create_certificate(chan, "garbage", tokens[0])),
                await refused(create_certificate(chan, csrs[0], tokens[0] + "x")),
            ]
        assert refusals == same
        assert [code for code, _ in refusals] == [
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.UNAUTHENTICATED,
        ]
        assert refusals[0][1] == (
            "CSR refused: the CSR asks for URI:spiffe://cluster.local/ns/team-b/sa/web "
            "but the caller proved only spiffe://cluster.local/ns/team-a/sa/web"
        )
        metrics = env.server.csr.metrics
        assert metrics.issued.get() == 8 and metrics.identity_errors.get() == 2

    with caplog.at_level(logging.DEBUG):
        run(tmp_path, scenario)
    refusal = [r.getMessage() for r in caplog.records if "refused CSR" in r.getMessage()]
    assert any("via the front Envoy" in line and "web-pod.team-a" in line for line in refusal)
    for record in caplog.records:
        assert tokens[0].split(".")[2] not in record.getMessage()


def test_unknown_method_on_the_ca_port_is_unimplemented(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        async with env.ca_port() as chan:
            call = chan.unary_unary(
                "/envoy.service.discovery.v3.AggregatedDiscoveryService/Nope",
                request_serializer=IstioCertificateRequest.SerializeToString,
            )
            code, _ = await refused(call(IstioCertificateRequest(csr="x"), timeout=10))
        assert code == grpc.StatusCode.UNIMPLEMENTED

    run(tmp_path, scenario)


def _raw_call(path: Path, head: bytes, body: bytes) -> bytes:
    """One HTTP/1.1 request straight to the CA's Unix socket (bypassing Envoy)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(head + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        return data


def test_the_ca_socket_trusts_no_header_without_a_token(tmp_path: Path) -> None:
    """Whoever reaches the socket (it is 0600 in a 0700 directory) needs a token or the
    certificate Envoy passes on (Cert= of x-forwarded-client-cert, which Envoy always
    replaces: test_front_renewal.py): addresses and a bare subject prove nothing."""

    async def scenario(env: Env) -> None:
        upstream = _ca_dir(env) / "ca.sock"
        assert upstream.stat().st_mode & 0o777 == 0o600
        assert upstream.parent.stat().st_mode & 0o777 == 0o700
        # Envoy's bootstrap carries the serving key: gone once Envoy has read it.
        assert not (upstream.parent / "envoy.json").exists()
        message = IstioCertificateRequest(csr=workload_csr("default", "reviews"))
        payload = message.SerializeToString()
        body = b"\0" + len(payload).to_bytes(4, "big") + payload
        head = (
            b"POST " + CREATE_CERTIFICATE.encode() + b" HTTP/1.1\r\n"
            b"content-type: application/grpc\r\n"
            b"x-forwarded-client-cert: By=spiffe://cluster.local/ns/default/sa/reviews\r\n"
            b"x-forwarded-for: 10.0.0.1\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        answer = await asyncio.to_thread(_raw_call, upstream, head, body)
        assert b"grpc-status: 16\r\n" in answer  # UNAUTHENTICATED
        assert b"BEGIN CERTIFICATE" not in answer

    run(tmp_path, scenario)


def _ca_dir(env: Env) -> Path:
    """The CA port's private directory (its socket and Envoy bootstrap)."""
    front = env.server._front
    assert front is not None and front._dir is not None
    return front._dir


def test_ca_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    async def main() -> None:
        env = Env(tmp_path)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
                await env.server.start("127.0.0.1", 0, ca_port=port)
        assert env.server.front_envoy_pid is None

    asyncio.run(asyncio.wait_for(main(), 60))


def test_grpc_message_is_percent_encoded() -> None:
    assert grpc_message("CSR refused: 100% é\n") == b"CSR refused: 100%25 %C3%A9%0A"


def test_the_agents_ca_client_gets_its_certificate_from_the_ca_port(tmp_path: Path) -> None:
    """`meshpilot proxy --ca-address <host>:15011`: the agent's own client, a new TLS
    channel per call, the token read from its file."""

    async def scenario(env: Env) -> None:
        root, token = tmp_path / "root-cert.pem", tmp_path / "token"
        root.write_bytes(env.ca.root_pem)
        token.write_text(env.token("default", "ratings"))
        client = CaClient(
            CaSettings(address=f"127.0.0.1:{env.server.ca_port}", root_cert=root, token_file=token)
        )
        chain = await client.sign(workload_csr("default", "ratings").encode(), 3600)
        assert verify_client_chain(load_chain(chain), env.ca.material.root) == [
            uri(f"spiffe://{TD}/ns/default/sa/ratings")
        ]
        with pytest.raises(CaError, match="PERMISSION_DENIED: CSR refused: the CSR asks for"):
            await client.sign(workload_csr("default", "reviews").encode(), 3600)

    run(tmp_path, scenario)


def test_a_dead_envoy_is_restarted_and_stop_leaves_nothing(tmp_path: Path) -> None:
    dirs: list[Path] = []

    async def scenario(env: Env) -> None:
        dirs.append(_ca_dir(env))
        first = env.server.front_envoy_pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        async with env.ca_port() as chan:
            for _ in range(200):  # the restart backoff is 0.2 s
                if env.server.front_envoy_pid not in (None, first):
                    break
                await asyncio.sleep(0.05)
            await chan.channel_ready()
            chain = await create_certificate(chan, workload_csr("default", "reviews"), env.token())
        assert len(chain) == 2
        dirs.append(Path(f"/proc/{env.server.front_envoy_pid}"))

    run(tmp_path, scenario)
    assert not dirs[0].exists()  # the socket's private directory
    assert not dirs[1].exists()  # the second Envoy process
