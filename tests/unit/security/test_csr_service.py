"""The CA endpoint over real gRPC and TLS on loopback: tokens, identities, renewal by client
certificate, the serving certificate proxies verify, and ADS on the same TLS port."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.discovery import Discovery
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.certs import key_pem, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.secure_server import SecureServer
from meshpilot.security.tokens import TokenAuthority
from meshpilot.settings import Ports, Settings
from meshpilot.xds.protos import TypeUrl
from tests.conftest import REPO
from tests.unit.security.grpc_client import channel, create_certificate, refused
from tests.unit.security.pki import TD, load_chain, uri, verify_client_chain, workload_csr

Scenario = Callable[["Env"], Awaitable[None]]


class Env:
    def __init__(self, tmp: Path) -> None:
        self.ca = CertificateAuthority.open(tmp / "ca")
        self.tokens = TokenAuthority.open(tmp / "ca")
        self.server = SecureServer(self.ca, self.tokens)

    def token(self, namespace: str = "default", sa: str = "reviews") -> str:
        return self.tokens.issue(namespace, sa, f"{sa}-pod")

    def tls(self, **kwargs: Any) -> grpc.aio.Channel:
        return channel(self.server.port, self.ca.root_pem, **kwargs)

    def mtls(self, key: bytes, chain: bytes) -> grpc.aio.Channel:
        return channel(self.server.mtls_port, self.ca.root_pem, client=(key, chain))


def run(tmp: Path, scenario: Scenario) -> None:
    async def main() -> None:
        env = Env(tmp)
        await env.server.start("127.0.0.1", 0, mtls_port=0)
        try:
            await scenario(env)
        finally:
            await env.server.stop(0)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_token_gets_a_certificate_for_its_identity(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        async with env.tls() as chan:
            chain = await create_certificate(
                chan, workload_csr("default", "reviews"), env.token(), ttl=3600
            )
        certs = load_chain(chain)
        assert certs[-1] == env.ca.material.root and len(certs) == 2
        assert verify_client_chain(certs, env.ca.material.root) == [
            uri(f"spiffe://{TD}/ns/default/sa/reviews")
        ]
        lifetime = certs[0].not_valid_after_utc - dt.datetime.now(dt.UTC)
        assert dt.timedelta(minutes=59) < lifetime <= dt.timedelta(hours=1)
        assert env.server.csr.metrics.issued.get() == 1

    run(tmp_path, scenario)


def test_token_for_one_namespace_cannot_get_another(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens: list[str] = []

    async def scenario(env: Env) -> None:
        tokens.append(env.token("team-a", "web"))
        async with env.tls() as chan:
            code, details = await refused(
                create_certificate(chan, workload_csr("team-b", "web"), tokens[0])
            )
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert details == (
            "CSR refused: the CSR asks for URI:spiffe://cluster.local/ns/team-b/sa/web "
            "but the caller proved only spiffe://cluster.local/ns/team-a/sa/web"
        )

    with caplog.at_level(logging.DEBUG):
        run(tmp_path, scenario)
    refusal = [r.getMessage() for r in caplog.records if "refused CSR" in r.getMessage()]
    assert refusal and "token of pod web-pod.team-a" in refusal[0]
    assert not any(tokens[0] in r.getMessage() for r in caplog.records)
    assert not any(tokens[0].split(".")[2] in r.getMessage() for r in caplog.records)


def test_missing_forged_or_malformed_credentials(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        csr = workload_csr("default", "reviews")
        forged = TokenAuthority.open(tmp_path / "elsewhere").issue("default", "reviews", "p")
        async with env.tls() as chan:
            code, details = await refused(create_certificate(chan, csr))
            assert code == grpc.StatusCode.UNAUTHENTICATED
            assert details.startswith("no credential: send 'authorization: Bearer <token>'")
            code, details = await refused(create_certificate(chan, csr, forged))
            assert code == grpc.StatusCode.UNAUTHENTICATED
            assert "signature is invalid" in details and forged not in details
            huge = await create_certificate(chan, csr, env.token(), ttl=2**62)
            assert load_chain(huge)[0].not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(
                days=91
            )
            code, details = await refused(create_certificate(chan, csr, env.token(), ttl=-60))
            assert (code, details) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "invalid CSR: requested lifetime -60s is negative",
            )
            code, details = await refused(create_certificate(chan, "garbage", env.token()))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert details == (
                "invalid CSR: the CSR is not a PEM certificate request (BEGIN CERTIFICATE REQUEST)"
            )
        assert env.server.csr.metrics.auth_failures.get() == 2
        assert env.server.csr.metrics.parsing_errors.get() == 2

    run(tmp_path, scenario)


def test_renewal_with_the_current_certificate(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        key = new_key()
        async with env.tls() as chan:
            first = await create_certificate(
                chan, workload_csr("default", "reviews", key), env.token()
            )
        client = (key_pem(key), "".join(first[:-1]).encode())
        async with env.mtls(*client) as chan:
            renewed = await create_certificate(chan, workload_csr("default", "reviews"))
            assert verify_client_chain(load_chain(renewed), env.ca.material.root)
            code, details = await refused(
                create_certificate(chan, workload_csr("default", "admin"))
            )
            assert code == grpc.StatusCode.PERMISSION_DENIED and "ns/default/sa/reviews" in details
        # The mTLS port wants a certificate from this mesh: none, or a foreign one, fails.
        async with channel(env.server.mtls_port, env.ca.root_pem) as chan:
            code, _ = await refused(create_certificate(chan, workload_csr("default", "reviews")))
            assert code == grpc.StatusCode.UNAVAILABLE
        foreign = CertificateAuthority.open(tmp_path / "foreign")
        reviews = SpiffeId(TD, "default", "reviews")
        foreign_chain = foreign.sign(workload_csr("default", "reviews", key), reviews).chain_pem
        async with env.mtls(key_pem(key), foreign_chain[0].encode()) as chan:
            code, _ = await refused(create_certificate(chan, workload_csr("default", "reviews")))
            assert code == grpc.StatusCode.UNAVAILABLE

    run(tmp_path, scenario)


def test_clients_verify_the_serving_certificate(tmp_path: Path) -> None:
    async def scenario(env: Env) -> None:
        csr, token = workload_csr("default", "reviews"), env.token()
        for name in ("istiod.istio-system.svc", "localhost"):
            async with env.tls(server_name=name) as chan:
                assert await create_certificate(chan, csr, token)
        async with channel(env.server.port, env.ca.root_pem, server_name="") as chan:
            assert await create_certificate(chan, csr, token)  # IP SAN 127.0.0.1
        other_root = CertificateAuthority.open(tmp_path / "other").root_pem
        async with channel(env.server.port, other_root) as chan:
            code, _ = await refused(create_certificate(chan, csr, token))
            assert code == grpc.StatusCode.UNAVAILABLE
        async with env.tls(server_name="evil.example.com") as chan:
            code, _ = await refused(create_certificate(chan, csr, token))
            assert code == grpc.StatusCode.UNAVAILABLE

    run(tmp_path, scenario)


def test_ads_over_tls_from_the_discovery_process(tmp_path: Path) -> None:
    """`meshpilot discovery` with a CA dir: an ADS client verifying the serving certificate
    against root-cert.pem gets the proxy's clusters on the TLS port."""
    settings = Settings(
        ports=Ports(xds_plaintext=0, monitoring=0, xds_tls=0, xds_mtls=0, webhook=0),
        ca_dir=str(tmp_path / "ca"),
        root_cert_out=str(tmp_path / "public" / "root-cert.pem"),
    )

    async def scenario() -> None:
        discovery = Discovery([REPO / "examples" / "bookinfo"], settings)
        await discovery.start()
        try:
            assert discovery.secure is not None
            root = (tmp_path / "public" / "root-cert.pem").read_bytes()
            token = TokenAuthority.open(tmp_path / "ca").issue("default", "reviews", "r-1")
            assert root == (tmp_path / "ca" / "root-cert.pem").read_bytes()
            async with channel(discovery.secure.port, root) as chan:
                response = await _first_cds(chan)
            names = {_cluster_name(r) for r in response.resources}
            assert "outbound|9080||reviews.default.svc.cluster.local" in names
            async with channel(discovery.secure.port, root) as chan:
                await create_certificate(chan, workload_csr("default", "reviews"), token)
            metrics = await _get_metrics(discovery.monitoring_port)
            assert "citadel_server_success_cert_issuance_count 1" in metrics
            assert "pilot_xds_pushes" in metrics
        finally:
            await discovery.stop(0)

    asyncio.run(asyncio.wait_for(scenario(), 30))


async def _first_cds(chan: grpc.aio.Channel) -> Any:
    stream = chan.stream_stream(
        "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
        request_serializer=discovery_pb2.DiscoveryRequest.SerializeToString,
        response_deserializer=discovery_pb2.DiscoveryResponse.FromString,
    )
    request = discovery_pb2.DiscoveryRequest(type_url=TypeUrl.CLUSTER)
    request.node.id = (
        "sidecar~10.10.0.10~productpage-v1-6b746f74dc-9stvs.default~default.svc.cluster.local"
    )

    async def requests() -> AsyncIterator[Any]:
        yield request
        await asyncio.sleep(30)

    call = stream(requests())
    response = await call.read()
    call.cancel()
    return response


async def _get_metrics(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    return data.decode()


def _cluster_name(resource: Any) -> str:
    cluster = cluster_pb2.Cluster()
    resource.Unpack(cluster)
    return str(cluster.name)
