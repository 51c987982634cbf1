"""The mesh CA: signs workload CSRs into X.509 SVIDs, and the control plane's TLS certificate.

    CertificateAuthority.open(ca_dir, cacerts=None)   own root (created once) or plugged-in CA
    ca.sign(csr_pem, identity, ttl) -> Issued         leaf, then intermediates, then the root

A workload certificate has no subject and one URI SAN, the SPIFFE id proven by the caller;
KeyUsage digitalSignature + keyEncipherment and EKU serverAuth + clientAuth, because a
sidecar is both the client and the server of mTLS. Lifetime: 24 h by default (Istio's
DEFAULT_WORKLOAD_CERT_TTL), capped at 90 days (MAX_WORKLOAD_CERT_TTL) and at the CA's own
expiry.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from meshpilot.security.ca_material import ROOT_CERT, CaMaterial, load_cacerts, load_or_create
from meshpilot.security.certs import LeafIssuer, cert_pem, key_pem, new_key, serving_certificate
from meshpilot.security.files import ensure_private_dir, write_public
from meshpilot.security.identity import SpiffeId
from meshpilot.security.leaf_template import pem_from_der

__all__ = [
    "DEFAULT_TTL",
    "MAX_TTL",
    "CertificateAuthority",
    "CsrError",
    "CsrIdentityError",
    "Issued",
    "ServingCredentials",
]

log = logging.getLogger(__name__)

DEFAULT_TTL = dt.timedelta(hours=24)
MAX_TTL = dt.timedelta(days=90)
_CURVES = (ec.SECP256R1, ec.SECP384R1)
_MIN_RSA_BITS = 2048


class CsrError(ValueError):
    """The CSR cannot be signed: not PEM, bad signature, weak or unsupported key."""


class CsrIdentityError(CsrError):
    """The CSR asks for an identity other than the one the caller proved."""


@dataclass(frozen=True, slots=True)
class Issued:
    leaf_der: bytes
    chain_pem: tuple[str, ...]  # leaf first, root last: Istio's cert_chain order

    @property
    def leaf(self) -> x509.Certificate:
        """Parsed on demand: the CA's hot path answers with the PEM chain alone."""
        return x509.load_der_x509_certificate(self.leaf_der)


@dataclass(frozen=True, slots=True)
class ServingCredentials:
    key_pem: bytes
    chain_pem: bytes  # serving certificate, then the CA chain
    certificate: x509.Certificate


class CertificateAuthority:
    def __init__(
        self,
        material: CaMaterial,
        trust_domain: str = "cluster.local",
        default_ttl: dt.timedelta = DEFAULT_TTL,
        max_ttl: dt.timedelta = MAX_TTL,
    ) -> None:
        self.material = material
        self.trust_domain = trust_domain
        self.default_ttl = default_ttl
        self.max_ttl = max_ttl
        self._chain_tail = tuple(cert_pem(c).decode() for c in material.chain[1:])
        self._signing_pem = cert_pem(material.signer.cert).decode()
        self._leaves = LeafIssuer(material.signer)
        self._leaves.prepare()

    @classmethod
    def open(
        cls, ca_dir: Path, cacerts: Path | None = None, trust_domain: str = "cluster.local"
    ) -> CertificateAuthority:
        """The CA of `meshpilot discovery`: plugged-in when `cacerts` is given, else our own
        root, generated on first start in `ca_dir` and reloaded afterwards. The public root
        is (re)written to `<ca_dir>/root-cert.pem` either way."""
        if cacerts is not None:
            ensure_private_dir(ca_dir)
            material = load_cacerts(cacerts)
            write_public(ca_dir / ROOT_CERT, material.roots_pem)
        else:
            material = load_or_create(ca_dir, trust_domain)
        return cls(material, trust_domain)

    @property
    def root_pem(self) -> bytes:
        """Every trusted root, PEM: what proxies verify peers and the control plane with."""
        return self.material.roots_pem

    def sign(
        self, csr_pem: str | bytes, identity: SpiffeId, ttl: dt.timedelta | None = None
    ) -> Issued:
        """Sign the CSR for `identity` (already proven by the caller); CsrError if the CSR is
        unusable, CsrIdentityError if its SANs ask for anything else."""
        csr = _load_csr(csr_pem)
        _check_requested_identity(csr, identity)
        lifetime = self._lifetime(ttl)
        # The SAN is encoded from the proven identity, never copied from the CSR.
        der = self._leaves.issue_workload_der(_public_key_der(csr), identity.uri, lifetime)
        chain = (pem_from_der(der), self._signing_pem, *self._chain_tail)
        return Issued(der, chain)

    def serving_credentials(
        self, dns_names: Sequence[str], ips: Sequence[str] = ()
    ) -> ServingCredentials:
        """A fresh key and certificate for the control plane's TLS port (kept in memory)."""
        key = new_key()
        cert = serving_certificate(self.material.signer, key, dns_names, ips)
        chain = cert_pem(cert) + b"".join(cert_pem(c) for c in self.material.chain[:-1])
        return ServingCredentials(key_pem(key), chain, cert)

    def _lifetime(self, ttl: dt.timedelta | None) -> dt.timedelta:
        if ttl is None or ttl == dt.timedelta(0):
            return self.default_ttl
        if ttl < dt.timedelta(0):
            raise CsrError(f"requested lifetime {ttl.total_seconds():.0f}s is negative")
        return min(ttl, self.max_ttl)


def _load_csr(csr_pem: str | bytes) -> x509.CertificateSigningRequest:
    data = csr_pem.encode() if isinstance(csr_pem, str) else csr_pem
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in data:
        raise CsrError("the CSR is not a PEM certificate request (BEGIN CERTIFICATE REQUEST)")
    try:
        csr = x509.load_pem_x509_csr(data)
    except ValueError as exc:
        raise CsrError(f"the CSR cannot be parsed: {exc}") from None
    try:
        valid = csr.is_signature_valid
    except Exception as exc:  # unsupported algorithms surface as various errors
        raise CsrError(f"the CSR signature cannot be checked: {exc}") from None
    if not valid:
        raise CsrError("the CSR signature is invalid (it was not signed by its own key)")
    return csr


def _check_requested_identity(csr: x509.CertificateSigningRequest, identity: SpiffeId) -> None:
    """Nothing if the CSR asks for exactly `identity` or for no names (the certificate
    carries the proven identity); CsrIdentityError for anything else."""
    try:
        requested = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return
    except ValueError as exc:
        raise CsrError(f"the CSR's extensions cannot be parsed: {exc}") from None
    names = list(requested)
    if (
        len(names) == 1
        and type(names[0]) is x509.UniformResourceIdentifier
        and names[0].value == identity.uri
    ):
        return
    asked = [_describe(name) for name in names]
    raise CsrIdentityError(
        f"the CSR asks for {', '.join(asked) or 'no names'} but the caller proved "
        f"only {identity.uri}"
    )


def _describe(name: x509.GeneralName) -> str:
    kinds = {
        x509.UniformResourceIdentifier: "URI",
        x509.DNSName: "DNS",
        x509.IPAddress: "IP",
        x509.RFC822Name: "email",
    }
    return f"{kinds.get(type(name), type(name).__name__)}:{name.value}"


# SubjectPublicKeyInfo forms taken as they come: (DER up to the key's value, its size,
# what its first byte must be, the DER after it). ECDSA: id-ecPublicKey with the named
# curve and an uncompressed point (0x04, x, y); RSA: a modulus of exactly 2048, 3072 or
# 4096 bits (top bit set, so its one leading zero byte is the minimal encoding) and the
# exponent 65537. Other forms are loaded and re-encoded by `cryptography`.
_KNOWN_SPKI = (
    (bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200"), 65, 4, 4, b""),
    (bytes.fromhex("3076301006072a8648ce3d020106052b81040022036200"), 97, 4, 4, b""),
    *(
        (bytes.fromhex(head), bits // 8, 0x80, 0xFF, bytes.fromhex("0203010001"))
        for head, bits in (
            ("30820122300d06092a864886f70d01010105000382010f003082010a0282010100", 2048),
            ("308201a2300d06092a864886f70d01010105000382018f003082018a0282018100", 3072),
            ("30820222300d06092a864886f70d01010105000382020f003082020a0282020100", 4096),
        )
    ),
)


def _public_key_der(csr: x509.CertificateSigningRequest) -> bytes:
    """The CSR's SubjectPublicKeyInfo, DER, once the key passes `_check_key`. A key in a
    form of _KNOWN_SPKI (P-256, P-384, RSA 2048-4096) is taken as is from the CSR, whose
    signature, checked with that very key (an EC point on its curve), proves it usable:
    no key object is made for it. Any other form is loaded, checked and re-encoded."""
    info = csr.tbs_certrequest_bytes  # SEQUENCE {version, subject, spki, [0] attributes}
    start = _after_header(info, 0)
    start = _tlv_end(info, _tlv_end(info, start))  # past version and subject
    spki = info[start : _tlv_end(info, start)]
    for prefix, size, low, high, suffix in _KNOWN_SPKI:
        if (
            len(spki) == len(prefix) + size + len(suffix)
            and spki.startswith(prefix)
            and low <= spki[len(prefix)] <= high
            and spki.endswith(suffix)
        ):
            return spki
    public_key = csr.public_key()
    _check_key(public_key)
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _after_header(der: bytes, pos: int) -> int:
    """Where the content of the DER value at `pos` starts (tag and length skipped)."""
    size = der[pos + 1]
    return pos + 2 + (size & 0x7F if size & 0x80 else 0)


def _tlv_end(der: bytes, pos: int) -> int:
    """Where the DER value at `pos` ends (valid DER: cryptography parsed it)."""
    size, start = der[pos + 1], _after_header(der, pos)
    if size & 0x80:
        size = int.from_bytes(der[pos + 2 : start], "big")
    return start + size


def _check_key(public_key: object) -> None:
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        if not isinstance(public_key.curve, _CURVES):
            raise CsrError(f"the CSR's EC curve {public_key.curve.name} is not P-256 or P-384")
    elif isinstance(public_key, rsa.RSAPublicKey):
        if public_key.key_size < _MIN_RSA_BITS:
            raise CsrError(f"the CSR's RSA key has {public_key.key_size} bits; at least 2048")
    else:
        raise CsrError(f"the CSR's key type {type(public_key).__name__} is not ECDSA or RSA")
