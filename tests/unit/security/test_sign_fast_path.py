"""The CA's hot path (the CSR's key bytes and the SAN spliced into a per-CA template, no
key or extension objects built) issues the certificate `cryptography`'s builder makes:
every field and extension, criticality included, and a signature that verifies against
the CA, for every CSR key kind the CA accepts and for a CA that has no template."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from meshpilot.security.ca import CertificateAuthority, CsrError
from meshpilot.security.ca_material import CaMaterial
from meshpilot.security.certs import BACKDATE, PrivateKey, Signer, ca_certificate, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.leaf_template import der_length

from .pki import TD, csr_pem, load_chain, p521_key, rsa_key, uri, verify_client_chain

IDENTITY = SpiffeId(TD, "shop", "cart")


def _ca(key: PrivateKey) -> CertificateAuthority:
    signer = Signer(ca_certificate(key, common_name="Fast CA", organization=TD), key)
    return CertificateAuthority(CaMaterial(signer, (signer.cert,), (signer.cert,), "test"), TD)


def _builders(ca: CertificateAuthority, leaf: x509.Certificate) -> x509.Certificate:
    """What CertificateBuilder makes for the same key, identity, serial and validity."""
    sans = x509.SubjectAlternativeName([uri(IDENTITY.uri)])
    public_key = leaf.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey)
    return ca._leaves._build(
        public_key, sans, leaf.serial_number, leaf.not_valid_before_utc, leaf.not_valid_after_utc
    )


def _same_content(ours: x509.Certificate, theirs: x509.Certificate) -> None:
    assert ours.version == theirs.version == x509.Version.v3
    assert ours.serial_number == theirs.serial_number
    assert ours.issuer == theirs.issuer
    assert ours.subject == theirs.subject == x509.Name([])
    assert ours.not_valid_before_utc == theirs.not_valid_before_utc
    assert ours.not_valid_after_utc == theirs.not_valid_after_utc
    assert ours.public_key() == theirs.public_key()
    assert ours.signature_algorithm_oid == theirs.signature_algorithm_oid
    assert ours.signature_hash_algorithm is not None
    assert [(e.oid, e.critical, e.value) for e in ours.extensions] == [
        (e.oid, e.critical, e.value) for e in theirs.extensions
    ]
    assert ours.tbs_certificate_bytes == theirs.tbs_certificate_bytes


@pytest.mark.parametrize(
    "ca_key",
    [new_key(), ec.generate_private_key(ec.SECP384R1()), rsa_key()],
    ids=["p256", "p384", "rsa"],
)
@pytest.mark.parametrize(
    "csr_key",
    [
        new_key(),
        ec.generate_private_key(ec.SECP384R1()),
        rsa_key(),
        rsa_key(3072),
        rsa.generate_private_key(public_exponent=3, key_size=2048),  # not a usual form
        rsa_key(2072),  # not a usual size
    ],
    ids=["p256", "p384", "rsa2048", "rsa3072", "rsa-e3", "rsa2072"],
)
@pytest.mark.parametrize("asks_san", [True, False], ids=["san", "no-san"])
def test_issued_certificate_is_the_builders(
    ca_key: PrivateKey, csr_key: PrivateKey, asks_san: bool
) -> None:
    ca = _ca(ca_key)
    names = [uri(IDENTITY.uri)] if asks_san else []
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    issued = ca.sign(csr_pem(csr_key, *names), IDENTITY, dt.timedelta(hours=2))
    chain = load_chain(issued.chain_pem)
    leaf = chain[0]
    _same_content(leaf, _builders(ca, leaf))
    leaf.verify_directly_issued_by(ca.material.signer.cert)
    assert verify_client_chain(chain, chain[-1]) == [uri(IDENTITY.uri)]
    assert leaf.public_key() == csr_key.public_key()
    assert before - BACKDATE <= leaf.not_valid_before_utc <= before - BACKDATE + dt.timedelta(2)
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == dt.timedelta(hours=2) + BACKDATE
    assert issued.leaf_der == leaf.public_bytes(serialization.Encoding.DER)


def test_a_ca_without_template_issues_the_same_certificate() -> None:
    ca = _ca(new_key())
    ca._leaves.__dict__["_der"] = None  # as if the template had not proven itself
    issued = ca.sign(csr_pem(new_key(), uri(IDENTITY.uri)), IDENTITY)
    leaf = load_chain(issued.chain_pem)[0]
    _same_content(leaf, _builders(ca, leaf))
    leaf.verify_directly_issued_by(ca.material.signer.cert)


def _compressed_point_csr(key: ec.EllipticCurvePrivateKey) -> str:
    """A valid CSR whose P-256 key is written as a compressed point (not the usual form)."""
    csr = x509.load_pem_x509_csr(csr_pem(key, uri(IDENTITY.uri)).encode())
    usual = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    point = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    algorithm = usual[2 : 2 + usual[3] + 2]  # the AlgorithmIdentifier SEQUENCE
    bits = b"\x03" + der_length(len(point) + 1) + b"\x00" + point
    compressed = b"\x30" + der_length(len(algorithm + bits)) + algorithm + bits
    info = csr.tbs_certrequest_bytes
    header = 2 + (info[1] & 0x7F if info[1] & 0x80 else 0)
    body = info[header : info.index(usual)] + compressed + info[info.index(usual) + len(usual) :]
    info = b"\x30" + der_length(len(body)) + body
    signature = key.sign(info, ec.ECDSA(hashes.SHA256()))
    sig_alg = bytes.fromhex("300a06082a8648ce3d040302")
    sig_bits = b"\x03" + der_length(len(signature) + 1) + b"\x00" + signature
    body = info + sig_alg + sig_bits
    der = b"\x30" + der_length(len(body)) + body
    return x509.load_der_x509_csr(der).public_bytes(serialization.Encoding.PEM).decode()


def test_a_key_in_another_encoding_is_loaded_and_written_in_the_usual_form() -> None:
    ca = _ca(new_key())
    key = new_key()
    pem = _compressed_point_csr(key)
    assert x509.load_pem_x509_csr(pem.encode()).is_signature_valid
    leaf = load_chain(ca.sign(pem, IDENTITY).chain_pem)[0]
    _same_content(leaf, _builders(ca, leaf))
    assert leaf.public_key() == key.public_key()


def test_a_forged_key_in_a_csr_is_refused() -> None:
    """Another key spliced into a signed CSR: the signature check (with the CSR's own key)
    fails before any of the CSR's bytes reach a certificate."""
    ca = _ca(new_key())
    pem = csr_pem(new_key(), uri(IDENTITY.uri))
    csr = x509.load_pem_x509_csr(pem.encode())
    der = csr.public_bytes(serialization.Encoding.DER)
    theirs = csr.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    mine = (
        new_key()
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    forged = x509.load_der_x509_csr(der.replace(theirs, mine))
    with pytest.raises(CsrError, match="signature"):
        ca.sign(forged.public_bytes(serialization.Encoding.PEM), IDENTITY)


@pytest.mark.parametrize(
    ("key", "problem"),
    [(p521_key(), "curve secp521r1 is not P-256 or P-384"), (rsa_key(1024), "1024 bits")],
)
def test_keys_outside_the_usual_forms_are_still_checked(key: PrivateKey, problem: str) -> None:
    with pytest.raises(CsrError, match=problem):
        _ca(new_key()).sign(csr_pem(key, uri(IDENTITY.uri)), IDENTITY)
