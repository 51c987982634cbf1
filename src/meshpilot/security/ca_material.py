"""The CA's certificates and key: generated and persisted, or plugged in (`cacerts` layout).

Istio's layout, used both for our own CA dir and for a plugged-in CA:

    ca-cert.pem     the signing CA certificate (the root itself when self-signed)
    ca-key.pem      its private key (0600)
    root-cert.pem   the root(s) every workload trusts
    cert-chain.pem  ca-cert and the intermediates above it, up to the root (may be empty)

A plugged-in CA comes from a directory of those files or from a Kubernetes Secret YAML with
those keys (`data`, base64, or `stringData`). It is checked before use: the key matches the
certificate, the certificate is a CA, every link of the chain is signed by the next one and
the chain ends at a root of root-cert.pem, nothing has expired. A problem names the file.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.errors import MeshpilotError
from meshpilot.security.certs import (
    Signer,
    ca_certificate,
    cert_pem,
    key_pem,
    load_key,
    new_key,
    pem_certificates,
    utcnow,
)
from meshpilot.security.files import dir_lock, ensure_private_dir, write_private, write_public

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "CERT_CHAIN",
    "ROOT_CERT",
    "CaError",
    "CaMaterial",
    "load_cacerts",
    "load_or_create",
]

log = logging.getLogger(__name__)

CA_CERT, CA_KEY, ROOT_CERT, CERT_CHAIN = (
    "ca-cert.pem",
    "ca-key.pem",
    "root-cert.pem",
    "cert-chain.pem",
)
_REQUIRED = (CA_CERT, CA_KEY, ROOT_CERT)


class CaError(MeshpilotError):
    """The CA's certificates or key are missing, unreadable or do not fit together."""


@dataclass(frozen=True, slots=True)
class CaMaterial:
    signer: Signer
    # From the signing certificate up to and including the root: what follows a leaf.
    chain: tuple[x509.Certificate, ...]
    roots: tuple[x509.Certificate, ...]
    origin: str  # where it came from, for messages

    @property
    def root(self) -> x509.Certificate:
        return self.chain[-1]

    @property
    def roots_pem(self) -> bytes:
        return b"".join(cert_pem(root) for root in self.roots)


def load_or_create(ca_dir: Path, organization: str) -> CaMaterial:
    """Our own CA: reloaded from `ca_dir`, or a new self-signed root persisted there."""
    ensure_private_dir(ca_dir)
    with dir_lock(ca_dir):
        return _load_or_create(ca_dir, organization)


def _load_or_create(ca_dir: Path, organization: str) -> CaMaterial:
    present = [name for name in _REQUIRED if (ca_dir / name).exists()]
    if present and len(present) < len(_REQUIRED):
        missing = sorted(set(_REQUIRED) - set(present))
        raise CaError(f"{ca_dir}: incomplete CA directory, missing {', '.join(missing)}")
    if present:
        material = _verify(_read_dir(ca_dir), str(ca_dir))
        (ca_dir / CA_KEY).chmod(0o600)
        log.info("CA: loaded from %s (root serial %x)", ca_dir, material.root.serial_number)
        return material
    key = new_key()
    root = ca_certificate(key, common_name="Root CA", organization=organization)
    write_public(ca_dir / CA_CERT, cert_pem(root))
    write_public(ca_dir / ROOT_CERT, cert_pem(root))
    write_public(ca_dir / CERT_CHAIN, cert_pem(root))
    write_private(ca_dir / CA_KEY, key_pem(key))
    log.info("CA: generated a self-signed root in %s (serial %x)", ca_dir, root.serial_number)
    return CaMaterial(Signer(root, key), (root,), (root,), str(ca_dir))


def load_cacerts(path: Path) -> CaMaterial:
    """A plugged-in CA from a `cacerts` directory or a Secret YAML file, verified."""
    if path.is_dir():
        files = _read_dir(path)
    elif path.is_file():
        files = _read_secret(path)
    else:
        raise CaError(f"{path}: no such directory or Secret file (--cacerts)")
    material = _verify(files, str(path))
    log.info(
        "CA: plugged-in CA from %s (signing %s, root %s)",
        path,
        material.signer.cert.subject.rfc4514_string(),
        material.root.subject.rfc4514_string(),
    )
    return material


def _read_dir(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in (*_REQUIRED, CERT_CHAIN):
        try:
            files[name] = (path / name).read_bytes()
        except FileNotFoundError:
            if name in _REQUIRED:
                raise CaError(
                    f"{path / name}: missing (a CA needs {', '.join(_REQUIRED)})"
                ) from None
        except OSError as exc:
            raise CaError(f"{path / name}: cannot read: {exc.strerror}") from exc
    return files


def _read_secret(path: Path) -> dict[str, bytes]:
    try:
        doc = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except YAMLInputError as exc:
        raise CaError(f"{exc} (not a readable YAML Secret)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaError(f"{path}: not a readable YAML Secret: {type(exc).__name__}") from exc
    if not isinstance(doc, Mapping) or doc.get("kind") != "Secret":
        raise CaError(f"{path}: expected a Kubernetes Secret (kind: Secret) in the cacerts layout")
    name = f"Secret {(doc.get('metadata') or {}).get('name', '?')}"
    files: dict[str, bytes] = {}
    for key, value in (doc.get("stringData") or {}).items():
        files[str(key)] = str(value).encode()
    for key, value in (doc.get("data") or {}).items():
        try:
            files[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise CaError(f"{path}: {name}: data.{key}: not valid base64") from None
    missing = [k for k in _REQUIRED if k not in files]
    if missing:
        raise CaError(f"{path}: {name}: data: missing {', '.join(missing)}")
    return files


def _certs(files: Mapping[str, bytes], name: str, origin: str) -> list[x509.Certificate]:
    data = files.get(name, b"")
    if name == CERT_CHAIN and not data.strip():
        return []
    try:
        return pem_certificates(data)
    except ValueError as exc:
        raise CaError(f"{origin}/{name}: not a PEM certificate ({exc})") from exc


def _verify(files: Mapping[str, bytes], origin: str) -> CaMaterial:
    ca_cert = _certs(files, CA_CERT, origin)[0]
    try:
        key = load_key(files[CA_KEY])
    except ValueError as exc:
        raise CaError(f"{origin}/{CA_KEY}: {exc}") from None
    if _spki(key.public_key()) != _spki(ca_cert.public_key()):
        raise CaError(f"{origin}/{CA_KEY}: the key does not match the certificate in {CA_CERT}")
    _check_is_ca(ca_cert, f"{origin}/{CA_CERT}")
    roots = _certs(files, ROOT_CERT, origin)
    chain = _certs(files, CERT_CHAIN, origin)
    if not chain or chain[0] != ca_cert:
        chain.insert(0, ca_cert)
    chain = _link(chain, roots, origin)
    for cert, name in [(c, CERT_CHAIN) for c in chain] + [(r, ROOT_CERT) for r in roots]:
        _check_validity(cert, f"{origin}/{name}")
    return CaMaterial(Signer(ca_cert, key), tuple(chain), tuple(roots), origin)


def _link(
    chain: list[x509.Certificate], roots: list[x509.Certificate], origin: str
) -> list[x509.Certificate]:
    """The chain cut at its root (appended if absent), every link checked."""
    for index, cert in enumerate(chain):
        if cert in roots:
            return chain[: index + 1]
        issuer = chain[index + 1] if index + 1 < len(chain) else _issuer_among(cert, roots)
        if issuer is None:
            raise CaError(
                f"{origin}/{CERT_CHAIN}: {_subject(cert)} is not issued by any root in "
                f"{ROOT_CERT} ({', '.join(_subject(r) for r in roots)})"
            )
        if not _issued_by(cert, issuer):
            raise CaError(
                f"{origin}/{CERT_CHAIN}: {_subject(cert)} is not signed by the next "
                f"certificate {_subject(issuer)}"
            )
        if issuer in roots:
            return [*chain[: index + 1], issuer]
        _check_is_ca(issuer, f"{origin}/{CERT_CHAIN}")
    raise AssertionError("unreachable: the loop returns or raises")


def _issuer_among(cert: x509.Certificate, roots: list[x509.Certificate]) -> x509.Certificate | None:
    return next((root for root in roots if _issued_by(cert, root)), None)


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _check_is_ca(cert: x509.Certificate, where: str) -> None:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise CaError(f"{where}: {_subject(cert)} is not a CA certificate (BasicConstraints CA)")


def _check_validity(cert: x509.Certificate, where: str) -> None:
    now = utcnow()
    if cert.not_valid_after_utc <= now:
        raise CaError(f"{where}: {_subject(cert)} expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    if cert.not_valid_before_utc > now:
        raise CaError(
            f"{where}: {_subject(cert)} is not valid before {cert.not_valid_before_utc:%Y-%m-%d}"
        )


def _subject(cert: x509.Certificate) -> str:
    return repr(cert.subject.rfc4514_string() or "(empty subject)")


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined,no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
