"""Test material made with `cryptography`: workload keys and CSRs, plugged-in CA layouts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.verification import PolicyBuilder, Store

from meshpilot.security.certs import PrivateKey, Signer, ca_certificate, cert_pem, key_pem, new_key

TD = "cluster.local"


def csr_pem(key: PrivateKey, *names: x509.GeneralName) -> str:
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([]))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=True)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def uri(value: str) -> x509.UniformResourceIdentifier:
    return x509.UniformResourceIdentifier(value)


def workload_csr(namespace: str, service_account: str, key: PrivateKey | None = None) -> str:
    return csr_pem(key or new_key(), uri(f"spiffe://{TD}/ns/{namespace}/sa/{service_account}"))


def rsa_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def p521_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP521R1())


def load_chain(chain: Sequence[str]) -> list[x509.Certificate]:
    return [x509.load_pem_x509_certificate(pem.encode()) for pem in chain]


def verify_client_chain(
    chain: list[x509.Certificate], root: x509.Certificate
) -> list[x509.GeneralName]:
    """cryptography's own X.509 path validation, as a TLS server checks a client."""
    verifier = PolicyBuilder().store(Store([root])).build_client_verifier()
    result = verifier.verify(chain[0], chain[1:-1])
    return list(result.subjects or [])


def write_cacerts(
    directory: Path, lifetime: dt.timedelta = dt.timedelta(days=365)
) -> tuple[Signer, Signer]:
    """An Istio-style plugged-in CA: offline root -> intermediate, in the cacerts layout.
    Returns (root, intermediate)."""
    root_key = new_key()
    root = Signer(
        ca_certificate(root_key, common_name="Offline Root", organization="corp"), root_key
    )
    inter_key = new_key()
    inter_cert = ca_certificate(
        inter_key, issuer=root, common_name="Cluster 1 CA", organization="corp", lifetime=lifetime
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca-cert.pem").write_bytes(cert_pem(inter_cert))
    (directory / "ca-key.pem").write_bytes(key_pem(inter_key))
    (directory / "root-cert.pem").write_bytes(cert_pem(root.cert))
    (directory / "cert-chain.pem").write_bytes(cert_pem(inter_cert) + cert_pem(root.cert))
    return root, Signer(inter_cert, inter_key)
