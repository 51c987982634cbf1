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

import binascii
import datetime as dt
from collections.abc import Callable, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

__all__ = ["LeafTemplate", "der_length", "pem_from_der", "uri_san_der"]

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
_OID_SAN_CRITICAL = _OID_SAN + _CRITICAL
_PROBE_URI = "spiffe://probe.local/ns/probe/sa/probe"
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
    # 48 bytes are one 64-column line; b2a_base64 ends each with the newline.
    lines = b"".join([binascii.b2a_base64(der[i : i + 48]) for i in range(0, len(der), 48)])
    return "-----BEGIN CERTIFICATE-----\n" + lines.decode() + "-----END CERTIFICATE-----\n"


def uri_san_der(uri: str) -> bytes:
    """The SubjectAlternativeName value holding one URI, DER: what the builder encodes for
    `SubjectAlternativeName([UniformResourceIdentifier(uri)])` (proven in `_matches`)."""
    name = uri.encode("ascii")
    general_name = b"\x86" + der_length(len(name)) + name  # [6] IMPLICIT IA5String
    return b"\x30" + der_length(len(general_name)) + general_name


class LeafTemplate:
    """Signs workload leaves (empty subject, critical SAN) for one issuer key."""

    def __init__(self, issuer_key: PrivateKey, head: bytes, tail_extensions: bytes) -> None:
        self._key = issuer_key
        self._head = head  # after the serial: algorithm, issuer
        self._extensions = tail_extensions  # every extension before the SAN
        self._validity = (dt.datetime.min, dt.datetime.min, b"")  # last one encoded
        if isinstance(issuer_key, ec.EllipticCurvePrivateKey):
            self._algorithm = _ECDSA_SHA256
            ecdsa = ec.ECDSA(hashes.SHA256())  # made once: ~1 us per certificate
            self._sign: Callable[[bytes], bytes] = lambda tbs: issuer_key.sign(tbs, ecdsa)
        else:
            self._algorithm = _RSA_SHA256
            pkcs1, sha256 = padding.PKCS1v15(), hashes.SHA256()
            self._sign = lambda tbs: issuer_key.sign(tbs, pkcs1, sha256)

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
        """The TBSCertificate: the fixed pieces around the four values of this leaf."""
        last_before, last_after, validity = self._validity
        if last_before != not_before or last_after != not_after:
            # A mesh's cold start asks many certificates per second: encoded once a second.
            validity = _tlv(0x30, _time(not_before) + _time(not_after))
            self._validity = (not_before, not_after, validity)
        san = _OID_SAN_CRITICAL + b"\x04" + der_length(len(san_der)) + san_der
        extensions = self._extensions + b"\x30" + der_length(len(san)) + san
        extensions = b"\x30" + der_length(len(extensions)) + extensions
        body = b"".join(
            (
                _VERSION_3,
                _integer(serial),
                self._head,
                validity,
                _EMPTY_NAME,
                public_key_der,
                b"\xa3",
                der_length(len(extensions)),
                extensions,
            )
        )
        return b"\x30" + der_length(len(body)) + body

    def sign_der(
        self,
        public_key_der: bytes,
        san_der: bytes,
        serial: int,
        not_before: dt.datetime,
        not_after: dt.datetime,
    ) -> bytes:
        """The signed certificate, DER, from the SubjectPublicKeyInfo and SAN value as DER."""
        tbs = self.tbs(public_key_der, san_der, serial, not_before, not_after)
        signature = self._sign(tbs)
        tail = b"\x03" + der_length(len(signature) + 1) + b"\x00" + signature
        body_size = len(tbs) + len(self._algorithm) + len(tail)
        return b"".join((b"\x30", der_length(body_size), tbs, self._algorithm, tail))

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
        return self.sign_der(spki, sans.public_bytes(), serial, not_before, not_after)

    def _matches(self, builder: Builder) -> bool:
        probe = ec.generate_private_key(ec.SECP256R1()).public_key()
        sans = x509.SubjectAlternativeName([x509.UniformResourceIdentifier(_PROBE_URI)])
        start = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        serial = 0x80 << 150  # high bit set: exercises the INTEGER's leading zero
        expected = builder(probe, sans, serial, start, start + dt.timedelta(hours=24))
        ours = x509.load_der_x509_certificate(
            self.sign(probe, sans, serial, start, start + dt.timedelta(hours=24))
        )
        if ours.tbs_certificate_bytes != expected.tbs_certificate_bytes:
            return False
        if uri_san_der(_PROBE_URI) != sans.public_bytes():
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
