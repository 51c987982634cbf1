"""The CA port (15011): `IstioCertificateService` alone, TLS and HTTP/2 done by an Envoy.

    caller ──TLS, HTTP/2, gRPC──► Envoy (host:ca_port) ──HTTP/1.1, Unix socket──► ca_http.py
                                   ca_envoy.py bootstrap                      on discovery's loop

Why: a unary call through grpc.aio costs 310-400 us of control plane CPU before any signing
(three threads per call: EventEngine poller, completion-queue poller, then the asyncio loop
woken through a socket), about as much as the signing itself. Envoy does TLS and HTTP/2 in
C++ for ~110-190 us a call and hands the call to a plain asyncio protocol that parses it in
place (~50-90 us): bench/ca_sign.py measures both paths, Envoy's CPU counted as the
control plane's. The token is verified by our code exactly as on 15012 (CsrService.issue);
Envoy terminates TLS but proves nothing. The Unix socket is 0600 in a private 0700
directory, where the bootstrap (it holds the serving key) lives only until Envoy has read it;
the directory goes when the port stops.

Envoy is restarted with backoff if it dies and killed if discovery dies
(ca_envoy_process.py). 15012 keeps serving the CA for agents that use the discovery address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import tempfile
from pathlib import Path

from google.protobuf import json_format

from meshpilot.agent.envoy_process import EnvoyLaunch
from meshpilot.envoy.binary import envoy_binary
from meshpilot.security.ca import ServingCredentials
from meshpilot.security.ca_envoy import front_bootstrap
from meshpilot.security.ca_envoy_process import FrontEnvoy
from meshpilot.security.ca_http import CaHttpProtocol, ServerIo
from meshpilot.security.csr_service import CsrService

__all__ = ["CaServer"]

log = logging.getLogger(__name__)

_READY_TIMEOUT_S = 20.0


class CaServer:
    def __init__(self, csr: CsrService) -> None:
        self._csr = csr
        self._dir: Path | None = None
        self._http: asyncio.AbstractServer | None = None
        self._envoy: FrontEnvoy | None = None
        self._envoy_task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def envoy_pid(self) -> int | None:
        return self._envoy.pid if self._envoy else None

    async def start(self, host: str, port: int, credentials: ServingCredentials) -> int:
        """Serve the CA on host:port (0: a free port) once Envoy listens; returns the port.
        OSError if the port cannot be served (in use, Envoy missing or failing)."""
        loop = asyncio.get_running_loop()
        self._dir = Path(tempfile.mkdtemp(prefix="meshpilot-ca-port-"))  # 0700
        try:
            upstream = str(self._dir / "ca.sock")
            io = ServerIo()  # shared by Envoy's connections: one read buffer, answers batched
            self._http = await loop.create_unix_server(
                lambda: CaHttpProtocol(self._csr, io), upstream
            )
            Path(upstream).chmod(0o600)
            self.port = _check_free(host, port)  # Envoy would retry a taken port forever
            bootstrap = front_bootstrap(
                host, self.port, credentials.chain_pem, credentials.key_pem, upstream
            )
            launch = EnvoyLaunch(
                binary=envoy_binary(),
                config_path=self._dir / "envoy.json",
                work_dir=self._dir,
                concurrency=1,
            )
            config = json_format.MessageToJson(bootstrap).encode()
            self._envoy = FrontEnvoy(launch, config, host, self.port)
            self._envoy_task = asyncio.create_task(self._envoy.run())
            self._envoy_task.add_done_callback(_report_exit)
            await self._wait_listening(host)
        except BaseException:
            await self.stop()
            raise
        return self.port

    async def _wait_listening(self, host: str) -> None:
        assert self._envoy is not None and self._envoy_task is not None
        listening = asyncio.create_task(self._envoy.listening.wait())
        await asyncio.wait(
            (listening, self._envoy_task),
            timeout=_READY_TIMEOUT_S,
            return_when=asyncio.FIRST_COMPLETED,
        )
        listening.cancel()
        if self._envoy.listening.is_set():
            return
        failure = ""
        if self._envoy_task.done() and not self._envoy_task.cancelled():
            failure = f": {self._envoy_task.exception()}"
        raise OSError(
            f"cannot serve the CA port {host}:{self.port} (Envoy{failure or ' not ready'})"
        )

    async def stop(self) -> None:
        if self._envoy is not None:
            await self._envoy.stop()
            self._envoy = None
        if self._envoy_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._envoy_task
            self._envoy_task = None
        if self._http is not None:
            self._http.close()
            await self._http.wait_closed()
            self._http = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _report_exit(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("%s; the CA is still served on the secure port", exc)


def _check_free(host: str, port: int) -> int:
    """`port` if it can be bound now (0: a free one); OSError naming it otherwise."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Envoy binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot listen on {host}:{port} (address in use?)") from exc
        return int(sock.getsockname()[1])
