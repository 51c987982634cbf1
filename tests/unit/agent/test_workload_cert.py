"""The workload key, its CSR, and the checks applied to a CA's answer before it is served."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from meshpilot.agent.certs.workload import (
    CertificateError,
    accept_chain,
    build_csr,
    new_key,
    spiffe_id,
)
from tests.unit.agent.ca_server import LocalCa, make_root

IDENTITY = "spiffe://cluster.local/ns/bookinfo/sa/reviews"


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_spiffe_id_is_istios_form() -> None:
    assert spiffe_id("cluster.local", "bookinfo", "reviews") == IDENTITY


def test_csr_has_the_spiffe_san_an_empty_subject_and_a_p256_key() -> None:
    key = new_key()
    csr = x509.load_pem_x509_csr(build_csr(key, IDENTITY))
    assert csr.is_signature_valid
    assert csr.subject == x509.Name([])
    san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical  # the subject is empty, so the SAN must be critical (RFC 5280)
    assert san.value.get_values_for_type(x509.UniformResourceIdentifier) == [IDENTITY]
    public = csr.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    assert isinstance(public.curve, ec.SECP256R1)
    assert public == key.key.public_key()


def test_the_key_never_shows_in_a_repr() -> None:
    key = new_key()
    assert "PRIVATE" not in repr(key) and "EllipticCurvePrivateKey" not in repr(key)
    assert b"-----BEGIN PRIVATE KEY-----" in key.pem()  # memory only, for Envoy and TLS


def test_a_good_chain_is_accepted_with_serial_and_validity() -> None:
    ca = LocalCa.create()
    key = new_key()
    leaf = ca.issue(key.key.public_key(), identity=IDENTITY, ttl=600)
    cert = accept_chain([_pem(leaf), ca.root_pem.decode()], key, IDENTITY, ca.root_pem, "root")
    assert cert.serial == f"{leaf.serial_number:x}"
    assert cert.not_after == leaf.not_valid_after_utc
    assert cert.chain_pem.startswith(_pem(leaf).encode())
    assert cert.roots_pem == ca.root_pem
    assert "PRIVATE" not in repr(cert)


def test_a_chain_for_another_key_is_refused() -> None:
    ca = LocalCa.create()
    leaf = ca.issue(new_key().key.public_key(), identity=IDENTITY)
    with pytest.raises(CertificateError, match="not for this workload's key"):
        accept_chain([_pem(leaf)], new_key(), IDENTITY, ca.root_pem, "root")


def test_a_chain_for_another_identity_is_refused() -> None:
    ca = LocalCa.create()
    key = new_key()
    other = "spiffe://cluster.local/ns/bookinfo/sa/ratings"
    leaf = ca.issue(key.key.public_key(), identity=other)
    with pytest.raises(CertificateError, match=f"names \\['{other}'\\], not {IDENTITY}"):
        accept_chain([_pem(leaf)], key, IDENTITY, ca.root_pem, "root")


def test_a_chain_from_an_untrusted_root_is_refused() -> None:
    ca = LocalCa.create()
    key = new_key()
    leaf = ca.issue(key.key.public_key(), identity=IDENTITY)
    _, stranger = make_root("elsewhere")
    stranger_pem = stranger.public_bytes(serialization.Encoding.PEM)
    with pytest.raises(CertificateError, match="does not lead to a root"):
        accept_chain([_pem(leaf)], key, IDENTITY, stranger_pem, "root")
    with pytest.raises(CertificateError, match="chain is broken"):
        accept_chain([_pem(leaf), stranger_pem.decode()], key, IDENTITY, stranger_pem, "root")


def test_garbage_from_the_ca_is_a_clear_error() -> None:
    ca = LocalCa.create()
    with pytest.raises(CertificateError, match="empty certificate chain"):
        accept_chain([], new_key(), IDENTITY, ca.root_pem, "root")
    with pytest.raises(CertificateError, match="chain element 0 is not a PEM certificate"):
        accept_chain(["hello"], new_key(), IDENTITY, ca.root_pem, "root")
    key = new_key()
    leaf = _pem(ca.issue(key.key.public_key(), identity=IDENTITY))
    with pytest.raises(CertificateError, match="/tmp/x: no certificate"):
        accept_chain([leaf], key, IDENTITY, b"", "/tmp/x")
