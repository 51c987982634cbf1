"""`proxy-config secret`: istioctl's summary (RESOURCE NAME, TYPE, STATUS, VALID CERT,
SERIAL NUMBER, NOT AFTER, NOT BEFORE), read from the certificates with `cryptography`; the
detail table adds the workload's IDENTITY (SPIFFE id, else the subject) and the CHAIN
(how many certificates, and who issued the first).

Only certificates are read: a workload certificate chain, or a trust bundle. Private keys
are never decoded or shown (Envoy and the control plane redact them anyway).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from meshpilot.proxyinfo.dump import ConfigDump, DumpedSecret
from meshpilot.proxyinfo.fields import JsonObject, obj, text
from meshpilot.proxyinfo.table import Table

if TYPE_CHECKING:
    from cryptography import x509

__all__ = [
    "COLUMNS",
    "DETAIL_COLUMNS",
    "NO_SECRETS",
    "CertInfo",
    "SecretRow",
    "read_certificate",
    "secret_detail_table",
    "secret_rows",
    "secret_summary",
    "secret_table",
]

COLUMNS = (
    "RESOURCE NAME", "TYPE", "STATUS", "VALID CERT", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE",
)  # fmt: skip
DETAIL_COLUMNS = (*COLUMNS, "IDENTITY", "CHAIN")
NO_SECRETS = "No active or warming secrets found."  # istioctl's line instead of an empty table


@dataclass(frozen=True, slots=True)
class CertInfo:
    """The first certificate of a PEM chain or bundle."""

    is_ca: bool
    serial_number: str  # lowercase hex, as istioctl prints it
    not_before: datetime
    not_after: datetime
    identity: str = ""  # the SPIFFE id (URI SAN), else the subject
    chain_length: int = 1
    issuer: str = ""

    @property
    def chain(self) -> str:
        count = f"{self.chain_length} cert" + ("s" if self.chain_length > 1 else "")
        return f"{count}, issued by {self.issuer}" if self.issuer else count

    def valid_at(self, now: datetime) -> bool:
        return self.not_before <= now <= self.not_after


@dataclass(frozen=True, slots=True)
class SecretRow:
    name: str
    status: str
    cert: CertInfo | None

    def cells(self, now: datetime) -> tuple[str, ...]:
        if self.cert is None:
            return self.name, "", self.status, "false", "", "", ""
        cert = self.cert
        return (
            self.name,
            "CA" if cert.is_ca else "Cert Chain",
            self.status,
            "true" if cert.valid_at(now) else "false",
            cert.serial_number,
            _rfc3339(cert.not_after),
            _rfc3339(cert.not_before),
        )

    def detail_cells(self, now: datetime) -> tuple[str, ...]:
        if self.cert is None:
            return (*self.cells(now), "", "")
        return (*self.cells(now), self.cert.identity, self.cert.chain)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _data_source(source: JsonObject) -> bytes:
    """A DataSource's inline content (config_dump writes bytes as base64)."""
    if encoded := text(source, "inline_bytes"):
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return b""
    return text(source, "inline_string").encode()


def _pem_of(secret: JsonObject) -> bytes:
    chain = _data_source(obj(secret, "tls_certificate", "certificate_chain"))
    return chain or _data_source(obj(secret, "validation_context", "trusted_ca"))


def read_certificate(pem: bytes) -> CertInfo | None:
    """The first certificate in `pem`, or None if there is none that parses."""
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        return None
    from cryptography import x509  # only the secret tables need it: proxy-config starts faster

    try:
        chain = x509.load_pem_x509_certificates(pem)
    except ValueError:
        return None
    cert = chain[0]
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (x509.ExtensionNotFound, ValueError):
        is_ca = False
    return CertInfo(
        is_ca=is_ca,
        serial_number=f"{cert.serial_number:x}",
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        identity=_identity(cert),
        chain_length=len(chain),
        issuer=cert.issuer.rfc4514_string(),
    )


def _identity(cert: x509.Certificate) -> str:
    from cryptography import x509

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, ValueError):
        san = None
    uris = san.get_values_for_type(x509.UniformResourceIdentifier) if san else []
    return str(uris[0]) if uris else cert.subject.rfc4514_string()


def secret_rows(dump: ConfigDump) -> list[SecretRow]:
    return [_row(secret) for secret in dump.secrets()]


def _row(dumped: DumpedSecret) -> SecretRow:
    return SecretRow(dumped.name, dumped.status, read_certificate(_pem_of(dumped.secret)))


def secret_table(dump: ConfigDump, now: datetime | None = None) -> Table:
    moment = now or datetime.now(UTC)
    return Table.of(COLUMNS, (row.cells(moment) for row in secret_rows(dump)))


def secret_detail_table(dump: ConfigDump, now: datetime | None = None) -> Table:
    """istioctl's columns, then IDENTITY and CHAIN."""
    moment = now or datetime.now(UTC)
    return Table.of(DETAIL_COLUMNS, (row.detail_cells(moment) for row in secret_rows(dump)))


def secret_summary(dump: ConfigDump, wide: bool = False) -> str:
    """`proxy-config secret` as istioctl prints it: the table, or its one line when the
    dump has no secrets; `wide` adds IDENTITY and CHAIN."""
    if not dump.secrets():
        return NO_SECRETS
    return (secret_detail_table(dump) if wide else secret_table(dump)).render()
