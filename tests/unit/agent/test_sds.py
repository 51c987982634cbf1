"""The agent's SDS server with a real gRPC client over its Unix socket: SotW and Delta."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from cryptography.hazmat.primitives import serialization
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.secret.v3 import sds_pb2_grpc
from google.rpc import status_pb2

from meshpilot.agent.certs.store import SecretStore
from meshpilot.agent.certs.workload import WorkloadCert, accept_chain, new_key
from meshpilot.agent.sds import SECRET_TYPE, SdsServer
from tests.unit.agent.ca_server import LocalCa

IDENTITY = "spiffe://cluster.local/ns/default/sa/sleep"
TIMEOUT = 5


def issue(ca: LocalCa) -> WorkloadCert:
    key = new_key()
    leaf = ca.issue(key.key.public_key(), identity=IDENTITY, ttl=600)
    chain = [leaf.public_bytes(serialization.Encoding.PEM).decode()]
    return accept_chain(chain, key, IDENTITY, ca.root_pem, "root")


class Stream:
    """One client stream: put requests, take responses (with a timeout). One read is in
    flight at a time; a read that timed out in `nothing_within` is kept for `recv`."""

    def __init__(self, call: Any, queue: asyncio.Queue[Any]) -> None:
        self.call = call
        self.queue = queue
        self._read: asyncio.Task[Any] | None = None

    async def send(self, request: Any) -> None:
        await self.queue.put(request)

    def _reading(self) -> asyncio.Task[Any]:
        if self._read is None:
            self._read = asyncio.ensure_future(self.call.read())
        return self._read

    async def recv(self) -> Any:
        result = await asyncio.wait_for(asyncio.shield(self._reading()), TIMEOUT)
        self._read = None
        return result

    async def nothing_within(self, seconds: float = 0.3) -> bool:
        done, _ = await asyncio.wait({self._reading()}, timeout=seconds)
        return not done


def open_stream(method: Callable[..., Any]) -> Stream:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def requests() -> AsyncIterator[Any]:
        while True:
            yield await queue.get()

    return Stream(method(requests()), queue)


def run(
    tmp_path: Path, scenario: Callable[[LocalCa, SecretStore, Any, SdsServer], Awaitable[None]]
) -> None:
    async def main() -> None:
        ca = LocalCa.create()
        store = SecretStore()
        server = SdsServer(store, tmp_path / "uds" / "socket")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"unix:{server.socket_path}") as channel:
                await scenario(ca, store, sds_pb2_grpc.SecretDiscoveryServiceStub(channel), server)
        finally:
            await server.stop()

    asyncio.run(main())


def secrets(response: Any) -> dict[str, secret_pb2.Secret]:
    out = {}
    for packed in response.resources:
        resource = packed.resource if hasattr(packed, "resource") else packed
        secret = secret_pb2.Secret()
        assert resource.Unpack(secret)
        out[secret.name] = secret
    return out


def serial_of(secret: secret_pb2.Secret) -> int:
    from cryptography import x509

    pem = secret.tls_certificate.certificate_chain.inline_bytes
    return x509.load_pem_x509_certificates(pem)[0].serial_number


def test_socket_is_private(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        assert stat.S_IMODE(server.socket_path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(server.socket_path.stat().st_mode) == 0o600

    run(tmp_path, scenario)


def test_sotw_serves_default_and_rootca_and_pushes_a_rotation(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        first = issue(ca)
        store.update(first)
        stream = open_stream(stub.StreamSecrets)
        await stream.send(discovery_pb2.DiscoveryRequest(resource_names=["default", "ROOTCA"],
                                                         type_url=SECRET_TYPE))  # fmt: skip
        response = await stream.recv()
        got = secrets(response)
        assert response.type_url == SECRET_TYPE and set(got) == {"default", "ROOTCA"}
        tls = got["default"].tls_certificate
        assert tls.certificate_chain.inline_bytes == first.chain_pem
        assert tls.private_key.inline_bytes == first.key.pem()
        assert got["ROOTCA"].validation_context.trusted_ca.inline_bytes == ca.root_pem
        # ACK: nothing more until the certificate changes.
        await stream.send(discovery_pb2.DiscoveryRequest(
            version_info=response.version_info, response_nonce=response.nonce,
            resource_names=["default", "ROOTCA"], type_url=SECRET_TYPE))  # fmt: skip
        assert await stream.nothing_within()
        second = issue(ca)
        store.update(second)
        pushed = await stream.recv()
        assert pushed.nonce != response.nonce and pushed.version_info != response.version_info
        assert serial_of(secrets(pushed)["default"]) == int(second.serial, 16)
        stream.call.cancel()

    run(tmp_path, scenario)


def test_sotw_waits_for_the_first_certificate(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        stream = open_stream(stub.StreamSecrets)
        await stream.send(discovery_pb2.DiscoveryRequest(resource_names=["default"]))
        assert await stream.nothing_within()  # no certificate yet: no empty answer
        store.update(issue(ca))
        assert set(secrets(await stream.recv())) == {"default"}
        stream.call.cancel()

    run(tmp_path, scenario)


def test_sotw_nack_is_counted_and_not_answered(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        store.update(issue(ca))
        stream = open_stream(stub.StreamSecrets)
        await stream.send(discovery_pb2.DiscoveryRequest(resource_names=["default"]))
        response = await stream.recv()
        await stream.send(discovery_pb2.DiscoveryRequest(
            response_nonce=response.nonce, resource_names=["default"],
            error_detail=status_pb2.Status(code=13, message="bad certificate")))  # fmt: skip
        assert await stream.nothing_within()
        assert server.stats.nacks == 1 and server.stats.nack_messages == ["bad certificate"]
        stream.call.cancel()

    run(tmp_path, scenario)


def test_delta_sends_only_what_changed(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        store.update(issue(ca))
        stream = open_stream(stub.DeltaSecrets)
        await stream.send(discovery_pb2.DeltaDiscoveryRequest(
            type_url=SECRET_TYPE, resource_names_subscribe=["default", "ROOTCA"]))  # fmt: skip
        first = await stream.recv()
        assert {r.name for r in first.resources} == {"default", "ROOTCA"}
        versions = {r.name: r.version for r in first.resources}
        await stream.send(discovery_pb2.DeltaDiscoveryRequest(response_nonce=first.nonce))
        assert await stream.nothing_within()
        rotated = issue(ca)
        store.update(rotated)
        pushed = await stream.recv()
        # The root did not change: only `default` is resent.
        assert [r.name for r in pushed.resources] == ["default"]
        assert pushed.resources[0].version == rotated.serial != versions["default"]
        stream.call.cancel()

        # A reconnecting Envoy that already holds these versions gets nothing new.
        again = open_stream(stub.DeltaSecrets)
        await again.send(discovery_pb2.DeltaDiscoveryRequest(
            resource_names_subscribe=["default", "ROOTCA"],
            initial_resource_versions={"default": rotated.serial,
                                       "ROOTCA": versions["ROOTCA"]}))  # fmt: skip
        assert await again.nothing_within()
        await again.send(discovery_pb2.DeltaDiscoveryRequest(resource_names_unsubscribe=["ROOTCA"]))
        store.update(issue(ca))
        assert [r.name for r in (await again.recv()).resources] == ["default"]
        again.call.cancel()

    run(tmp_path, scenario)


def test_file_secrets_and_unknown_names(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa, store: SecretStore, stub: Any, server: SdsServer) -> None:
        bundle = ca.write_root(tmp_path / "ca.pem")
        name = f"file-root:{bundle}"
        response = await stub.FetchSecrets(
            discovery_pb2.DiscoveryRequest(resource_names=[name, "kubernetes://nope"])
        )
        got = secrets(response)
        assert list(got) == [name]
        assert got[name].validation_context.trusted_ca.inline_bytes == ca.root_pem

    run(tmp_path, scenario)
