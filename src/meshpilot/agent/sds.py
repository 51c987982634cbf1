"""The agent's SDS server: workload certificates to its Envoy over a Unix socket.

Envoy's static cluster `sds-grpc` dials `./var/run/secrets/workload-spiffe-uds/socket` in its
working directory (Istio's path); the agent serves there, the socket's directory being 0700
and owned by Envoy's user, so that nothing else on the host reaches the workload's key but
root and that user: each pod's proxy needs a user of its own (`--proxy-uid`).

Both protocols Envoy may speak on that cluster are served:
- SotW `StreamSecrets`: a response carries every requested secret that can be served; a
  request repeating the names with the last nonce is an ACK; new names are answered at once.
- Delta `DeltaSecrets`: only secrets whose version the client lacks are sent, honouring
  `initial_resource_versions` after a reconnect.
When the certificate rotates, every stream holding a changed secret gets it pushed, and Envoy
swaps it in without closing connections. A name that cannot be served yet (no certificate
before the CA's first answer) is answered as soon as it can be. NACKs are logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.secret.v3 import sds_pb2_grpc
from google.protobuf import any_pb2

from meshpilot.agent.certs.store import SecretStore, VersionedSecret
from meshpilot.errors import MeshpilotError

__all__ = ["SECRET_TYPE", "SdsServer", "SdsStats"]

log = logging.getLogger(__name__)

SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
_CHANGED = object()  # inbox marker: the store has a new certificate
_END = object()  # inbox marker: the client closed its side


@dataclass(slots=True)
class SdsStats:
    """Counters for tests and debugging: responses sent, NACKs received, open streams."""

    responses: int = 0
    nacks: int = 0
    streams: int = 0
    nack_messages: list[str] = field(default_factory=list)


class SdsServer:
    def __init__(
        self, store: SecretStore, socket_path: Path, owner: tuple[int, int] | None = None
    ) -> None:
        self.store = store
        self.socket_path = socket_path
        self.owner = owner  # Envoy's (uid, gid): it must be able to connect
        self.stats = SdsStats()
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        directory = self.socket_path.parent
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a stale socket from an earlier run
        server = grpc.aio.server()
        sds_pb2_grpc.add_SecretDiscoveryServiceServicer_to_server(
            _Servicer(self.store, self.stats), server
        )
        try:  # gRPC raises RuntimeError, or returns 0, when it cannot bind
            bound = server.add_insecure_port(f"unix:{self.socket_path}")
        except RuntimeError:
            bound = 0
        if not bound:
            # A Unix socket path holds at most 107 bytes: a deep --work-dir exceeds it.
            raise MeshpilotError(
                f"cannot serve SDS on unix:{self.socket_path} "
                f"({len(str(self.socket_path).encode())} bytes; at most 107 fit)"
            )
        await server.start()
        self._server = server
        if self.owner is not None:
            os.chown(directory, *self.owner)
            os.chown(self.socket_path, *self.owner)
        self.socket_path.chmod(0o600)
        log.info("SDS serving on %s", self.socket_path)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()


class _Servicer(sds_pb2_grpc.SecretDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, store: SecretStore, stats: SdsStats) -> None:
        self.store = store
        self.stats = stats
        self._nonce = 0

    def _next_nonce(self) -> str:
        self._nonce += 1
        return str(self._nonce)

    def _available(self, names: frozenset[str]) -> dict[str, VersionedSecret]:
        found = {name: self.store.secret(name) for name in sorted(names)}
        return {name: secret for name, secret in found.items() if secret is not None}

    def _nack(self, kind: str, names: Any, message: str) -> None:
        self.stats.nacks += 1
        self.stats.nack_messages.append(message)
        log.warning("Envoy rejected %s secrets %s: %s", kind, sorted(names), message)

    async def StreamSecrets(
        self, request_iterator: AsyncIterator[discovery_pb2.DiscoveryRequest], context: Any
    ) -> AsyncIterator[discovery_pb2.DiscoveryResponse]:
        names: frozenset[str] = frozenset()
        sent: dict[str, str] = {}  # name -> version in the last response
        async with _Inbox(request_iterator, self.store, self.stats) as inbox:
            while (item := await inbox.next()) is not _END:
                if isinstance(item, discovery_pb2.DiscoveryRequest):
                    if item.HasField("error_detail"):
                        self._nack("SotW", item.resource_names, item.error_detail.message)
                        continue
                    names = frozenset(item.resource_names)
                available = self._available(names)
                versions = {name: s.version for name, s in available.items()}
                if not available or versions == sent:
                    continue  # an ACK, nothing servable yet, or nothing new
                sent = versions
                self.stats.responses += 1
                yield discovery_pb2.DiscoveryResponse(
                    version_info=_version(versions),
                    type_url=SECRET_TYPE,
                    nonce=self._next_nonce(),
                    resources=[_pack(s) for s in available.values()],
                )

    async def DeltaSecrets(
        self, request_iterator: AsyncIterator[discovery_pb2.DeltaDiscoveryRequest], context: Any
    ) -> AsyncIterator[discovery_pb2.DeltaDiscoveryResponse]:
        subscribed: set[str] = set()
        client: dict[str, str] = {}  # name -> version the client holds
        first = True
        async with _Inbox(request_iterator, self.store, self.stats) as inbox:
            while (item := await inbox.next()) is not _END:
                if isinstance(item, discovery_pb2.DeltaDiscoveryRequest):
                    if first:
                        client.update(item.initial_resource_versions)
                        first = False
                    subscribed |= set(item.resource_names_subscribe)
                    for name in item.resource_names_unsubscribe:
                        subscribed.discard(name)
                        client.pop(name, None)
                    if item.HasField("error_detail"):
                        self._nack("Delta", subscribed, item.error_detail.message)
                        continue
                fresh = {
                    name: s
                    for name, s in self._available(frozenset(subscribed)).items()
                    if client.get(name) != s.version
                }
                if not fresh:
                    continue
                client.update({name: s.version for name, s in fresh.items()})
                self.stats.responses += 1
                yield discovery_pb2.DeltaDiscoveryResponse(
                    system_version_info=str(self.store.generation),
                    type_url=SECRET_TYPE,
                    nonce=self._next_nonce(),
                    resources=[
                        discovery_pb2.Resource(name=name, version=s.version, resource=_pack(s))
                        for name, s in fresh.items()
                    ],
                )

    async def FetchSecrets(
        self, request: discovery_pb2.DiscoveryRequest, context: Any
    ) -> discovery_pb2.DiscoveryResponse:
        available = self._available(frozenset(request.resource_names))
        return discovery_pb2.DiscoveryResponse(
            version_info=_version({n: s.version for n, s in available.items()}),
            type_url=SECRET_TYPE,
            resources=[_pack(s) for s in available.values()],
        )


class _Inbox:
    """One queue of what a stream reacts to: the client's requests and certificate changes."""

    def __init__(self, requests: AsyncIterator[Any], store: SecretStore, stats: SdsStats):
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._requests = requests
        self._store = store
        self._stats = stats
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> _Inbox:
        self._stats.streams += 1
        self._tasks = [
            asyncio.create_task(self._read()),
            asyncio.create_task(self._watch()),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stats.streams -= 1
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def next(self) -> object:
        return await self._queue.get()

    async def _read(self) -> None:
        try:
            async for request in self._requests:
                self._queue.put_nowait(request)
        finally:
            self._queue.put_nowait(_END)

    async def _watch(self) -> None:
        while True:
            await self._store.changed().wait()
            self._queue.put_nowait(_CHANGED)


def _pack(secret: VersionedSecret) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(secret.secret)
    return packed


def _version(versions: dict[str, str]) -> str:
    text = ",".join(f"{name}={version}" for name, version in sorted(versions.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
