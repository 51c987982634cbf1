"""The front Envoy: TLS and HTTP/2 of the secure port (15012) and the CA port (15011).

    proxy ──TLS, HTTP/2──► Envoy (host:15012) ─┬─ CA calls: HTTP/1.1, Unix socket ──► ca_http.py
                           front_envoy.py       └─ ADS: HTTP/2, Unix socket ──► grpc.aio (xDS)
    caller ──TLS, HTTP/2──► Envoy (host:15011, opt-in) ── CA calls only ──► ca_http.py

Why: a unary call through grpc.aio costs 310-400 us of control plane CPU before any signing
(three threads per call: EventEngine poller, completion-queue poller, then the asyncio loop
woken through a socket), about as much as the signing itself. Envoy does TLS and HTTP/2 in
C++ for ~60-150 us a call and hands the call to a plain asyncio protocol that parses it in
place (~50-90 us): bench/ca_sign.py measures it, Envoy's CPU counted as the control
plane's. A token is verified by our code (CsrService.issue); a client certificate, if the
caller presents one, by Envoy against the mesh roots, which passes it on as
x-forwarded-client-cert (ca_http.py). ADS streams go on to the same grpc.aio handler as
the plaintext port's, on a socket of their own. Both sockets are 0600 in a private 0700
directory, where the bootstrap (it holds the serving key) lives only until Envoy has read
it; the directory goes when the front stops. A discovery killed with -9 cannot remove it:
the next discovery to start removes the directories whose owner is gone (meshpilot/owner.py),
never a running one's.

Envoy is restarted with backoff if it dies and killed if discovery dies
(front_envoy_process.py); when it keeps dying past that budget, discovery's task supervisor
reports it (/ready 503, /debug/tasks) and starts it again (`keep_running`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from google.protobuf import json_format

from meshpilot.agent.envoy_process import EnvoyLaunch
from meshpilot.envoy.binary import envoy_binary
from meshpilot.owner import owned_tempdir, remove_dead_tempdirs
from meshpilot.security.ca import ServingCredentials
from meshpilot.security.ca_http import CaHttpProtocol, ServerIo
from meshpilot.security.csr_service import CsrService
from meshpilot.security.front_envoy import FrontPort, front_bootstrap
from meshpilot.security.front_envoy_process import FrontEnvoy
from meshpilot.xds.grpc_service import remove_stale_socket

__all__ = ["FrontPort", "FrontServer"]

log = logging.getLogger(__name__)

_READY_TIMEOUT_S = 20.0
DIRECTORY_PREFIX = "meshpilot-front-"


class FrontServer:
    def __init__(self, csr: CsrService) -> None:
        self._csr = csr
        self._dir: Path | None = None
        self._http: asyncio.AbstractServer | None = None
        self._envoy: FrontEnvoy | None = None
        self._envoy_task: asyncio.Task[None] | None = None
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self._watched = False  # keep_running() reports Envoy's failure (a supervisor's task)

    @property
    def envoy_pid(self) -> int | None:
        return self._envoy.pid if self._envoy else None

    @property
    def directory(self) -> Path:
        """The private directory (0700) of the front's sockets, made on first use."""
        if self._dir is None:
            remove_dead_tempdirs(DIRECTORY_PREFIX)  # what a killed discovery left
            self._dir = owned_tempdir(DIRECTORY_PREFIX)
        return self._dir

    def xds_socket(self) -> str:
        """Where grpc.aio must serve ADS in the clear for the front's xDS ports."""
        return str(self.directory / "xds.sock")

    async def start(
        self,
        ports: Sequence[FrontPort],
        credentials: ServingCredentials,
        xds_socket: str = "",
        client_roots_pem: bytes = b"",
    ) -> dict[str, int]:
        """Serve `ports` (port 0: a free one) once Envoy listens on all of them; returns the
        bound port of each by name. With `client_roots_pem`, a caller may prove itself by a
        certificate chaining to them. OSError if a port cannot be served (in use, Envoy
        missing or failing)."""
        loop = asyncio.get_running_loop()
        try:
            upstream = str(self.directory / "ca.sock")
            io = ServerIo()  # shared by Envoy's connections: one read buffer, answers batched
            self._http = await loop.create_unix_server(
                lambda: CaHttpProtocol(self._csr, io), upstream
            )
            Path(upstream).chmod(0o600)
            if xds_socket:
                Path(xds_socket).chmod(0o600)
            # Envoy would retry a taken port forever: bind-check each first.
            bound = [_bound(p) for p in ports]
            bootstrap = front_bootstrap(
                bound,
                credentials.chain_pem,
                credentials.key_pem,
                upstream,
                xds_socket,
                client_roots_pem,
            )
            launch = EnvoyLaunch(
                binary=envoy_binary(),
                config_path=self.directory / "envoy.json",
                work_dir=self.directory,
                concurrency=1,
                # Not its SIGTERM notice at every stop ("main"); real warnings stay.
                log_level="warning,main:error,misc:error",
            )
            config = json_format.MessageToJson(bootstrap).encode()
            addresses = [p.path or (p.host, p.port) for p in bound]
            self._envoy = FrontEnvoy(launch, config, addresses)
            self._envoy_task = asyncio.create_task(self._envoy.run())
            self._envoy_task.add_done_callback(self._report_exit)
            self.ports = {p.name: p.port for p in bound}
            await self._wait_listening()
        except BaseException:
            await self.stop()
            raise
        return self.ports

    async def keep_running(self) -> None:
        """For a task supervisor: wait on the front Envoy; returns once it is stopped,
        raises (OSError) when it kept exiting past its restart budget. Called again after
        that, it starts Envoy anew. Cancelling this leaves Envoy running (stop() ends it)."""
        if self._envoy is None:
            return
        self._watched = True
        if self._envoy_task is None or self._envoy_task.done():
            self._envoy_task = asyncio.create_task(self._envoy.run())
        await asyncio.shield(self._envoy_task)

    def _report_exit(self, task: asyncio.Task[None]) -> None:
        if not self._watched and not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s", exc)

    async def _wait_listening(self) -> None:
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
        where = ", ".join(f"{name} :{port}" for name, port in self.ports.items())
        raise OSError(f"cannot serve {where} (Envoy{failure or ' not ready'})")

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


def _bound(port: FrontPort) -> FrontPort:
    """The port with the number Envoy will bind (checked free now); a Unix socket's stale
    file is removed first."""
    if port.path:
        remove_stale_socket(port.path)
        return port
    return FrontPort(port.name, port.host, _check_free(port.host, port.port), port.xds)


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
