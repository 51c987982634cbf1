"""The control plane's TLS port (istiod's 15012): ADS and the CA behind the mesh root.

    15012  TLS, serving certificate istiod.istio-system.svc (+ localhost, 127.0.0.1) signed by
           the mesh CA; callers prove who they are with a bearer token. With `front` (the
           CLI's default) TLS and HTTP/2 are an Envoy's (front_server.py): CA calls go to
           ca_http.py, ADS streams to grpc.aio on a private socket; else grpc.aio's.
    15013  the same services, client certificate required and verified against the root:
           renewal by the current certificate (grpc.aio)
    15011  the CA alone, TLS + token as on 15012, through the same front Envoy; a meshpilot
           port, not an Istio one (opt-in)
    --secure-uds  15012 on a Unix socket (the demo's pods), through the front Envoy too

Why 15013: Istio serves both on 15012 with "verify a client certificate if given", which
the front Envoy does, but gRPC Python offers only "never ask" or "require" for client
certificates: without the front, renewal by certificate needs a port of its own. 15013 is
not an Istio port; Istio's agent renews with its token on 15012, which works here too.

ADS is the plaintext port's handler (xds/grpc_service.py): the same streams, wire bytes and
send budget, behind TLS. Here a stream may prove who it is (security/ads_identity.py: a
token, or a client certificate: the front Envoy's, or 15013's), which SDS needs: only a
proven proxy gets `kubernetes://` secrets, those of its own namespace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import grpc

from meshpilot.security.ads_identity import AdsAuthenticator
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.csr_service import CsrService
from meshpilot.security.files import write_public
from meshpilot.security.front_server import FrontPort, FrontServer
from meshpilot.security.tokens import TokenAuthority
from meshpilot.settings import Settings
from meshpilot.xds.grpc_service import (
    SERVER_OPTIONS,
    AdsStreams,
    ads_handler,
    bind,
    remove_stale_socket,
)

__all__ = ["ISTIOD_DNS_NAMES", "AdsStreams", "SecureServer", "start_secure_server"]

log = logging.getLogger(__name__)

# istiod's serving certificate names; proxies verify `istiod.istio-system.svc`.
ISTIOD_DNS_NAMES = ("istiod.istio-system.svc", "istiod.istio-system", "istiod", "localhost")


class SecureServer:
    def __init__(
        self,
        ca: CertificateAuthority,
        tokens: TokenAuthority,
        ads: AdsStreams | None = None,
        ips: Sequence[str] = ("127.0.0.1",),
    ) -> None:
        self.ca = ca
        self.csr = CsrService(ca, tokens)
        self._ads = ads
        self._ips = tuple(ips)
        self._grpc: grpc.aio.Server | None = None
        self._inner: grpc.aio.Server | None = None  # ADS behind the front Envoy
        self._front: FrontServer | None = None
        self.port = 0
        self.mtls_port = 0
        self.ca_port = 0

    async def start(
        self,
        host: str,
        port: int,
        mtls_port: int | None = None,
        uds: str = "",
        ca_port: int | None = None,
        front: bool = False,
    ) -> int:
        """Serve on host:port (TLS) and, unless None, host:mtls_port (client certificate
        required) and host:ca_port (the CA alone, TLS), and on the Unix socket `uds` if
        given (TLS, as host:port); returns the TLS port. Port 0: any free port. `front`:
        host:port and the Unix socket through the front Envoy (which asks for a client
        certificate: a proxy's Envoy proves itself by its workload certificate)."""
        try:
            await self._start(host, port, mtls_port, uds, ca_port, front)
        except BaseException:
            await self.stop(0)
            raise
        log.info(
            "secure xDS and CA on %s:%d (TLS%s)%s%s",
            host,
            self.port,
            ", through Envoy" if front else "",
            f", :{self.mtls_port} (client certificate required)" if self.mtls_port else "",
            f", CA alone on :{self.ca_port} (TLS)" if self.ca_port else "",
        )
        return self.port

    async def _start(
        self,
        host: str,
        port: int,
        mtls_port: int | None,
        uds: str,
        ca_port: int | None,
        front: bool,
    ) -> None:
        ips = [ip for ip in (*self._ips, host) if ip not in ("0.0.0.0", "::")]
        creds = self.ca.serving_credentials(ISTIOD_DNS_NAMES, sorted(set(ips)))
        pair = [(creds.key_pem, creds.chain_pem)]
        server = grpc.aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers([self.csr.handler()])
        authenticate = AdsAuthenticator(self.csr.tokens, self.ca.trust_domain)
        if self._ads is not None:
            server.add_generic_rpc_handlers([ads_handler(self._ads, False, authenticate)])
        if not front:
            self.port = _bind(server, host, port, grpc.ssl_server_credentials(pair))
        if uds and not front:
            remove_stale_socket(uds)
            _bind_address(server, f"unix:{uds}", grpc.ssl_server_credentials(pair))
        if mtls_port is not None:
            mutual = grpc.ssl_server_credentials(
                pair, root_certificates=self.ca.root_pem, require_client_auth=True
            )
            self.mtls_port = _bind(server, host, mtls_port, mutual)
        await server.start()
        self._grpc = server
        ports = [FrontPort("secure", host, port, self._ads is not None)] if front else []
        if uds and front:  # (a client certificate is asked for here, as on 15012)
            ports.append(FrontPort("secure-uds", "", 0, self._ads is not None, path=uds))
        if ca_port is not None:
            ports.append(FrontPort("ca", host, ca_port, xds=False))
        if not ports:
            return
        self._front = FrontServer(self.csr)
        xds_socket = ""
        if front and self._ads is not None:
            xds_socket = self._front.xds_socket()
            inner = grpc.aio.server(options=SERVER_OPTIONS)
            inner.add_generic_rpc_handlers([ads_handler(self._ads, True, authenticate)])
            bind(inner, f"unix:{xds_socket}")  # in the clear: a 0600 socket, Envoy's alone
            await inner.start()
            self._inner = inner
        bound = await self._front.start(ports, creds, xds_socket, self.ca.root_pem)
        self.port = bound.get("secure", self.port)
        self.ca_port = bound.get("ca", 0)

    async def stop(self, grace: float = 1.0) -> None:
        if self._front is not None:
            await self._front.stop()
            self._front = None
        for server in (self._inner, self._grpc):
            if server is not None:
                await server.stop(grace)
        self._inner = self._grpc = None

    async def keep_front_running(self) -> None:
        """The front Envoy's watch for discovery's task supervisor (FrontServer.keep_running);
        returns at once without a front."""
        if self._front is not None:
            await self._front.keep_running()

    @property
    def front_envoy_pid(self) -> int | None:
        """The front Envoy (its CPU is the control plane's too)."""
        return self._front.envoy_pid if self._front else None


def _bind(server: grpc.aio.Server, host: str, port: int, creds: grpc.ServerCredentials) -> int:
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return _bind_address(server, address, creds)


def _bind_address(server: grpc.aio.Server, address: str, creds: grpc.ServerCredentials) -> int:
    try:
        bound = server.add_secure_port(address, creds)
    except RuntimeError as exc:  # grpc's way of saying the bind failed
        raise OSError(f"cannot listen on {address} (address in use?)") from exc
    if not bound:
        raise OSError(f"cannot listen on {address}")
    return int(bound)


async def start_secure_server(settings: Settings, ads: AdsStreams | None) -> SecureServer:
    """Open the CA of `settings.ca_dir` (or the plugged-in `settings.cacerts`), publish the
    root, and serve the TLS ports; CaError (a MeshpilotError) if the CA cannot be used."""
    ca_dir = Path(settings.ca_dir).expanduser()
    cacerts = Path(settings.cacerts).expanduser() if settings.cacerts else None
    ca = await asyncio.to_thread(CertificateAuthority.open, ca_dir, cacerts, settings.trust_domain)
    tokens = await asyncio.to_thread(TokenAuthority.open, ca_dir)
    if settings.root_cert_out:
        out = Path(settings.root_cert_out).expanduser()
        out.parent.mkdir(parents=True, exist_ok=True)
        write_public(out, ca.root_pem)
    server = SecureServer(ca, tokens, ads)
    await server.start(
        settings.listen_address,
        settings.ports.xds_tls,
        settings.ports.xds_mtls,
        uds=settings.secure_uds,
        ca_port=settings.ports.ca,
        front=settings.secure_front,
    )
    log.info(
        "CA: root certificate for proxies: %s", settings.root_cert_out or ca_dir / "root-cert.pem"
    )
    return server
