"""What the agent's SDS serves: the current workload certificate, and file secrets.

`SecretStore` holds the latest `WorkloadCert` and wakes SDS streams when it changes; `secret()`
answers a resource name as Istio's agent does:

| name                       | Secret                                                  |
|----------------------------|---------------------------------------------------------|
| `default`                  | tls_certificate: the chain (leaf first) and its key     |
| `ROOTCA`                   | validation_context.trusted_ca: the trust bundle         |
| `file-root:<path>`         | validation_context.trusted_ca: a CA bundle from a file  |
| `file-cert:<cert>~<key>`   | tls_certificate from two files (DestinationRule MUTUAL) |

Every served secret has a version: the leaf's serial, or a digest of the bytes, so that Delta
SDS resends only what changed.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path

from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2

from meshpilot.agent.certs.workload import WorkloadCert
from meshpilot.xds.names import SDS_DEFAULT, SDS_ROOTCA

__all__ = ["FILE_CERT", "FILE_ROOT", "SYSTEM_ROOTS", "SecretStore", "VersionedSecret"]

FILE_ROOT = "file-root:"
FILE_CERT = "file-cert:"
SYSTEM_ROOTS = "/etc/ssl/certs/ca-certificates.crt"  # `file-root:system` (Debian's bundle)


@dataclass(frozen=True, slots=True)
class VersionedSecret:
    secret: secret_pb2.Secret
    version: str


class SecretStore:
    def __init__(self) -> None:
        self._cert: WorkloadCert | None = None
        self._generation = 0
        self._changed = asyncio.Event()

    @property
    def cert(self) -> WorkloadCert | None:
        return self._cert

    @property
    def generation(self) -> int:
        """Incremented by every `update()`: part of SotW `version_info`."""
        return self._generation

    def update(self, cert: WorkloadCert) -> None:
        """Serve `cert` from now on and wake every stream waiting in `changed()`."""
        self._cert = cert
        self._generation += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def changed(self) -> asyncio.Event:
        """An event set at the next `update()` (take it before reading the secrets)."""
        return self._changed

    def secret(self, name: str) -> VersionedSecret | None:
        """The secret `name`, or None while it cannot be served (no certificate yet, an
        unreadable file, a name the agent does not know)."""
        if name == SDS_DEFAULT:
            return _workload(self._cert) if self._cert else None
        if name == SDS_ROOTCA:
            return _trust_bundle(name, self._cert.roots_pem) if self._cert else None
        if name.startswith(FILE_ROOT):
            path = name.removeprefix(FILE_ROOT)
            data = _read(SYSTEM_ROOTS if path == "system" else path)
            return _trust_bundle(name, data) if data else None
        if name.startswith(FILE_CERT):
            cert_path, sep, key_path = name.removeprefix(FILE_CERT).partition("~")
            cert = _read(cert_path)
            key = _read(key_path) if sep else None
            return _certificate(name, cert, key, _digest(cert, key)) if cert and key else None
        return None


def _workload(cert: WorkloadCert) -> VersionedSecret:
    return _certificate(SDS_DEFAULT, cert.chain_pem, cert.key.pem(), cert.serial)


def _certificate(name: str, chain: bytes, key: bytes, version: str) -> VersionedSecret:
    secret = secret_pb2.Secret(
        name=name,
        tls_certificate=common_pb2.TlsCertificate(
            certificate_chain={"inline_bytes": chain}, private_key={"inline_bytes": key}
        ),
    )
    return VersionedSecret(secret, version)


def _trust_bundle(name: str, roots: bytes) -> VersionedSecret:
    secret = secret_pb2.Secret(
        name=name,
        validation_context=common_pb2.CertificateValidationContext(
            trusted_ca={"inline_bytes": roots}
        ),
    )
    return VersionedSecret(secret, _digest(roots))


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()[:16]


def _read(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None
