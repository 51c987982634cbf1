"""The workload's key, its CSR and the certificate the CA returns (istio-agent's secret cache).

The key is ECDSA P-256, made in memory and never written to disk: it exists only in this
process and in the SDS `default` secret handed to Envoy over the private Unix socket. The CSR
has an empty subject and a critical URI SAN with the SPIFFE id, as Istio's agent sends it.
A CA answer is checked before it is served: the leaf carries our public key and our SPIFFE
id, each certificate is signed by the next, and the chain ends at a root we trust.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from meshpilot.errors import MeshpilotError

__all__ = [
    "CertificateError",
    "WorkloadCert",
    "WorkloadKey",
    "accept_chain",
    "build_csr",
    "load_roots",
    "new_key",
    "spiffe_id",
    "spiffe_ids",
]


class CertificateError(MeshpilotError):
    """A CA answer that cannot be served (wrong key, identity or chain), or a bad root file."""


def spiffe_id(trust_domain: str, namespace: str, service_account: str) -> str:
    """`spiffe://<trust-domain>/ns/<ns>/sa/<sa>`."""
    return f"spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}"


@dataclass(frozen=True, slots=True)
class WorkloadKey:
    """A private key; its repr never shows the key (it must not reach a log line)."""

    key: ec.EllipticCurvePrivateKey = field(repr=False)

    def pem(self) -> bytes:
        """PKCS#8 PEM, for Envoy (over SDS) and for TLS client credentials; memory only."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def new_key() -> WorkloadKey:
    return WorkloadKey(ec.generate_private_key(ec.SECP256R1()))


def build_csr(key: WorkloadKey, identity: str) -> bytes:
    """PEM CSR: empty subject, critical URI SAN `identity` (Istio's GenCSR for a workload)."""
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([]))
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]),
            critical=True,
        )
        .sign(key.key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True, slots=True)
class WorkloadCert:
    """A served identity: chain (leaf first), its key, and the trust bundle."""

    identity: str
    chain_pem: bytes
    key: WorkloadKey = field(repr=False)
    roots_pem: bytes
    serial: str  # lowercase hex, as istioctl prints it
    not_before: datetime
    not_after: datetime

    @property
    def lifetime_s(self) -> float:
        return (self.not_after - self.not_before).total_seconds()

    @property
    def roots_version(self) -> str:
        return hashlib.sha256(self.roots_pem).hexdigest()[:16]


def load_roots(pem: bytes, source: str) -> list[x509.Certificate]:
    """The certificates of a trust bundle; CertificateError naming `source` if there are none."""
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise CertificateError(f"{source}: no certificate in the file")
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise CertificateError(f"{source}: not a valid PEM certificate bundle") from None


def spiffe_ids(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(uri) for uri in san.get_values_for_type(x509.UniformResourceIdentifier)]


def accept_chain(
    chain: list[str], key: WorkloadKey, identity: str, roots_pem: bytes, roots_source: str
) -> WorkloadCert:
    """Check the CA's `cert_chain` (leaf, intermediates..., root) and make it servable."""
    if not chain:
        raise CertificateError("the CA answered with an empty certificate chain")
    certs: list[x509.Certificate] = []
    for number, pem in enumerate(chain):
        try:
            certs.extend(x509.load_pem_x509_certificates(pem.encode()))
        except ValueError:
            raise CertificateError(
                f"the CA's chain element {number} is not a PEM certificate"
            ) from None
    leaf = certs[0]
    if leaf.public_key() != key.key.public_key():
        raise CertificateError("the CA's certificate is not for this workload's key")
    if identity not in spiffe_ids(leaf):
        raise CertificateError(
            f"the CA's certificate names {spiffe_ids(leaf) or 'no SPIFFE id'}, not {identity}"
        )
    roots = load_roots(roots_pem, roots_source)
    _check_links(certs, roots)
    return WorkloadCert(
        identity=identity,
        chain_pem=b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs),
        key=key,
        roots_pem=roots_pem,
        serial=f"{leaf.serial_number:x}",
        not_before=leaf.not_valid_before_utc,
        not_after=leaf.not_valid_after_utc,
    )


def _check_links(certs: list[x509.Certificate], roots: list[x509.Certificate]) -> None:
    """Each certificate is signed by the next; the last is a trusted root or signed by one."""
    for child, parent in itertools.pairwise(certs):
        if not _signed_by(child, parent):
            raise CertificateError(
                f"the CA's chain is broken: {child.subject.rfc4514_string() or 'the leaf'} "
                f"is not signed by {parent.subject.rfc4514_string()}"
            )
    last = certs[-1]
    if last in roots or any(_signed_by(last, root) for root in roots):
        return
    raise CertificateError(
        "the CA's certificate chain does not lead to a root in the trusted root certificate"
    )


def _signed_by(child: x509.Certificate, parent: x509.Certificate) -> bool:
    try:
        child.verify_directly_issued_by(parent)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
