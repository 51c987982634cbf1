"""X.509 building blocks: keys, the self-signed root, CA and leaf certificates, PEM.

Certificates follow the profile that strict verifiers (cryptography's, Go's) expect of a
private PKI: critical BasicConstraints, KeyUsage, subject and authority key identifiers.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID

from meshpilot.security.leaf_template import LeafTemplate, uri_san_der

__all__ = [
    "ORGANIZATION",
    "LeafIssuer",
    "PrivateKey",
    "Signer",
    "ca_certificate",
    "cert_pem",
    "key_pem",
    "load_key",
    "new_key",
    "pem_certificates",
    "serving_certificate",
    "utcnow",
]

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
ORGANIZATION = "cluster.local"  # Istio's self-signed root says O=<trust domain>
# Issued certificates start a little in the past: clocks of callers may lag behind ours.
BACKDATE = dt.timedelta(minutes=1)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_key() -> ec.EllipticCurvePrivateKey:
    """ECDSA P-256, Istio's default for workload and CA keys here."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_key(data: bytes) -> PrivateKey:
    """A PEM private key, EC or RSA; ValueError otherwise (never echoing the key)."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError("not an unencrypted PEM private key") from exc
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise ValueError(f"unsupported key type {type(key).__name__}: use ECDSA or RSA")
    return key


def pem_certificates(data: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle, in order; ValueError if there is none."""
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ValueError("no PEM certificate found")
    return x509.load_pem_x509_certificates(data)


@dataclass(frozen=True, slots=True)
class Signer:
    """A CA certificate and its key: what issues the next certificate."""

    cert: x509.Certificate
    key: PrivateKey


def _name(common_name: str, organization: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _base(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    issuer: Signer | None,
    lifetime: dt.timedelta,
) -> x509.CertificateBuilder:
    now = utcnow()
    not_after = now + lifetime
    if issuer is not None:
        not_after = min(not_after, issuer.cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False,
        )
    return builder


def _sign(builder: x509.CertificateBuilder, key: PrivateKey) -> x509.Certificate:
    return builder.sign(key, hashes.SHA256())


def ca_certificate(
    key: PrivateKey,
    issuer: Signer | None = None,
    common_name: str = "Root CA",
    organization: str = ORGANIZATION,
    lifetime: dt.timedelta = dt.timedelta(days=3650),
) -> x509.Certificate:
    """A CA certificate: self-signed root when `issuer` is None, else an intermediate."""
    builder = _base(_name(common_name, organization), key.public_key(), issuer, lifetime)
    builder = builder.add_extension(
        x509.BasicConstraints(ca=True, path_length=None), critical=True
    ).add_extension(
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
    return _sign(builder, issuer.key if issuer else key)


_EMPTY_NAME = x509.Name([])
_LEAF_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=True,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=False,
    crl_sign=False,
    encipher_only=False,
    decipher_only=False,
)
_LEAF_CONSTRAINTS = x509.BasicConstraints(ca=False, path_length=None)
_LEAF_EKU = x509.ExtendedKeyUsage(
    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
)


class LeafIssuer:
    """Issues end-entity certificates for both TLS sides (workloads are client and server).
    What every leaf shares (issuer, usages, authority key id, a workload's empty subject)
    is built once: signing is on the CA's hot path when a whole mesh starts. Workload
    leaves come from a DER template proven identical to the builder's output before its
    first use (leaf_template.py); certificates with a subject, or any issuer key the
    template cannot reproduce, go through cryptography's builder."""

    def __init__(self, issuer: Signer) -> None:
        self.issuer = issuer
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key())
        extensions = [
            x509.Extension(ExtensionOID.BASIC_CONSTRAINTS, True, _LEAF_CONSTRAINTS),
            x509.Extension(ExtensionOID.KEY_USAGE, True, _LEAF_USAGE),
            x509.Extension(ExtensionOID.EXTENDED_KEY_USAGE, False, _LEAF_EKU),
            x509.Extension(ExtensionOID.AUTHORITY_KEY_IDENTIFIER, False, aki),
        ]
        template = x509.CertificateBuilder().issuer_name(issuer.cert.subject)
        for ext in extensions:
            template = template.add_extension(ext.value, critical=ext.critical)
        self._template = template
        self._workload_template = self._template.subject_name(_EMPTY_NAME)
        self._not_after_cap = issuer.cert.not_valid_after_utc
        self._extensions = extensions

    @functools.cached_property
    def _der(self) -> LeafTemplate | None:
        # On first use: issuers of serving certificates alone never pay for the proof.
        cert, key = self.issuer.cert, self.issuer.key
        return LeafTemplate.build(cert, key, self._extensions, self._build)

    def prepare(self) -> bool:
        """Prove the workload template now (not on the first CSR); True if it is used."""
        return self._der is not None

    def issue(
        self,
        public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
        sans: Sequence[x509.GeneralName] | x509.SubjectAlternativeName,
        lifetime: dt.timedelta,
        subject: x509.Name | None = None,
    ) -> x509.Certificate:
        return x509.load_der_x509_certificate(self.issue_der(public_key, sans, lifetime, subject))

    def issue_der(
        self,
        public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
        sans: Sequence[x509.GeneralName] | x509.SubjectAlternativeName,
        lifetime: dt.timedelta,
        subject: x509.Name | None = None,
    ) -> bytes:
        """The certificate, DER (what the CA's hot path encodes to PEM)."""
        now = utcnow().replace(microsecond=0)  # X.509 times have whole seconds
        if not isinstance(sans, x509.SubjectAlternativeName):
            sans = x509.SubjectAlternativeName(list(sans))
        serial = x509.random_serial_number()
        not_before = now - BACKDATE
        not_after = min(now + lifetime, self._not_after_cap)
        if subject is None and self._der is not None:
            return self._der.sign(public_key, sans, serial, not_before, not_after)
        cert = self._build(public_key, sans, serial, not_before, not_after, subject)
        return cert.public_bytes(serialization.Encoding.DER)

    def issue_workload_der(self, public_key_der: bytes, uri: str, lifetime: dt.timedelta) -> bytes:
        """A workload leaf (empty subject, the one URI SAN `uri`) for the key whose
        SubjectPublicKeyInfo is `public_key_der`, DER: the CA's hot path, from the template
        with no key or extension objects built; the builder if there is no template."""
        if self._der is None:
            public_key = serialization.load_der_public_key(public_key_der)
            assert isinstance(public_key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey))
            san = x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)])
            return self.issue_der(public_key, san, lifetime)
        now = utcnow().replace(microsecond=0)  # X.509 times have whole seconds
        not_after = min(now + lifetime, self._not_after_cap)
        serial = x509.random_serial_number()
        return self._der.sign_der(
            public_key_der, uri_san_der(uri), serial, now - BACKDATE, not_after
        )

    def _build(
        self,
        public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
        sans: x509.SubjectAlternativeName,
        serial: int,
        not_before: dt.datetime,
        not_after: dt.datetime,
        subject: x509.Name | None = None,
    ) -> x509.Certificate:
        builder = self._template.subject_name(subject) if subject else self._workload_template
        builder = (
            builder.public_key(public_key)
            .serial_number(serial)
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            # RFC 5280: with an empty subject, the SAN extension must be critical.
            .add_extension(sans, critical=not subject)
        )
        return _sign(builder, self.issuer.key)


def serving_certificate(
    issuer: Signer,
    key: PrivateKey,
    dns_names: Sequence[str],
    ips: Sequence[str] = (),
    lifetime: dt.timedelta = dt.timedelta(days=90),
) -> x509.Certificate:
    """The control plane's TLS certificate (istiod's: DNS istiod.istio-system.svc)."""
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])])
    return LeafIssuer(issuer).issue(key.public_key(), sans, lifetime, subject)
