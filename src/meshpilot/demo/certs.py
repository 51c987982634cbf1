"""The ingress gateway's certificate: a CA made for this run and a server certificate it
signs for the demo's host name.

Only the CA certificate and the server certificate are written out as files (0644, for
clients' `--cacert`); the server key goes only into the TLS Secret the control plane serves
over SDS, which the caller writes 0600 (`write_private`). The CA key is never written: it
lives in memory for the signing and is dropped.
"""

from __future__ import annotations

import base64
import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["GatewayCertificate", "make_gateway_certificate", "write_private", "write_public"]

VALIDITY = datetime.timedelta(days=1)


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


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "meshpilot demo"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_gateway_certificate(host: str) -> GatewayCertificate:
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + VALIDITY
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("meshpilot demo CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return GatewayCertificate(host, ca.public_bytes(pem), cert.public_bytes(pem), key_pem)


def write_private(path: Path, data: str | bytes) -> None:
    """Create `path` 0600 before any byte is written (never world-readable, not even
    briefly); replaces an existing file."""
    raw = data.encode() if isinstance(data, str) else data
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(raw)


def write_public(path: Path, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    path.write_bytes(raw)
    path.chmod(0o644)
