"""The CA itself: what a signed workload certificate holds, how the CA persists, and how a
plugged-in CA is checked. Chains are verified with cryptography's path validation."""

from __future__ import annotations

import base64
import datetime as dt
import multiprocessing
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from meshpilot.security.ca import CertificateAuthority, CsrError, CsrIdentityError
from meshpilot.security.ca_material import CaError
from meshpilot.security.certs import cert_pem, key_pem, new_key
from meshpilot.security.identity import SpiffeId
from tests.unit.security.pki import (
    TD,
    csr_pem,
    load_chain,
    p521_key,
    rsa_key,
    uri,
    verify_client_chain,
    workload_csr,
    write_cacerts,
)

REVIEWS = SpiffeId(TD, "default", "bookinfo-reviews")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.open(tmp_path / "ca")


def test_workload_certificate_is_an_istio_svid(ca: CertificateAuthority) -> None:
    issued = ca.sign(workload_csr("default", "bookinfo-reviews"), REVIEWS)
    leaf, root = load_chain(issued.chain_pem)
    assert leaf.subject == x509.Name([])  # no CN requirement: the identity is the SAN
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical  # RFC 5280 with an empty subject
    assert san.value.get_values_for_type(x509.UniformResourceIdentifier) == [
        "spiffe://cluster.local/ns/default/sa/bookinfo-reviews"
    ]
    usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = leaf.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(hours=23, minutes=59) < lifetime <= dt.timedelta(hours=24)
    assert root == ca.material.root
    subjects = verify_client_chain([leaf, root], root)
    assert subjects == [uri("spiffe://cluster.local/ns/default/sa/bookinfo-reviews")]


def test_lifetime_requested_and_capped(ca: CertificateAuthority) -> None:
    csr = workload_csr("default", "bookinfo-reviews")
    short = load_chain(ca.sign(csr, REVIEWS, dt.timedelta(seconds=600)).chain_pem)[0]
    assert short.not_valid_after_utc - short.not_valid_before_utc == dt.timedelta(minutes=11)
    huge = load_chain(ca.sign(csr, REVIEWS, dt.timedelta(days=3650)).chain_pem)[0]
    assert huge.not_valid_after_utc - dt.datetime.now(dt.UTC) <= dt.timedelta(days=90)
    with pytest.raises(CsrError, match="negative"):
        ca.sign(csr, REVIEWS, dt.timedelta(seconds=-5))


def test_csr_without_sans_gets_the_proven_identity(ca: CertificateAuthority) -> None:
    leaf = load_chain(ca.sign(csr_pem(new_key()), REVIEWS).chain_pem)[0]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [REVIEWS.uri]


def test_rsa_csr_is_signed(ca: CertificateAuthority) -> None:
    issued = ca.sign(workload_csr("default", "bookinfo-reviews", rsa_key()), REVIEWS)
    assert verify_client_chain(load_chain(issued.chain_pem), ca.material.root)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ((uri("spiffe://cluster.local/ns/prod/sa/bookinfo-reviews"),), "ns/prod/sa/bookinfo-rev"),
        ((uri(REVIEWS.uri), x509.DNSName("reviews.default.svc")), "DNS:reviews.default.svc"),
        ((uri("spiffe://other.domain/ns/default/sa/bookinfo-reviews"),), "other.domain"),
    ],
)
def test_csr_asking_another_identity_is_refused(
    ca: CertificateAuthority, names: tuple[x509.GeneralName, ...], expected: str
) -> None:
    with pytest.raises(CsrIdentityError, match=expected) as caught:
        ca.sign(csr_pem(new_key(), *names), REVIEWS)
    assert "proved only spiffe://cluster.local/ns/default/sa/bookinfo-reviews" in str(caught.value)


def test_invalid_csrs_say_what_is_wrong(ca: CertificateAuthority) -> None:
    good = workload_csr("default", "bookinfo-reviews")
    with pytest.raises(CsrError, match="not a PEM certificate request"):
        ca.sign("hello", REVIEWS)
    with pytest.raises(CsrError, match="cannot be parsed"):
        ca.sign(good[:120] + "AAAA" + good[124:200] + good[-40:], REVIEWS)
    with pytest.raises(CsrError, match="curve secp521r1 is not P-256"):
        ca.sign(workload_csr("default", "bookinfo-reviews", p521_key()), REVIEWS)
    with pytest.raises(CsrError, match="1024 bits"):
        ca.sign(workload_csr("default", "bookinfo-reviews", rsa_key(1024)), REVIEWS)


def test_tampered_csr_signature_is_refused(ca: CertificateAuthority) -> None:
    pem = workload_csr("default", "bookinfo-reviews")
    der = bytearray(x509.load_pem_x509_csr(pem.encode()).public_bytes(Encoding.DER))
    der[-5] ^= 0x01  # a byte of the signature
    tampered = "-----BEGIN CERTIFICATE REQUEST-----\n"
    tampered += base64.encodebytes(bytes(der)).decode()
    tampered += "-----END CERTIFICATE REQUEST-----\n"
    with pytest.raises(CsrError, match="signature"):
        ca.sign(tampered, REVIEWS)


def test_root_is_persisted_private_and_reloaded(tmp_path: Path) -> None:
    directory = tmp_path / "state" / "ca"
    first = CertificateAuthority.open(directory)
    assert _mode(directory) == 0o700
    assert _mode(directory / "ca-key.pem") == 0o600
    assert _mode(directory / "root-cert.pem") == 0o644
    root = first.material.root
    assert root.extensions.get_extension_for_class(x509.BasicConstraints).critical
    assert isinstance(root.public_key(), type(new_key().public_key()))  # ECDSA P-256
    (directory / "ca-key.pem").chmod(0o644)  # loosened by someone: tightened again
    again = CertificateAuthority.open(directory)
    assert again.material.root == root
    assert _mode(directory / "ca-key.pem") == 0o600
    # A certificate from the first run verifies against the reloaded root.
    issued = first.sign(workload_csr("default", "bookinfo-reviews"), REVIEWS)
    assert verify_client_chain(load_chain(issued.chain_pem), again.material.root)


def test_incomplete_ca_dir_is_an_error(tmp_path: Path) -> None:
    CertificateAuthority.open(tmp_path / "ca")
    (tmp_path / "ca" / "ca-key.pem").unlink()
    with pytest.raises(CaError, match=r"incomplete CA directory, missing ca-key.pem"):
        CertificateAuthority.open(tmp_path / "ca")


def test_plugged_in_intermediate_signs_chain_to_the_offline_root(tmp_path: Path) -> None:
    root, inter = write_cacerts(tmp_path / "cacerts")
    ca = CertificateAuthority.open(tmp_path / "ca", cacerts=tmp_path / "cacerts")
    issued = ca.sign(workload_csr("default", "bookinfo-reviews"), REVIEWS)
    chain = load_chain(issued.chain_pem)
    assert chain[1:] == [inter.cert, root.cert]  # leaf -> intermediate -> root
    assert verify_client_chain(chain, root.cert)
    assert (tmp_path / "ca" / "root-cert.pem").read_bytes() == cert_pem(root.cert)
    assert not (tmp_path / "ca" / "ca-key.pem").exists()  # the plugged-in key stays put
    serving = ca.serving_credentials(["istiod.istio-system.svc"])
    assert x509.load_pem_x509_certificates(serving.chain_pem) == [serving.certificate, inter.cert]


def test_plugged_in_ca_from_a_secret_yaml(tmp_path: Path) -> None:
    root, inter = write_cacerts(tmp_path / "files")
    data = {
        name: base64.b64encode((tmp_path / "files" / name).read_bytes()).decode()
        for name in ("ca-cert.pem", "ca-key.pem", "root-cert.pem", "cert-chain.pem")
    }
    lines = "".join(f"  {name}: {value}\n" for name, value in data.items())
    secret = tmp_path / "cacerts.yaml"
    secret.write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: cacerts, namespace: istio-system}\n"
        f"data:\n{lines}"
    )
    ca = CertificateAuthority.open(tmp_path / "ca", cacerts=secret)
    assert ca.material.signer.cert == inter.cert and ca.material.root == root.cert
    secret.write_text(secret.read_text().replace("  ca-key.pem:", "  other:"))
    with pytest.raises(CaError, match=r"cacerts.yaml: Secret cacerts: data: missing ca-key.pem"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=secret)


def test_plugged_in_mismatches_are_named(tmp_path: Path) -> None:
    cacerts = tmp_path / "cacerts"
    write_cacerts(cacerts)
    good_key = (cacerts / "ca-key.pem").read_bytes()
    (cacerts / "ca-key.pem").write_bytes(key_pem(new_key()))
    with pytest.raises(CaError, match=r"cacerts/ca-key.pem: the key does not match .*ca-cert.pem"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=cacerts)
    (cacerts / "ca-key.pem").write_bytes(good_key)
    other_root, _ = write_cacerts(tmp_path / "other")
    (cacerts / "root-cert.pem").write_bytes(cert_pem(other_root.cert))
    (cacerts / "cert-chain.pem").write_bytes(b"")
    with pytest.raises(CaError, match=r"is not issued by any root in root-cert.pem"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=cacerts)
    (cacerts / "ca-key.pem").write_text("-----BEGIN PRIVATE KEY-----\nnope\n")
    with pytest.raises(CaError, match=r"ca-key.pem: not an unencrypted PEM private key") as err:
        CertificateAuthority.open(tmp_path / "ca", cacerts=cacerts)
    assert "nope" not in str(err.value)
    with pytest.raises(CaError, match=r"no such directory or Secret file"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=tmp_path / "missing")


def test_expired_and_non_ca_certificates_are_refused(tmp_path: Path) -> None:
    cacerts = tmp_path / "cacerts"
    write_cacerts(cacerts, lifetime=dt.timedelta(seconds=-30))
    with pytest.raises(CaError, match=r"'CN=Cluster 1 CA,O=corp' expired on"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=cacerts)
    own = CertificateAuthority.open(tmp_path / "ca")  # a leaf offered as CA: its key is not there
    leaf = load_chain(own.sign(workload_csr("a", "b"), SpiffeId(TD, "a", "b")).chain_pem)[0]
    (cacerts / "ca-cert.pem").write_bytes(cert_pem(leaf))
    with pytest.raises(CaError, match=r"ca-key.pem: the key does not match"):
        CertificateAuthority.open(tmp_path / "x", cacerts=cacerts)


def test_a_root_that_is_not_a_ca_is_refused(tmp_path: Path) -> None:
    cacerts = tmp_path / "cacerts"
    write_cacerts(cacerts)
    key = new_key()  # a workload certificate and its key, offered as the CA
    own = CertificateAuthority.open(tmp_path / "own")
    leaf_pem = own.sign(csr_pem(key), SpiffeId(TD, "a", "b")).chain_pem[0]
    (cacerts / "ca-cert.pem").write_text(leaf_pem)
    (cacerts / "ca-key.pem").write_bytes(key_pem(key))
    with pytest.raises(CaError, match=r"ca-cert.pem: '\(empty subject\)' is not a CA certificate"):
        CertificateAuthority.open(tmp_path / "ca", cacerts=cacerts)


def _open_root_serial(directory: str) -> int:
    return CertificateAuthority.open(Path(directory)).material.root.serial_number


def test_control_planes_starting_together_share_one_root(tmp_path: Path) -> None:
    """Several processes creating the CA dir at once (tests, replicas) end with one root."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        serials = pool.map(_open_root_serial, [str(tmp_path / "ca")] * 8)
    assert len(set(serials)) == 1
    assert CertificateAuthority.open(tmp_path / "ca").material.root.serial_number == serials[0]
