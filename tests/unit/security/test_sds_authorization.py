"""Who gets a gateway's `credentialName` secret over ADS: only a proxy whose stream proved
its identity (the workload certificate, or a token), and only its own namespace's Secrets.
A real discovery server, the real TLS ports (front Envoy and grpc.aio), real gRPC clients
claiming the ingress gateway's node id."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import quote

import grpc
import pytest
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.certs import key_pem, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.secure_server import SecureServer
from meshpilot.security.tokens import TokenAuthority
from meshpilot.settings import Settings
from meshpilot.store import FileStore
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.server import DiscoveryServer
from tests.unit.security.grpc_client import ISTIOD, channel
from tests.unit.security.pki import TD, workload_csr

pytestmark = pytest.mark.envoy

GATEWAY_SA = "istio-ingressgateway-service-account"
NODE = "router~10.0.0.50~istio-ingressgateway-7d4f.istio-system~istio-system.svc.cluster.local"
OWN = "kubernetes://ingress-cert"
OTHER = "kubernetes://other-ns/other-cert"
OWN_KEY = b"-----BEGIN PRIVATE KEY-----\ningress gateway key\n"
OTHER_KEY = b"-----BEGIN PRIVATE KEY-----\nother namespace key\n"


def _secret(namespace: str, name: str, key: bytes) -> str:
    crt = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n" + name.encode()).decode()
    return f"""---
apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {namespace}}}
type: kubernetes.io/tls
data: {{tls.crt: {crt}, tls.key: {base64.b64encode(key).decode()}}}
"""


class Env:
    """The discovery server (plaintext port) and its TLS ports, as `meshpilot discovery`
    serves them."""

    def __init__(self, tmp: Path) -> None:
        (tmp / "secrets.yaml").write_text(
            _secret("istio-system", "ingress-cert", OWN_KEY)
            + _secret("other-ns", "other-cert", OTHER_KEY)
        )
        store = FileStore([tmp / "secrets.yaml"])
        store.load()
        self.ads = DiscoveryServer(store, Settings())
        self.ca = CertificateAuthority.open(tmp / "ca")
        self.tokens = TokenAuthority.open(tmp / "ca")
        self.secure = SecureServer(self.ca, self.tokens, self.ads)
        self.plain_port = 0
        self.uds = str(tmp / "secure.sock")  # --secure-uds: how the demo's pods connect

    def uds_channel(self, client: tuple[bytes, bytes] | None = None) -> grpc.aio.Channel:
        key, chain = client or (None, None)
        creds = grpc.ssl_channel_credentials(self.ca.root_pem, key, chain)
        options = [("grpc.ssl_target_name_override", ISTIOD)]
        return grpc.aio.secure_channel(f"unix:{self.uds}", creds, options=options)

    def gateway_certificate(self, namespace: str = "istio-system") -> tuple[bytes, bytes]:
        """A workload certificate from the mesh CA, as the gateway's agent holds it."""
        key = new_key()
        identity = SpiffeId(TD, namespace, GATEWAY_SA)
        chain = self.ca.sign(workload_csr(namespace, GATEWAY_SA, key), identity).chain_pem
        return key_pem(key), "".join(chain[:-1]).encode()

    def gateway_token(self) -> str:
        return self.tokens.issue("istio-system", GATEWAY_SA, "istio-ingressgateway-7d4f")


def run(tmp: Path, scenario: Callable[[Env], Awaitable[None]], front: bool = True) -> None:
    async def main() -> None:
        env = Env(tmp)
        env.plain_port = await env.ads.start("127.0.0.1", 0)
        try:
            await env.secure.start("127.0.0.1", 0, mtls_port=0, uds=env.uds, front=front)
            await scenario(env)
        finally:
            await env.secure.stop(0)
            await env.ads.stop(0)

    asyncio.run(asyncio.wait_for(main(), 60))


async def secrets(
    chan: grpc.aio.Channel,
    token: str | None = None,
    names: Sequence[str] = (OWN, OTHER),
    headers: Sequence[tuple[str, str]] = (),
) -> dict[str, bytes]:
    """Ask for `names` as the ingress gateway over one ADS stream: the private key of each
    secret answered, by name."""
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(chan)
    request = discovery_pb2.DiscoveryRequest(type_url=TypeUrl.SECRET, resource_names=names)
    request.node.id = NODE
    request.node.metadata.update({"NAMESPACE": "istio-system", "SERVICE_ACCOUNT": GATEWAY_SA})
    metadata = [*headers, *([("authorization", f"Bearer {token}")] if token else [])]
    call = stub.StreamAggregatedResources(iter([request]), metadata=metadata or None)
    try:
        response = await asyncio.wait_for(call.read(), 10)
    finally:
        call.cancel()
    assert response.type_url == TypeUrl.SECRET  # answered: with what it may have
    out = {}
    for packed in response.resources:
        secret = secret_pb2.Secret.FromString(packed.value)
        out[secret.name] = secret.tls_certificate.private_key.inline_bytes
    return out


def test_no_secret_without_a_proven_identity_on_any_port(tmp_path: Path) -> None:
    """Plaintext 15010, and 15012 with neither certificate nor token: an SDS request that
    claims the gateway's node id is answered with no resources."""

    async def scenario(env: Env) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{env.plain_port}") as chan:
            assert await secrets(chan) == {}
            # A token means nothing on the plaintext port (anyone may read it off the wire).
            assert await secrets(chan, env.gateway_token()) == {}
        async with channel(env.secure.port, env.ca.root_pem) as chan:
            assert await secrets(chan) == {}
            assert await secrets(chan, "not.a-valid.token") == {}
            # The front Envoy drops a caller's own x-forwarded-client-cert.
            forged = f'Cert="{quote(env.gateway_certificate()[1].decode())}"'
            assert await secrets(chan, headers=[("x-forwarded-client-cert", forged)]) == {}
        async with env.uds_channel() as chan:
            assert await secrets(chan) == {}

    run(tmp_path, scenario)


def test_a_gateway_proven_by_its_certificate_gets_only_its_namespace(tmp_path: Path) -> None:
    """15012 through the front Envoy (the default), its Unix socket (the demo's pods), and
    15013: the workload certificate of istio-system's gateway gets istio-system's secret,
    never other-ns's."""

    async def scenario(env: Env) -> None:
        cert = env.gateway_certificate()
        for port in (env.secure.port, env.secure.mtls_port):
            async with channel(port, env.ca.root_pem, client=cert) as chan:
                assert await secrets(chan) == {OWN: OWN_KEY}
                assert await secrets(chan, names=[OTHER]) == {}
        async with env.uds_channel(cert) as chan:
            assert await secrets(chan) == {OWN: OWN_KEY}
            assert await secrets(chan, names=[OTHER]) == {}

    run(tmp_path, scenario)


def test_a_gateway_proven_by_its_token_gets_only_its_namespace(tmp_path: Path) -> None:
    """The token path (as the agent proves itself to the CA), on 15012 served by grpc.aio
    (`--no-front-envoy`): own namespace only."""

    async def scenario(env: Env) -> None:
        async with channel(env.secure.port, env.ca.root_pem) as chan:
            assert await secrets(chan, env.gateway_token()) == {OWN: OWN_KEY}
            assert await secrets(chan, env.gateway_token(), [OTHER]) == {}

    run(tmp_path, scenario, front=False)


def test_a_certificate_of_another_namespace_gets_nothing(tmp_path: Path) -> None:
    """A real workload of other-ns claiming istio-system's gateway: it proves an identity,
    but not the one it claims, so it is served as unverified (neither namespace's secret)."""

    async def scenario(env: Env) -> None:
        cert = env.gateway_certificate("other-ns")
        async with channel(env.secure.port, env.ca.root_pem, client=cert) as chan:
            assert await secrets(chan) == {}

    run(tmp_path, scenario)
