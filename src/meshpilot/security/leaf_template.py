"""Workload certificates assembled from DER pieces built once, then signed.

`cryptography`'s CertificateBuilder converts every extension from Python objects, encodes,
signs and re-parses on each call: ~40% of a workload leaf's CPU here (the CA's hot path
when a mesh cold-starts), more than checking the CSR's signature.
A workload leaf differs from the next only in serial, validity, public key and SAN, so the
TBSCertificate is the concatenation of fixed bytes (version, algorithm, issuer, empty
subject, BasicConstraints, KeyUsage, EKU, AuthorityKeyIdentifier) and those four values.

Safety: `LeafTemplate.build()` returns a template only after proving, on a throwaway key,
that its TBSCertificate is byte-identical to the builder's for the same inputs (and that
the result parses back and verifies); otherwise None, and callers use the builder.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

__all__ = ["LeafTemplate", "der_length", "pem_from_der"]

PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
Builder = Callable[
    [PublicKey, x509.SubjectAlternativeName, int, dt.datetime, dt.datetime], x509.Certificate
]

# AlgorithmIdentifier DER: ecdsa-with-SHA256 (no parameters), sha256WithRSAEncryption (NULL).
_ECDSA_SHA256 = bytes.fromhex("300a06082a8648ce3d040302")
_RSA_SHA256 = bytes.fromhex("300d06092a864886f70d01010b0500")
_VERSION_3 = bytes.fromhex("a003020102")
_EMPTY_NAME = b"\x30\x00"
_OID_SAN = bytes.fromhex("0603551d11")
_CRITICAL = b"\x01\x01\xff"
_UTC_TIME_END = 2050  # RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime after


def der_length(size: int) -> bytes:
    if size < 0x80:
        return bytes((size,))
    raw = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(raw),)) + raw


def _tlv(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + der_length(len(body)) + body


def _integer(value: int) -> bytes:
    # Positive: a leading zero byte when the high bit is set (bit_length + 8 rounds up).
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _time(when: dt.datetime) -> bytes:
    # Formatted by hand: strftime costs ~10 us per call, a tenth of a leaf's budget.
    hms = f"{when.month:02d}{when.day:02d}{when.hour:02d}{when.minute:02d}{when.second:02d}Z"
    if when.year < _UTC_TIME_END:
        return _tlv(0x17, f"{when.year % 100:02d}{hms}".encode())
    return _tlv(0x18, f"{when.year:04d}{hms}".encode())


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(arc) for arc in dotted.split("."))
    body = bytearray((40 * first + second,))
    for arc in rest:
        chunk = [arc & 0x7F]
        while arc > 0x7F:
            arc >>= 7
            chunk.append(0x80 | (arc & 0x7F))
        body += bytes(reversed(chunk))
    return _tlv(0x06, bytes(body))


def _extension(oid_der: bytes, critical: bool, value_der: bytes) -> bytes:
    return _tlv(0x30, oid_der + (_CRITICAL if critical else b"") + _tlv(0x04, value_der))


def pem_from_der(der: bytes) -> str:
    """The PEM text `cryptography` writes (64-column base64, trailing newline)."""
    text = base64.b64encode(der).decode()
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


class LeafTemplate:
    """Signs workload leaves (empty subject, critical SAN) for one issuer key."""

    def __init__(self, issuer_key: PrivateKey, head: bytes, tail_extensions: bytes) -> None:
        self._key = issuer_key
        self._head = head  # after the serial: algorithm, issuer
        self._extensions = tail_extensions  # every extension before the SAN
        if isinstance(issuer_key, ec.EllipticCurvePrivateKey):
            self._algorithm = _ECDSA_SHA256
            self._sign: Callable[[bytes], bytes] = lambda tbs: issuer_key.sign(
                tbs, ec.ECDSA(hashes.SHA256())
            )
        else:
            self._algorithm = _RSA_SHA256
            self._sign = lambda tbs: issuer_key.sign(tbs, padding.PKCS1v15(), hashes.SHA256())

    @classmethod
    def build(
        cls,
        issuer_cert: x509.Certificate,
        issuer_key: PrivateKey,
        extensions: Sequence[x509.Extension[x509.ExtensionType]],
        builder: Builder,
    ) -> LeafTemplate | None:
        """The template for leaves with these extensions (in the builder's order, SAN last
        and excluded), or None if it does not reproduce `builder`'s TBSCertificate."""
        algorithm = _ECDSA_SHA256 if isinstance(issuer_key, ec.EllipticCurvePrivateKey) else None
        if isinstance(issuer_key, rsa.RSAPrivateKey):
            algorithm = _RSA_SHA256
        if algorithm is None:
            return None
        head = algorithm + issuer_cert.subject.public_bytes()
        fixed = b"".join(
            _extension(_oid(e.oid.dotted_string), e.critical, e.value.public_bytes())
            for e in extensions
        )
        template = cls(issuer_key, head, fixed)
        return template if template._matches(builder) else None

    def tbs(
        self,
        public_key_der: bytes,
        san_der: bytes,
        serial: int,
        not_before: dt.datetime,
        not_after: dt.datetime,
    ) -> bytes:
        validity = _tlv(0x30, _time(not_before) + _time(not_after))
        san = _extension(_OID_SAN, True, san_der)
        extensions = _tlv(0xA3, _tlv(0x30, self._extensions + san))
        body = (
            _VERSION_3
            + _integer(serial)
            + self._head
            + validity
            + _EMPTY_NAME
            + public_key_der
            + extensions
        )
        return _tlv(0x30, body)

    def sign(
        self,
        public_key: PublicKey,
        sans: x509.SubjectAlternativeName,
        serial: int,
        not_before: dt.datetime,
        not_after: dt.datetime,
    ) -> bytes:
        """The signed certificate, DER."""
        spki = public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        tbs = self.tbs(spki, sans.public_bytes(), serial, not_before, not_after)
        signature = _tlv(0x03, b"\x00" + self._sign(tbs))
        return _tlv(0x30, tbs + self._algorithm + signature)

    def _matches(self, builder: Builder) -> bool:
        probe = ec.generate_private_key(ec.SECP256R1()).public_key()
        sans = x509.SubjectAlternativeName(
            [x509.UniformResourceIdentifier("spiffe://probe.local/ns/probe/sa/probe")]
        )
        start = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        serial = 0x80 << 150  # high bit set: exercises the INTEGER's leading zero
        expected = builder(probe, sans, serial, start, start + dt.timedelta(hours=24))
        ours = x509.load_der_x509_certificate(
            self.sign(probe, sans, serial, start, start + dt.timedelta(hours=24))
        )
        if ours.tbs_certificate_bytes != expected.tbs_certificate_bytes:
            return False
        try:
            ours.verify_directly_issued_by(_issuer_of(expected, self._key))
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True


def _issuer_of(leaf: x509.Certificate, key: PrivateKey) -> x509.Certificate:
    """A stand-in issuer certificate (the leaf's issuer name, the issuer's key) to verify
    a signature with `verify_directly_issued_by`."""
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(leaf.issuer)
        .issuer_name(leaf.issuer)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
