"""Workload leaves from the DER template are the builder's certificates, byte for byte
(apart from the randomised signature), for every issuer key kind the CA accepts."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_material import CaMaterial
from meshpilot.security.certs import LeafIssuer, PrivateKey, Signer, ca_certificate, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.leaf_template import LeafTemplate, der_length, pem_from_der

from .pki import TD, load_chain, rsa_key, uri, verify_client_chain, workload_csr

SANS = x509.SubjectAlternativeName([uri(f"spiffe://{TD}/ns/shop/sa/cart")])


def _issuer(key: PrivateKey) -> Signer:
    return Signer(ca_certificate(key, common_name="Template CA", organization=TD), key)


@pytest.mark.parametrize(
    "issuer_key",
    [new_key(), ec.generate_private_key(ec.SECP384R1()), rsa_key()],
    ids=["ecdsa-p256", "ecdsa-p384", "rsa-2048"],
)
@pytest.mark.parametrize(
    "start",
    [
        dt.datetime(2026, 11, 23, 4, 5, 6, tzinfo=dt.UTC),
        dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC),  # UTCTime's last year
        dt.datetime(2050, 1, 1, tzinfo=dt.UTC),  # GeneralizedTime from here on
    ],
)
@pytest.mark.parametrize("serial", [1, 0x7F, 0x80, 0xFF << 150, (1 << 159) - 1])
def test_template_tbs_is_the_builders(
    issuer_key: PrivateKey, start: dt.datetime, serial: int
) -> None:
    issuer = LeafIssuer(_issuer(issuer_key))
    template = issuer._der
    assert template is not None, "the template must reproduce the builder for this issuer"
    leaf_key = new_key().public_key()
    end = start + dt.timedelta(hours=24)
    expected = issuer._build(leaf_key, SANS, serial, start, end)
    der = template.sign(leaf_key, SANS, serial, start, end)
    ours = x509.load_der_x509_certificate(der)
    assert ours.tbs_certificate_bytes == expected.tbs_certificate_bytes
    assert ours.signature_algorithm_oid == expected.signature_algorithm_oid
    ours.verify_directly_issued_by(issuer.issuer.cert)
    # What cryptography would write, and what our encoder writes, agree.
    assert pem_from_der(der) == ours.public_bytes(serialization.Encoding.PEM).decode()


def test_ca_leaves_from_the_template_pass_path_validation_for_rsa_csrs() -> None:
    """An RSA 2048 workload key under an RSA issuer: the whole chain validates as a TLS
    server would check a client, and the SPIFFE id is the only name."""
    signer = _issuer(rsa_key())
    ca = CertificateAuthority(CaMaterial(signer, (signer.cert,), (signer.cert,), "test"), TD)
    assert ca._leaves.prepare()
    issued = ca.sign(workload_csr("shop", "cart", rsa_key()), SpiffeId(TD, "shop", "cart"))
    chain = load_chain(issued.chain_pem)
    assert verify_client_chain(chain, chain[-1]) == [uri(f"spiffe://{TD}/ns/shop/sa/cart")]
    assert issued.leaf.subject == x509.Name([])
    san = issued.leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical


@pytest.mark.parametrize(
    "leaf_key", [rsa_key(), ec.generate_private_key(ec.SECP384R1())], ids=["rsa-2048", "p384"]
)
def test_template_tbs_for_every_workload_key_kind(leaf_key: PrivateKey) -> None:
    issuer = LeafIssuer(_issuer(new_key()))
    assert issuer._der is not None
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    args = (leaf_key.public_key(), SANS, 12345, start, start + dt.timedelta(hours=1))
    ours = x509.load_der_x509_certificate(issuer._der.sign(*args))
    assert ours.tbs_certificate_bytes == issuer._build(*args).tbs_certificate_bytes


def test_a_template_that_does_not_match_the_builder_is_refused() -> None:
    """Build-time proof: an extension list that differs from the builder's gives None, and
    the issuer falls back to cryptography's builder."""
    signer = _issuer(new_key())
    issuer = LeafIssuer(signer)
    wrong = [x509.Extension(x509.BasicConstraints.oid, True, x509.BasicConstraints(True, None))]
    assert LeafTemplate.build(signer.cert, signer.key, wrong, issuer._build) is None


def test_certificates_with_a_subject_use_the_builder() -> None:
    issuer = LeafIssuer(_issuer(new_key()))
    subject = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "istiod")])
    cert = issuer.issue(new_key().public_key(), [x509.DNSName("istiod")], dt.timedelta(1), subject)
    assert cert.subject == subject
    assert not cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).critical


@pytest.mark.parametrize(
    ("size", "encoded"),
    [(0, "00"), (127, "7f"), (128, "8180"), (255, "81ff"), (256, "820100"), (65536, "83010000")],
)
def test_der_lengths(size: int, encoded: str) -> None:
    assert der_length(size).hex() == encoded
