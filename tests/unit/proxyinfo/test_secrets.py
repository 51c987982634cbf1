"""`proxy-config secret`: certificates read with `cryptography`, keys never shown."""

from __future__ import annotations

import datetime
from typing import Any

from meshpilot.proxyinfo import redact_private_keys, render_raw, secret_table
from meshpilot.proxyinfo.secrets import COLUMNS, read_certificate
from tests.unit.proxyinfo.dumps import (
    INGRESS,
    NOW,
    b64,
    certificate,
    control_plane_dump,
    secrets_dump,
)

DAY = datetime.timedelta(days=1)


def _workload_secrets() -> tuple[list[dict[str, Any]], bytes]:
    leaf, key = certificate(False, 0x6FBEE254C229, NOW - DAY, NOW + DAY)
    root, _ = certificate(True, 0x193A543F, NOW - 365 * DAY, NOW + 3650 * DAY)
    entries = [
        {"name": "default", "secret": {"name": "default", "tls_certificate": {
            "certificate_chain": {"inline_bytes": b64(leaf)},
            "private_key": {"inline_bytes": b64(key)},  # as if a dump did not redact it
        }}},
        {"name": "ROOTCA", "secret": {"name": "ROOTCA", "validation_context": {
            "trusted_ca": {"inline_string": root.decode()}}}},
    ]  # fmt: skip
    return entries, key


def test_table_reads_type_validity_serial_and_dates() -> None:
    entries, _ = _workload_secrets()
    warming = [{"name": "kubernetes://missing", "secret": {}}]
    table = secret_table(secrets_dump(entries, warming), now=NOW)
    assert table.columns == COLUMNS
    leaf_dates = ("2026-06-02T00:00:00Z", "2026-05-31T00:00:00Z")
    root_dates = ("2036-05-29T00:00:00Z", "2025-06-01T00:00:00Z")
    assert list(table.rows) == [
        ("kubernetes://missing", "", "WARMING", "false", "", "", ""),
        ("default", "Cert Chain", "ACTIVE", "true", "6fbee254c229", *leaf_dates),
        ("ROOTCA", "CA", "ACTIVE", "true", "193a543f", *root_dates),
    ]


def test_expired_certificate_is_not_valid() -> None:
    entries, _ = _workload_secrets()
    later = NOW + 2 * DAY
    rows = {r[0]: r for r in secret_table(secrets_dump(entries), now=later).rows}
    assert rows["default"][3] == "false" and rows["ROOTCA"][3] == "true"


def test_gateway_credential_from_the_control_plane() -> None:
    rows = secret_table(control_plane_dump(INGRESS)).rows
    assert [r[:3] for r in rows] == [("kubernetes://bookinfo-credential", "Cert Chain", "ACTIVE")]


def test_raw_output_never_holds_the_private_key() -> None:
    entries, key = _workload_secrets()
    chain = entries[0]["secret"]["tls_certificate"]["certificate_chain"]["inline_bytes"]
    dump = secrets_dump(entries)
    for output in ("json", "yaml"):
        text = render_raw(redact_private_keys(dump.section("SecretsConfigDump")), output)
        assert b64(key) not in text and "PRIVATE KEY" not in text and "[redacted]" in text
        assert chain in text  # certificates stay


def test_no_certificate_reads_as_none() -> None:
    assert read_certificate(b"") is None
    assert (
        read_certificate(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        is None
    )
