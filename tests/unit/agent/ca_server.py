"""A real CA for the agent's tests: root key and certificate made with `cryptography`, the
Istio CA API served by grpc.aio over real TLS (serving certificate for
`istiod.istio-system.svc` and 127.0.0.1, signed by the root), bearer tokens mapped to
identities, renewal by a client certificate that the root signed.

It stands in for the control plane's CA only until `meshpilot.security.ca` serves the same
wire contract; what it checks is what Istio's CA checks: the CSR's signature and that its
SPIFFE id is the caller's.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from meshpilot.agent.certs.workload import spiffe_ids
from meshpilot.security.ca_api import (
    SERVICE_NAME,
    IstioCertificateRequest,
    IstioCertificateResponse,
)

UTC = datetime.UTC


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_root(name: str = "cluster.local") -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, name)])
    now = datetime.datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=10))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


@dataclass
class Seen:
    """One CreateCertificate call as the CA saw it (the token is kept only for asserts)."""

    token: str | None
    peer_identity: str | None
    identity: str | None
    ttl: int


@dataclass
class LocalCa:
    root_key: ec.EllipticCurvePrivateKey
    root: x509.Certificate
    tokens: dict[str, str] = field(default_factory=dict)  # token -> SPIFFE id it proves
    available: bool = True  # False: every call fails UNAVAILABLE
    max_ttl: int = 3600
    backdate: datetime.timedelta = datetime.timedelta(0)
    seen: list[Seen] = field(default_factory=list)
    # grpc's Python server either ignores client certificates or requires them (there is no
    # "request but optional"): True serves renewals by client certificate only.
    client_auth: bool = False
    port: int = 0
    _server: Any = None

    @classmethod
    def create(cls) -> LocalCa:
        key, root = make_root()
        return cls(key, root)

    @property
    def root_pem(self) -> bytes:
        return _pem(self.root)

    def write_root(self, path: Path) -> Path:
        path.write_bytes(self.root_pem)
        return path

    def issue(
        self, public_key: Any, *, identity: str | None = None, dns: str | None = None,
        ip: str | None = None, ttl: int = 3600, backdate: datetime.timedelta | None = None,
    ) -> x509.Certificate:  # fmt: skip
        now = datetime.datetime.now(UTC)
        backdate = self.backdate if backdate is None else backdate
        names: list[x509.GeneralName] = []
        if identity:
            names.append(x509.UniformResourceIdentifier(identity))
        if dns:
            names.append(x509.DNSName(dns))
        if ip:
            import ipaddress

            names.append(x509.IPAddress(ipaddress.ip_address(ip)))
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.root.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - backdate)
            .not_valid_after(now + datetime.timedelta(seconds=ttl))
            .add_extension(x509.SubjectAlternativeName(names), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self.root_key, hashes.SHA256())
        )

    async def _create(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not self.available:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "CA is down for this test")
        token = None
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and value.startswith("Bearer "):
                token = value.removeprefix("Bearer ")
        peer = None
        for cert_pem in context.auth_context().get("x509_pem_cert", []):
            ids = spiffe_ids(x509.load_pem_x509_certificate(cert_pem))
            peer = ids[0] if ids else None
        proven = self.tokens.get(token or "") or peer
        csr = x509.load_pem_x509_csr(request.csr.encode())
        wanted = spiffe_ids_of_csr(csr)
        self.seen.append(Seen(token, peer, wanted, request.validity_duration))
        if not csr.is_signature_valid:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "CSR signature is invalid")
        if proven is None or wanted != proven:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"caller may not ask for {wanted}"
            )
        ttl = min(request.validity_duration or self.max_ttl, self.max_ttl)
        leaf = self.issue(csr.public_key(), identity=wanted, ttl=ttl)
        return IstioCertificateResponse(cert_chain=[_pem(leaf).decode(), self.root_pem.decode()])

    async def start(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        # Backdated as real CAs do: a VM whose clock steps back must not see it "not yet valid".
        serving = self.issue(
            key.public_key(),
            dns="istiod.istio-system.svc",
            ip="127.0.0.1",
            backdate=datetime.timedelta(minutes=5),
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        credentials = grpc.ssl_server_credentials(
            [(key_pem, _pem(serving))], root_certificates=self.root_pem,
            require_client_auth=self.client_auth,
        )  # fmt: skip
        handler = grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                "CreateCertificate": grpc.unary_unary_rpc_method_handler(
                    self._create,
                    request_deserializer=IstioCertificateRequest.FromString,
                    response_serializer=IstioCertificateResponse.SerializeToString,
                )
            },
        )
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([handler])
        self.port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def spiffe_ids_of_csr(csr: x509.CertificateSigningRequest) -> str | None:
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    uris = san.get_values_for_type(x509.UniformResourceIdentifier)
    return uris[0] if uris else None


class CaThread:
    """A LocalCa on its own event loop in a thread, for tests whose agent is a subprocess."""

    def __init__(self, ca: LocalCa) -> None:
        self.ca = ca
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> CaThread:
        self._thread.start()
        self.call(self.ca.start)
        return self

    def call(self, make: Callable[[], Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(timeout=10)

    def stop(self) -> None:
        self.call(self.ca.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()
