"""Private keys never leave through our output. Envoy and the control plane already show
them as `[redacted]`; this is the second line of defence for whatever else a dump holds:
the content of every `private_key` and `password` field and of every generic secret, and
any string (plain or base64) holding a PEM private key. File names stay: they name a key,
they do not hold it."""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["REDACTED", "redact_private_keys"]

REDACTED = "[redacted]"  # Envoy's wording in config_dump
_SECRET_FIELDS = frozenset({"private_key", "password"})
_PEM_MARK = "PRIVATE KEY"


def redact_private_keys(data: Any) -> Any:
    """A copy of `data` with every private key replaced by `{"inline_string": "[redacted]"}`
    (or the string "[redacted]" where a plain string held one)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in _SECRET_FIELDS and isinstance(value, dict) and _holds_inline(value):
                out[key] = {"inline_string": REDACTED}
            elif key == "generic_secret" and isinstance(value, dict) and "secret" in value:
                out[key] = {**redact_private_keys(value), "secret": {"inline_string": REDACTED}}
            else:
                out[key] = redact_private_keys(value)
        return out
    if isinstance(data, list):
        return [redact_private_keys(item) for item in data]
    if isinstance(data, str) and _holds_private_key(data):
        return REDACTED
    return data


def _holds_inline(source: dict[str, Any]) -> bool:
    """A DataSource with content in it (a file name or environment variable only names it)."""
    return any(
        key not in ("filename", "environment_variable", "watched_directory") for key in source
    ) and source != {"inline_string": REDACTED}


def _holds_private_key(text: str) -> bool:
    if _PEM_MARK in text:
        return True
    if len(text) < 40 or " " in text:
        return False
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return _PEM_MARK.encode() in decoded
