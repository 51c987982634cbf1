"""TLS cipher suites Envoy (BoringSSL) accepts for gateway servers (Istio's
security.IsValidCipherSuite). Unknown or repeated suites are ignored, so they are warnings."""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.config.validation.common import Path, Problems

__all__ = ["CIPHER_SUITES", "check_cipher_suites"]

CIPHER_SUITES = frozenset(
    {
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-PSK-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-PSK-AES128-CBC-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "ECDHE-PSK-AES256-CBC-SHA",
        "AES128-GCM-SHA256",
        "AES256-GCM-SHA384",
        "AES128-SHA",
        "PSK-AES128-CBC-SHA",
        "AES256-SHA",
        "PSK-AES256-CBC-SHA",
        "DES-CBC3-SHA",
    }
)


def _valid(suite: str) -> bool:
    """A suite, or an equal-preference group such as `[A|B]`."""
    if suite.startswith("[") and suite.endswith("]"):
        members = suite[1:-1].split("|")
        return bool(members) and all(m in CIPHER_SUITES for m in members)
    return suite in CIPHER_SUITES


def check_cipher_suites(p: Problems, path: Path, suites: Sequence[str]) -> None:
    seen: set[str] = set()
    invalid: set[str] = set()
    duplicate: set[str] = set()
    for suite in suites:
        if not _valid(suite):
            invalid.add(suite)
        elif suite in seen:
            duplicate.add(suite)
        seen.add(suite)
    if invalid:
        p.warning(path, f"ignoring invalid cipher suites: {', '.join(sorted(invalid))}")
    if duplicate:
        p.warning(path, f"ignoring duplicate cipher suites: {', '.join(sorted(duplicate))}")
