"""Secret values never leave in a notification: every string of a payload is scrubbed of the
values of the store's Secrets (and of the notifier's own credentials) before it is sent."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "secret_values"]

MASK = "++++++++"  # what Argo CD shows for a masked Secret value
_MIN_LEN = 4  # shorter values ("1", "true") would mask ordinary words


class Redactor:
    def __init__(self, values: Iterable[str] = ()) -> None:
        # Longest first, so a value containing another is replaced whole.
        self.values = sorted({v for v in values if len(v) >= _MIN_LEN}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def payload(self, data: Any) -> Any:
        """A copy of a JSON-like value with every string redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, Mapping):
            return {self.text(str(k)): self.payload(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.payload(v) for v in data]
        return data


def secret_values(secrets: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every value of the given Secret manifests: `stringData`, and `data` both decoded and
    as stored (base64)."""
    out: list[str] = []
    for secret in secrets:
        for value in (secret.get("stringData") or {}).values():
            out.append(str(value))
        for value in (secret.get("data") or {}).values():
            raw = str(value)
            out.append(raw)
            try:
                out.append(base64.b64decode(raw, validate=True).decode())
            except (binascii.Error, UnicodeDecodeError):
                continue
    # A multi-line value (a key, a certificate) may be quoted a line at a time.
    lines = [line.strip() for v in out if "\n" in v for line in v.splitlines()]
    return [v for v in [*out, *lines] if v]
