"""The ingress gateway's certificate: a CA made for this run and a server certificate it
signs for the demo's host name (built with the CA's own certificate code, security/certs).

Only the CA certificate and the server certificate are written out as files (0644, for
clients' `--cacert`); the server key goes only into the TLS Secret the control plane serves
over SDS, which the caller writes 0600 (`write_private`). The CA key is never written: it
lives in memory for the signing and is dropped.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path

from meshpilot.security import files
from meshpilot.security.certs import (
    Signer,
    ca_certificate,
    cert_pem,
    key_pem,
    new_key,
    serving_certificate,
)

__all__ = ["GatewayCertificate", "make_gateway_certificate", "write_private", "write_public"]

VALIDITY = datetime.timedelta(days=1)
ORGANIZATION = "meshpilot demo"


@dataclass(frozen=True, slots=True)
class GatewayCertificate:
    host: str
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes  # PKCS#8, unencrypted: only ever written 0600

    def secret_data(self) -> dict[str, str]:
        """`data` of a kubernetes.io/tls Secret."""
        return {
            "tls.crt": base64.b64encode(self.cert_pem).decode(),
            "tls.key": base64.b64encode(self.key_pem).decode(),
        }


def make_gateway_certificate(host: str) -> GatewayCertificate:
    ca_key = new_key()
    ca = ca_certificate(
        ca_key, common_name="meshpilot demo CA", organization=ORGANIZATION, lifetime=VALIDITY
    )
    key = new_key()
    cert = serving_certificate(Signer(ca, ca_key), key, [host], lifetime=VALIDITY)
    return GatewayCertificate(host, cert_pem(ca), cert_pem(cert), key_pem(key))


def write_private(path: Path, data: str | bytes) -> None:
    """Created 0600 before any byte is written; replaces an existing file."""
    files.write_private(path, data.encode() if isinstance(data, str) else data)


def write_public(path: Path, data: str | bytes) -> None:
    files.write_public(path, data.encode() if isinstance(data, str) else data)
