"""Client of the control plane's CA (Istio's CA API on 15012), as istio-agent calls it.

TLS to the CA, verifying its serving certificate against the mesh root (`root-cert.pem`) and
the name `istiod.istio-system.svc`; the bootstrap token as `authorization: Bearer <token>`,
read from its file at every call because tokens rotate; on renewal the current workload
certificate is also presented as the TLS client certificate, so a CA can accept the renewal
on the strength of the identity it issued before.

Errors name the CA address and what went wrong, never the token or a key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import struct_pb2

from meshpilot.agent.certs.workload import WorkloadCert
from meshpilot.errors import MeshpilotError
from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
    IstioCertificateRequest,
    IstioCertificateResponse,
)

__all__ = ["CA_SERVER_NAME", "CaClient", "CaError", "CaSettings"]

CA_SERVER_NAME = "istiod.istio-system.svc"  # the name istiod's serving certificate carries
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class CaError(MeshpilotError):
    """The CA could not be reached or refused to sign."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaSettings:
    address: str  # host:port of the CA (the control plane's 15012); replicas: a,b
    root_cert: Path  # the mesh root: verifies the CA's serving certificate
    token_file: Path | None = None
    # Without a token file: a token made for each call (a control plane on this machine:
    # the agent signs it with the CA dir's token key, agent/local_ca.py); never stored.
    token_source: Callable[[], str] | None = None
    server_name: str = CA_SERVER_NAME
    cluster_id: str = "Kubernetes"
    timeout_s: float = 10.0


class CaClient:
    def __init__(self, settings: CaSettings) -> None:
        self.settings = settings

    def roots(self) -> bytes:
        """The root bundle, read now (a rotated root file is picked up at the next call)."""
        try:
            return self.settings.root_cert.read_bytes()
        except OSError as exc:
            raise CaError(f"cannot read root certificate {self.settings.root_cert}: "
                          f"{exc.strerror}") from None  # fmt: skip

    def _token(self) -> str | None:
        path = self.settings.token_file
        if path is None:
            return self._issued_token()
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise CaError(f"cannot read token file {path}: {exc.strerror}") from None
        if not token:
            raise CaError(f"token file {path} is empty")
        return token

    def _issued_token(self) -> str | None:
        source = self.settings.token_source
        if source is None:
            return None
        try:
            return source()
        except (OSError, ValueError) as exc:  # (the message names the key file, not a token)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CaError(f"cannot issue a token with the local CA's key: {reason}") from None

    async def sign(
        self, csr_pem: bytes, ttl_s: int, current: WorkloadCert | None = None
    ) -> list[str]:
        """CreateCertificate: the PEM chain, leaf first and root last."""
        metadata: list[tuple[str, str]] = [("clusterid", self.settings.cluster_id)]
        if (token := self._token()) is not None:
            metadata.append(("authorization", f"Bearer {token}"))
        elif current is None:
            raise CaError("no token file (--token-file) to prove the workload's identity")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self.roots(),
            private_key=current.key.pem() if current else None,
            certificate_chain=current.chain_pem if current else None,
        )
        request = IstioCertificateRequest(csr=csr_pem.decode(), validity_duration=ttl_s)
        request.metadata.CopyFrom(struct_pb2.Struct())
        options = [("grpc.ssl_target_name_override", self.settings.server_name)]
        # Control plane replicas (`a:15012,b:15012`) all sign with the mesh's one root:
        # one that cannot be reached is passed over for the next.
        addresses = [a.strip() for a in self.settings.address.split(",")]
        for index, address in enumerate(addresses):
            async with grpc.aio.secure_channel(address, credentials, options) as channel:
                call = channel.unary_unary(
                    CREATE_CERTIFICATE,
                    request_serializer=IstioCertificateRequest.SerializeToString,
                    response_deserializer=IstioCertificateResponse.FromString,
                )
                try:
                    response = await call(
                        request, metadata=metadata, timeout=self.settings.timeout_s
                    )
                except grpc.aio.AioRpcError as exc:
                    if exc.code() in _UNREACHABLE and index + 1 < len(addresses):
                        continue
                    raise CaError(f"CA {address}: {exc.code().name}: {exc.details()}") from None
            return list(response.cert_chain)
        raise CaError(f"CA {self.settings.address}: no address")
